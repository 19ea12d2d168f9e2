"""Every former module path (the integrations' first homes, and core's top-level modules before
core was laid out by concern) gives the very module at its present path: a script, a
``mock.patch`` target or a pickle written for either path keeps working, with no second copy."""

from __future__ import annotations

import importlib
import pickle
import subprocess
import sys

import pytest
from capmetrics._moved import MOVED


@pytest.mark.parametrize(("old", "new"), sorted(MOVED.items()))
def test_every_old_path_is_the_module_at_its_new_place(old: str, new: str) -> None:
    if "torchmetrics" in new:
        pytest.importorskip("torchmetrics")
    module = importlib.import_module(f"capmetrics.{new}")
    former = importlib.import_module(f"capmetrics.{old}")
    assert former is module
    assert module.__spec__.name == module.__name__ == f"capmetrics.{new}"


def test_names_scripts_import_from_the_old_paths() -> None:
    """Names the docs and benchmarks of earlier versions imported."""
    from capmetrics import scoring
    from capmetrics.compat import cider, pycocoevalcap
    from capmetrics.compat.cider import Cider, CiderD, df_path, read_df_pickle
    from capmetrics.compat.pycocoevalcap import COCOEvalCap, PTBTokenizer, spice_available
    from capmetrics.engine.results import Results as PresentResults
    from capmetrics.engine.scoring import score
    from capmetrics.integrations import cider as present_cider
    from capmetrics.results import Results
    from capmetrics.rewards import BleuReward, CiderDReward, decode, self_critical

    assert scoring.score is score and Results is PresentResults and cider is present_cider
    assert (Cider, CiderD, df_path, read_df_pickle) == (
        cider.Cider,
        cider.CiderD,
        cider.df_path,
        cider.read_df_pickle,
    )
    assert COCOEvalCap is pycocoevalcap.COCOEvalCap and PTBTokenizer is pycocoevalcap.PTBTokenizer
    assert spice_available is pycocoevalcap.spice_available
    assert all(callable(f) for f in (BleuReward, CiderDReward, decode, self_critical))


def test_a_fresh_interpreter_importing_old_paths_first_loads_one_copy() -> None:
    """Old paths imported before the new ones (as an old script does), then a pickle that names
    a class by its former module: one module object, and the class it names is the present one."""
    code = """
import pickle, sys
import capmetrics.scoring as old_scoring
from capmetrics.compat.cider import CiderD
import capmetrics.engine.scoring as scoring, capmetrics.integrations.cider as cider
assert old_scoring is scoring and CiderD is cider.CiderD
copies = [n for n, m in sys.modules.items() if m is scoring]
assert sorted(copies) == ["capmetrics.engine.scoring", "capmetrics.scoring"], copies
assert not any(getattr(m, "__file__", None) == scoring.__file__
               for n, m in sys.modules.items() if m is not scoring)
# a pickle of an earlier version names capmetrics.errors.MetricError / capmetrics.spec.Spec
from capmetrics.components.spec import Spec
data = pickle.dumps(Spec("bleu", ()), protocol=2).replace(
    b"capmetrics.components.spec", b"capmetrics.spec")
assert b"capmetrics.spec" in data and type(pickle.loads(data)) is Spec
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_pickles_name_the_present_paths() -> None:
    from capmetrics.engine.results import Results

    assert Results.__module__ == "capmetrics.engine.results"
    assert b"capmetrics.errors" in pickle.dumps(__import__("capmetrics").MetricError("x"))
