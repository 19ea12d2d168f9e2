"""ruotianluo/cider's API (``pyciderevalcap``, as self-critical.pytorch calls it) on capmetrics'
``cider-d`` and ``cider``: change the import lines, keep the training script.

>>> from capmetrics.integrations.cider import CiderD, Cider  # was: pyciderevalcap's ciderD, cider
>>> scorer = CiderD(df="coco-train-idxs")  # reads data/coco-train-idxs.p, as the original
>>> mean, scores = scorer.compute_score(gts, [{"image_id": 0, "caption": ["a dog runs 0"]}, ...])
>>> Cider(df="coco-train-idxs").my_self_cider([samples_of_one_image])  # [k x k array]

``df`` is ``"corpus"`` (document frequencies from the references of each call, one count per
entry of ``res``, as the original counts them), a name looked up as ``data/<name>.p`` from the
working directory (the original's convention), or the path of a df file: the
``{"document_frequency": {n-gram tuple: count}, "ref_len": images}`` latin-1 pickle that
self-critical.pytorch's ``scripts/prepro_ngrams.py`` writes (``-words.p`` or ``-idxs.p``), read
without running code (:mod:`capmetrics.integrations.dffiles`), or capmetrics' own df file (JSON,
from ``cider-d``'s ``save_df`` or :func:`~capmetrics.integrations.dffiles.convert_df`).
Captions are split on whitespace and nothing else: they are tokenised already (self-critical
passes token ids as decimal strings, ending with the end token ``0``, which is then an n-gram
word like any other).
"""

from __future__ import annotations

import os
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np
from capmetrics.components.base import Distance
from capmetrics.errors import MetricError
from capmetrics.integrations.dffiles import df_kind, df_path, read_df_pickle

__all__ = ["Cider", "CiderD", "df_path", "read_df_pickle"]


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

    def __init__(
        self, n: int = 4, sigma: float = 6.0, df: str | os.PathLike[str] = "corpus"
    ) -> None:
        if n != 4:
            raise MetricError(f"{type(self).__name__}: n={n!r}; only n=4 is supported")
        if sigma != 6.0:
            raise MetricError(
                f"{type(self).__name__}: sigma={sigma!r}; only sigma=6.0 is supported "
                "(ruotianluo/cider's CiderD ignores sigma and uses 6.0)"
            )
        from capmetrics.registry.compose import compose

        self._n, self._sigma, self._df = n, sigma, df
        path = None if str(df) == "corpus" else df_path(df)
        pickled = path is not None and df_kind(path) == "pickle"
        params: dict[str, Any] = (
            {"df": str(path)} if path is not None and not pickled else {}
        )  # capmetrics' df file
        metric = compose(
            self.metric_name, "distance", tokenizer=compose("whitespace", "tokenizer"), **params
        )
        assert isinstance(metric, Distance)
        self.metric = metric
        if pickled:
            assert path is not None
            self.metric.fit_states([read_df_pickle(path)])  # type: ignore[attr-defined]
        elif path is not None:
            # read it now: errors here, not mid-epoch
            self.metric.fixed_df()  # type: ignore[attr-defined]

    def compute_score(
        self, gts: Mapping[Hashable, Sequence[str]], res: Sequence[Mapping[str, Any]]
    ) -> tuple[np.float64, np.ndarray]:
        """(mean, per-entry values) of each ``res`` entry ``{'image_id', 'caption': [text]}``
        against ``gts[image_id]``, in the order of ``res``."""
        texts, refs, refset = _entries(gts, res, type(self).__name__)
        if not texts:
            raise MetricError(f"{type(self).__name__}.compute_score: res is empty")
        scores = self.metric.score_grouped(texts, refs, refset)  # type: ignore[attr-defined]
        values = np.asarray(scores.values, dtype=float)
        return np.mean(values), values

    def my_self_cider(self, res: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """For each list of captions in ``res`` (one image's samples), the k x k matrix of each
        caption scored against each other one alone (the original's ``my_self_cider``, which
        self-critical's ``self_cider_reward_weight`` uses); needs a df file, as the original."""
        scorer = f"{type(self).__name__}.my_self_cider"
        if self.metric.fixed_df() is None:  # type: ignore[attr-defined]
            raise MetricError(
                f"{scorer}: df='corpus' has no document frequencies for pairs of "
                "samples; give df=<name> (data/<name>.p), as self-critical's init_scorer does"
            )
        if isinstance(res, str) or not isinstance(res, Sequence):
            raise MetricError(
                f"{scorer}: res must be a list of lists of captions (one list per image)"
            )
        cands: list[str] = []
        refs: list[list[str]] = []
        for i, samples in enumerate(res):
            if (
                isinstance(samples, str)
                or not isinstance(samples, Sequence)
                or not all(isinstance(c, str) for c in samples)
            ):
                raise MetricError(
                    f"{scorer}: res[{i}] must be a list of caption strings, got {samples!r:.80}"
                )
            cands += [a for a in samples for _ in samples]
            refs += [[b] for _ in samples for b in samples]
        values = np.asarray(self.metric.pairwise_scores(cands, refs) if cands else [], dtype=float)
        out, start = [], 0
        for samples in res:
            k = len(samples)
            out.append(values[start : start + k * k].reshape(k, k))
            start += k * k
        return out

    def method(self) -> str:
        return self.method_name


class Cider(CiderD):
    """ruotianluo/cider's ``Cider``: plain CIDEr (no clipping, no length penalty), same ``df``."""

    metric_name = "cider-original"
    method_name = "CIDEr"

    def __init__(self, n: int = 4, df: str | os.PathLike[str] = "corpus") -> None:
        super().__init__(n=n, df=df)


def _entries(
    gts: Mapping[Hashable, Sequence[str]], res: Sequence[Mapping[str, Any]], scorer: str
) -> tuple[list[str], list[Sequence[str]], np.ndarray]:
    """The candidates of ``res``, the distinct reference lists (one per list object of ``gts``:
    self-critical maps every sample of an image to one list) and which one each candidate uses,
    checked as the original's asserts check them."""
    if not isinstance(gts, Mapping):
        raise MetricError(
            f"{scorer}.compute_score: gts must be a dict mapping image ids to lists of captions"
        )
    texts: list[str] = []
    refs: list[Sequence[str]] = []
    slot: dict[int, int] = {}
    refset = np.empty(len(res), dtype=np.int64)
    for i, entry in enumerate(res):
        try:
            key, hypo = entry["image_id"], entry["caption"]
        except (TypeError, KeyError, IndexError):
            raise MetricError(
                f"{scorer}.compute_score: res[{i}] must be a dict with 'image_id' and 'caption'"
            ) from None
        if type(hypo) is not list or len(hypo) != 1 or type(hypo[0]) is not str:
            raise MetricError(
                f"{scorer}.compute_score: res[{i}]['caption'] must be a list of one string, "
                f"got {hypo!r:.80}"
            )
        ref = gts.get(key, None)
        if ref is None:
            raise MetricError(
                f"{scorer}.compute_score: res[{i}] has image_id {key!r}, which gts lacks"
            )
        q = slot.get(id(ref))
        if q is None:
            if not isinstance(ref, list) or not ref or not all(isinstance(r, str) for r in ref):
                raise MetricError(
                    f"{scorer}.compute_score: gts[{key!r}] must be a non-empty list of strings"
                )
            q = slot[id(ref)] = len(refs)
            refs.append(ref)
        texts.append(hypo[0])
        refset[i] = q
    return texts, refs, refset
