"""ruotianluo/cider's API (``pyciderevalcap``, as self-critical.pytorch calls it) on capmetrics'
``cider-d`` and ``cider``: change the import lines, keep the training script.

>>> from capmetrics.integrations.cider import CiderD, Cider   # was: pyciderevalcap.ciderD.ciderD / .cider.cider
>>> scorer = CiderD(df="coco-train-idxs")               # reads data/coco-train-idxs.p, as the original
>>> mean, scores = scorer.compute_score(gts, [{"image_id": 0, "caption": ["a dog runs 0"]}, ...])

``df`` is ``"corpus"`` (document frequencies from the references of each call, one count per
entry of ``res``, as the original counts them), a name looked up as ``data/<name>.p`` from the
working directory (the original's convention), or the path of such a pickle: the
``{"document_frequency": {n-gram tuple: count}, "ref_len": images}`` latin-1 pickle that
self-critical.pytorch's ``scripts/prepro_ngrams.py`` writes (``-words.p`` or ``-idxs.p``).
Captions are split on whitespace and nothing else: they are tokenised already (self-critical
passes token ids as decimal strings, ending with the end token ``0``, which is then an n-gram
word like any other). Unpickling runs code from the file: read only pickles you made or trust.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from capmetrics.component import Distance
from capmetrics.errors import MetricError

__all__ = ["Cider", "CiderD", "df_path", "read_df_pickle"]


def df_path(df: str | os.PathLike[str]) -> Path:
    """The pickle that ``df`` names: an existing path as it is, else ``data/<df>.p`` (from the
    working directory, as ruotianluo/cider opens it)."""
    path = Path(df)
    if path.is_file():
        return path
    named = Path("data") / f"{df}.p"
    if named.is_file():
        return named
    raise MetricError(f"df={str(df)!r}: no such file, and no {named} in {Path.cwd()} "
                      "(a name is looked up as data/<name>.p, as ruotianluo/cider does)")


def read_df_pickle(path: str | os.PathLike[str]) -> tuple[dict[str, int], int]:
    """A prepro_ngrams df pickle as (n-gram -> document frequency, with the n-gram's words joined
    by single spaces; the image count ``ref_len``), the form ``cider-d`` takes."""
    expected = ("expected the pickle self-critical.pytorch's scripts/prepro_ngrams.py writes: "
                "{'document_frequency': {n-gram tuple: count}, 'ref_len': number of images}")
    try:
        with open(path, "rb") as f:
            data = pickle.load(f, encoding="latin1")
    except (OSError, pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, ImportError) as err:
        raise MetricError(f"cannot read the df pickle {path}: {type(err).__name__}: {err}; {expected}") from err
    if not isinstance(data, Mapping) or not {"document_frequency", "ref_len"} <= data.keys():
        got = sorted(map(str, data))[:5] if isinstance(data, Mapping) else type(data).__name__
        raise MetricError(f"{path} is not a prepro_ngrams df pickle (got {got}); {expected}")
    table, ref_len = data["document_frequency"], data["ref_len"]
    if not isinstance(table, Mapping) or not isinstance(ref_len, (int, float, np.integer, np.floating)) or ref_len < 1:
        raise MetricError(f"{path}: 'document_frequency' must be a dict and 'ref_len' a positive number; {expected}")
    df: dict[str, int] = {}
    for gram, count in table.items():
        if not isinstance(gram, tuple) or not 1 <= len(gram) <= 4 or not all(isinstance(w, str) for w in gram):
            raise MetricError(f"{path}: document_frequency key {gram!r:.60} is not a tuple of 1-4 words; {expected}")
        if count != int(count) or count < 0:
            raise MetricError(f"{path}: document_frequency[{gram!r:.60}] = {count!r} is not a count")
        if count:
            df[" ".join(gram)] = int(count)
    return df, int(ref_len)


class CiderD:
    """ruotianluo/cider's ``CiderD``: CIDEr-D values with document frequencies from ``df``.

    Args:
        n: n-gram orders (4 only, as every caller uses).
        sigma: the length penalty's σ (6.0 only: the original accepts it but never passes it on,
            so its scorer always uses 6.0).
        df: ``"corpus"``, a name (``data/<name>.p``) or the path of a prepro_ngrams pickle.
    """

    metric_name = "cider-d"
    method_name = "CIDEr-D"

    def __init__(self, n: int = 4, sigma: float = 6.0, df: str | os.PathLike[str] = "corpus") -> None:
        if n != 4:
            raise MetricError(f"{type(self).__name__}: n={n!r}; only n=4 is supported")
        if sigma != 6.0:
            raise MetricError(f"{type(self).__name__}: sigma={sigma!r}; only sigma=6.0 is supported "
                              "(ruotianluo/cider's CiderD ignores sigma and uses 6.0)")
        from capmetrics.registry.compose import compose

        self._n, self._sigma, self._df = n, sigma, df
        metric = compose(self.metric_name, "distance", tokenizer=compose("whitespace", "tokenizer"))
        assert isinstance(metric, Distance)
        self.metric = metric
        if str(df) != "corpus":
            self.metric.fit_states([read_df_pickle(df_path(df))])  # type: ignore[attr-defined]

    def compute_score(self, gts: Mapping[Hashable, Sequence[str]], res: Sequence[Mapping[str, Any]]
                      ) -> tuple[np.float64, np.ndarray]:
        """(mean, per-entry values) of each ``res`` entry ``{'image_id', 'caption': [text]}``
        against ``gts[image_id]``, in the order of ``res``."""
        texts, refs, refset = _entries(gts, res, type(self).__name__)
        if not texts:
            raise MetricError(f"{type(self).__name__}.compute_score: res is empty")
        scores = self.metric.score_grouped(texts, refs, refset)  # type: ignore[attr-defined]
        values = np.asarray(scores.values, dtype=float)
        return np.mean(values), values

    def method(self) -> str:
        return self.method_name


class Cider(CiderD):
    """ruotianluo/cider's ``Cider``: plain CIDEr (no clipping, no length penalty), same ``df``."""

    metric_name = "cider-original"
    method_name = "CIDEr"

    def __init__(self, n: int = 4, df: str | os.PathLike[str] = "corpus") -> None:
        super().__init__(n=n, df=df)


def _entries(gts: Mapping[Hashable, Sequence[str]], res: Sequence[Mapping[str, Any]], scorer: str
             ) -> tuple[list[str], list[Sequence[str]], np.ndarray]:
    """The candidates of ``res``, the distinct reference lists (one per list object of ``gts``:
    self-critical maps every sample of an image to one list) and which one each candidate uses,
    checked as the original's asserts check them."""
    if not isinstance(gts, Mapping):
        raise MetricError(f"{scorer}.compute_score: gts must be a dict mapping image ids to lists of captions")
    texts: list[str] = []
    refs: list[Sequence[str]] = []
    slot: dict[int, int] = {}
    refset = np.empty(len(res), dtype=np.int64)
    for i, entry in enumerate(res):
        try:
            key, hypo = entry["image_id"], entry["caption"]
        except (TypeError, KeyError, IndexError):
            raise MetricError(f"{scorer}.compute_score: res[{i}] must be a dict with 'image_id' and 'caption'") from None
        if type(hypo) is not list or len(hypo) != 1 or type(hypo[0]) is not str:
            raise MetricError(f"{scorer}.compute_score: res[{i}]['caption'] must be a list of one string, got {hypo!r:.80}")
        ref = gts.get(key, None)
        if ref is None:
            raise MetricError(f"{scorer}.compute_score: res[{i}] has image_id {key!r}, which gts lacks")
        q = slot.get(id(ref))
        if q is None:
            if not isinstance(ref, list) or not ref or not all(isinstance(r, str) for r in ref):
                raise MetricError(f"{scorer}.compute_score: gts[{key!r}] must be a non-empty list of strings")
            q = slot[id(ref)] = len(refs)
            refs.append(ref)
        texts.append(hypo[0])
        refset[i] = q
    return texts, refs, refset
