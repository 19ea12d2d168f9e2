"""The former import paths of the integrations re-export the very objects of
:mod:`capmetrics.integrations` (a script written for either path keeps working)."""

from __future__ import annotations

import importlib

import pytest

MOVED = [
    ("capmetrics.compat.pycocoevalcap", "pycocoevalcap"),
    ("capmetrics.compat.cider", "cider"),
    ("capmetrics.rewards", "rewards"),
    ("capmetrics.torchmetrics", "torchmetrics"),
    ("capmetrics.hf", "hf"),
]


@pytest.mark.parametrize(("old", "new"), MOVED)
def test_every_old_public_name_is_the_same_object(old: str, new: str) -> None:
    if new == "torchmetrics":
        pytest.importorskip("torchmetrics")
    module = importlib.import_module(f"capmetrics.integrations.{new}")
    former = importlib.import_module(old)
    assert former.__all__ == module.__all__ and len(module.__all__) >= 2
    for name in module.__all__:
        assert getattr(former, name) is getattr(module, name), f"{old}.{name}"


def test_names_scripts_import_from_the_old_paths() -> None:
    """Names the docs and benchmarks of earlier versions imported."""
    from capmetrics.compat.cider import Cider, CiderD, df_path, read_df_pickle
    from capmetrics.compat.pycocoevalcap import COCOEvalCap, PTBTokenizer, spice_available
    from capmetrics.integrations import cider, pycocoevalcap
    from capmetrics.rewards import BleuReward, CiderDReward, decode, self_critical

    assert (Cider, CiderD, df_path, read_df_pickle) == (
        cider.Cider,
        cider.CiderD,
        cider.df_path,
        cider.read_df_pickle,
    )
    assert COCOEvalCap is pycocoevalcap.COCOEvalCap and PTBTokenizer is pycocoevalcap.PTBTokenizer
    assert spice_available is pycocoevalcap.spice_available
    assert all(callable(f) for f in (BleuReward, CiderDReward, decode, self_critical))
