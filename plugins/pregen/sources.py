"""Probability sources for pre-gen metrics: the file formats and ``prob-file`` (the model
sources are in :mod:`capmetrics.plugins.pregen.models`).

Every source has ``probabilities(dataset) -> RaggedProbs``: for each item of the dataset (in
order), each reference and each position (END included), the probability of the reference token
and whether it was the model's top choice (target probability ≥ every other probability).

File formats (``prob-file``), chosen by suffix:

``.jsonl``
    one item per line: ``{"id": "img1", "references": [{"p": [0.5, 0.4, 0.6], "top": [true,
    true, false]}, ...]}``; ``"rank": [0, 0, 3]`` may replace ``"top"`` (top ⇔ rank 0), and an
    optional ``"tokens"`` list is ignored. A line ``{"format": "capmetrics-pregen-probs",
    "model": "..."}`` may come first.
``.npz``
    arrays ``p`` (float), ``top`` (bool), ``caption_offsets``, ``item_offsets`` (int, with a
    leading 0), ``item_ids`` (str), plus ``format`` and ``model`` (0-d str arrays).
``.json``
    the nested toy form: a list of items, each a list of references, each a list of ``[p, rank]``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from capmetrics import DataError, ProbabilitySource
from capmetrics.io.strict_json import parse_json
from capmetrics.plugins.pregen.compute import RaggedProbs

FORMAT = "capmetrics-pregen-probs"


# --------------------------------------------------------------------------------------------
# files
# --------------------------------------------------------------------------------------------
def read_probs(path: str | Path) -> RaggedProbs:
    """Read probabilities from a ``.jsonl``, ``.npz`` or nested ``.json`` file.

    Raises:
        DataError: naming the file, line and item for malformed or invalid entries.
    """
    path = Path(path)
    if not path.exists():
        raise DataError([f"{path}: no such file"], "cannot read probabilities")
    from capmetrics.io.strict_json import check_regular_file, read_json

    check_regular_file(path, "a probabilities file")  # a FIFO or a device would hang or never end
    if path.suffix == ".npz":
        with np.load(path, allow_pickle=False) as z:
            return RaggedProbs(
                z["p"],
                z["top"],
                z["caption_offsets"],
                z["item_offsets"],
                tuple(z["item_ids"].tolist()),
                str(z["model"]) if "model" in z else "",
            )
    if path.suffix == ".json":
        return RaggedProbs.from_nested(read_json(path, "a probabilities file"))
    return _read_jsonl(path)


def _read_jsonl(path: Path) -> RaggedProbs:
    items, ids, model, problems = [], [], "", []
    with path.open(encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = parse_json(line, str(path), line_no)
                if "format" in row and "references" not in row:
                    model = str(row.get("model", ""))
                    continue
                items.append([_pairs(ref) for ref in row["references"]])
                ids.append(row.get("id", len(ids)))
            except (
                DataError
            ) as err:  # bad JSON, nesting past the parser's limit, 5000-digit numbers
                problems.extend(map(str, err.problems))
            except (ValueError, KeyError, TypeError) as err:
                problems.append(f"{path}:{line_no}: {type(err).__name__}: {err}")
    if problems:
        raise DataError(problems, f"cannot read probabilities from {path}")
    return RaggedProbs.from_nested(items, ids, model)


def _pairs(ref: Mapping[str, Any]) -> list[tuple[float, Any]]:
    p = ref["p"]
    flags = ref["top"] if "top" in ref else [int(r) for r in ref["rank"]]
    if len(flags) != len(p):
        raise ValueError(f"'p' has {len(p)} entries but 'top'/'rank' has {len(flags)}")
    return list(zip(p, [bool(x) if "top" in ref else x for x in flags]))


def write_probs(probs: RaggedProbs, path: str | Path) -> None:
    """Write probabilities as ``.npz`` or ``.jsonl`` (by suffix)."""
    path = Path(path)
    if path.suffix == ".npz":
        np.savez_compressed(
            path,
            p=probs.p,
            top=probs.top,
            caption_offsets=probs.caption_offsets,
            item_offsets=probs.item_offsets,
            item_ids=np.array([str(i) for i in probs.item_ids]),
            format=np.array(FORMAT),
            model=np.array(probs.model),
        )
        return
    with path.open("w", encoding="utf-8") as f:
        f.write(json.dumps({"format": FORMAT, "model": probs.model}) + "\n")
        for i, item_id in enumerate(probs.item_ids):
            refs = []
            for c in range(probs.item_offsets[i], probs.item_offsets[i + 1]):
                lo, hi = probs.caption_offsets[c], probs.caption_offsets[c + 1]
                refs.append({"p": probs.p[lo:hi].tolist(), "top": probs.top[lo:hi].tolist()})
            f.write(json.dumps({"id": _jsonable(item_id), "references": refs}) + "\n")


def _jsonable(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


class ProbabilityFile(ProbabilitySource):
    """Probabilities read from a file (``.jsonl``, ``.npz`` or nested ``.json``).

    Args:
        path: the file.
    """

    name = "prob-file"

    path_params = ("path",)

    def __init__(self, path: str) -> None:
        self.path = path

    def probabilities(self, dataset: Any = None) -> RaggedProbs:
        """The file's probabilities; with a dataset, its items in the dataset's order.

        Raises:
            DataError: a dataset item missing from the file, or a different number of references.
        """
        probs = read_probs(self.path)
        if dataset is None:
            return probs
        index = {str(i): k for k, i in enumerate(probs.item_ids)}
        problems, order = [], []
        for item in dataset:
            k = index.get(str(item.id))
            if k is None:
                problems.append(f"item {item.id!r}: not in {self.path}")
            elif probs.references_per_item[k] != len(item.references):
                problems.append(
                    f"item {item.id!r}: {probs.references_per_item[k]} references in "
                    f"{self.path}, {len(item.references)} in the dataset"
                )
            order.append(k)
        if problems:
            raise DataError(problems, "probabilities do not match the dataset")
        return probs.subset(order)


# --------------------------------------------------------------------------------------------
# teacher forcing
# --------------------------------------------------------------------------------------------


def all_sources() -> tuple[type[ProbabilitySource], ...]:
    from capmetrics.plugins.pregen.models import HFCausalLM, TorchModel

    return (ProbabilityFile, TorchModel, HFCausalLM)
