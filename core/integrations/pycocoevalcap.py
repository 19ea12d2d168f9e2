"""pycocoevalcap's API on capmetrics' metrics: change the import lines, keep the script.

>>> from capmetrics.integrations.pycocoevalcap import COCOEvalCap          # was: pycocoevalcap.eval
>>> from capmetrics.integrations.pycocoevalcap import Bleu, Cider, PTBTokenizer

``COCOEvalCap(coco, cocoRes)`` takes pycocotools ``COCO`` objects (or plain dicts: COCO
annotations, and a results list or results annotations), honours ``params['image_id']`` and fills
``eval``, ``imgToEval`` and ``evalImgs`` with pycocoevalcap's keys, types and order. The scorer
classes take pre-tokenised ``gts``/``res`` dicts and return what pycocoevalcap's return: BLEU
lists of n values, per-image values in the order of ``gts`` (sorted ids for SPICE), METEOR's corpus
value from the jar's aggregate. The metrics are found by their registered names (``bleu-N``,
``meteor``, ``rouge-l``, ``cider-d``, ``spice``, ``ptb``), so any implementation registered under
those names is used. Bad input raises :class:`~capmetrics.errors.MetricError` naming the image id
where pycocoevalcap would fail an ``assert``.
"""

from __future__ import annotations

import warnings
from collections.abc import Hashable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from typing import Any

import numpy as np
from capmetrics.components.base import Component, Distance, Scores, Tokenizer
from capmetrics.errors import CapmetricsError, MetricError

__all__ = [
    "COCOEvalCap",
    "Bleu",
    "Meteor",
    "Rouge",
    "Cider",
    "Spice",
    "PTBTokenizer",
    "SPICE_CATEGORIES",
    "SPICE_FIELDS",
    "spice_available",
]

Gts = Mapping[Hashable, Sequence[str]]


@cache
def _component(spec: str) -> Component:
    from capmetrics.registry.compose import compose

    return compose(spec)


@cache
def _metric(name: str) -> Distance:
    """The distance registered as ``name``, reading text that is tokenised already."""
    from capmetrics.registry.compose import compose

    cls = type(_component(name))
    params: dict[str, Any] = (
        {"tokenizer": _component("whitespace")} if "tokenizer" in cls.param_names() else {}
    )
    metric = compose(name, "distance", **params)
    assert isinstance(metric, Distance)
    return metric


def _pairs(
    gts: Gts, res: Gts, scorer: str, order: list[Hashable] | None = None
) -> tuple[list[str], list[list[str]]]:
    """Candidates and reference lists in the order of ``gts`` (or ``order``), checked as
    pycocoevalcap's asserts check them."""
    if not isinstance(gts, Mapping) or not isinstance(res, Mapping):
        raise MetricError(
            f"{scorer}: gts and res must be dicts mapping image ids to lists of captions"
        )
    if gts.keys() != res.keys():
        only_gts, only_res = set(gts) - set(res), set(res) - set(gts)
        raise MetricError(
            f"{scorer}: gts and res must have the same image ids; only in gts: "
            f"{sorted(map(repr, only_gts))[:5]}, only in res: {sorted(map(repr, only_res))[:5]}"
        )
    cands, refs = [], []
    for key in order if order is not None else gts:
        hypo, ref = res[key], gts[key]
        if not isinstance(hypo, list) or len(hypo) != 1 or not isinstance(hypo[0], str):
            raise MetricError(
                f"{scorer}: res[{key!r}] must be a list of exactly one caption string, "
                f"got {hypo!r:.80}"
            )
        if not isinstance(ref, list) or not ref or not all(isinstance(r, str) for r in ref):
            raise MetricError(f"{scorer}: gts[{key!r}] must be a non-empty list of caption strings")
        cands.append(hypo[0])
        refs.append(ref)
    return cands, refs


class Bleu:
    """pycocoevalcap's ``Bleu(n)``: ``compute_score`` returns ``(n corpus values, n lists)``
    (``verbose`` is accepted and ignored: nothing is printed)."""

    def __init__(self, n: int = 4) -> None:
        if n not in (1, 2, 3, 4):
            raise MetricError(f"Bleu: n must be 1, 2, 3 or 4, got {n!r}")
        self._n = n

    def compute_score(
        self, gts: Gts, res: Gts, verbose: int = 1
    ) -> tuple[list[float], list[list[float]]]:
        cands, refs = _pairs(gts, res, "Bleu")
        scores = _metric(f"bleu-{self._n}").score(cands, refs)
        by_order = np.asarray(scores.details["by_order"], dtype=float).reshape(len(cands), self._n)
        corpus = [float(x) for x in scores.details["corpus_by_order"]]
        return corpus, by_order.T.tolist()

    def method(self) -> str:
        return "Bleu"


class Meteor:
    """pycocoevalcap's ``Meteor``: ``(corpus value from the jar's aggregate, list of floats)``."""

    def compute_score(self, gts: Gts, res: Gts) -> tuple[float, list[float]]:
        cands, refs = _pairs(gts, res, "Meteor")
        scores = _metric("meteor").score(cands, refs)
        return float(scores.corpus), [float(v) for v in scores.values]

    def method(self) -> str:
        return "METEOR"


def _mean_and_values(metric: str, gts: Gts, res: Gts, scorer: str) -> tuple[np.float64, np.ndarray]:
    """pycocoevalcap's return shape for Rouge and Cider: (mean as numpy float, numpy array)."""
    cands, refs = _pairs(gts, res, scorer)
    values = np.asarray(_metric(metric).score(cands, refs).values, dtype=float)
    return np.mean(values), values


class Rouge:
    """pycocoevalcap's ``Rouge``: ``(mean as numpy float, numpy array)``."""

    def compute_score(self, gts: Gts, res: Gts) -> tuple[np.float64, np.ndarray]:
        return _mean_and_values("rouge-l", gts, res, "Rouge")

    def method(self) -> str:
        return "Rouge"


class Cider:
    """pycocoevalcap's ``Cider`` (CIDEr-D, document frequencies from the references of the call)."""

    def __init__(self, test: Any = None, refs: Any = None, n: int = 4, sigma: float = 6.0) -> None:
        if n != 4 or sigma != 6.0:
            raise MetricError(
                f"Cider: only n=4 and sigma=6.0 (coco-caption's values) are supported, "
                f"got n={n}, sigma={sigma}"
            )
        self._n, self._sigma = n, sigma

    def compute_score(self, gts: Gts, res: Gts) -> tuple[np.float64, np.ndarray]:
        return _mean_and_values("cider-d", gts, res, "Cider")

    def method(self) -> str:
        return "CIDEr"


class Spice:
    """pycocoevalcap's ``Spice``: per image (in sorted id order) a dict of categories, each with
    its precision, recall, F-score and tuple counts, as the jar reports them; needs SPICE's
    CoreNLP jars (``capmetrics setup spice``)."""

    def compute_score(
        self, gts: Gts, res: Gts
    ) -> tuple[np.float64, list[dict[str, dict[str, float]]]]:
        order: list[Hashable] = sorted(gts)  # type: ignore[type-var]  # as pycocoevalcap sorts
        cands, refs = _pairs(gts, res, "Spice", order)
        scores = _metric("spice").score(cands, refs)
        return np.mean(np.asarray(scores.values, dtype=float)), _spice_tables(scores, len(order))

    def method(self) -> str:
        return "SPICE"


#: The order of the SPICE jar's JSON output (Java HashMap order), which pycocoevalcap's
#: ``imgToEval`` keeps.
SPICE_CATEGORIES = ("All", "Relation", "Cardinality", "Attribute", "Size", "Color", "Object")
SPICE_FIELDS = ("pr", "re", "f", "fn", "numImages", "fp", "tp")


def _spice_tables(scores: Scores, n: int) -> list[dict[str, dict[str, float]]]:
    """Per item, category -> {pr, re, f, fn, numImages, fp, tp} (as pycocoevalcap's ``Spice`` gives
    them) from the details of the ``spice`` metric: per-category arrays, or per-item ``scores``."""
    details = scores.details
    if "scores" in details:
        return [
            {c: {k: _float(v) for k, v in t.items()} for c, t in s.items()}
            for s in details["scores"]
        ]
    tables = [c for c in SPICE_CATEGORIES if isinstance(details.get(c), Mapping)]
    if tables:
        return [
            {
                c: {
                    f: 1.0 if f == "numImages" else float(details[c][f][i])
                    for f in SPICE_FIELDS
                    if f == "numImages" or f in details[c]
                }
                for c in tables
            }
            for i in range(n)
        ]
    categories = details.get("categories", {})
    return [{c: {"f": float(v[i])} for c, v in categories.items()} for i in range(n)]


def _float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")


class PTBTokenizer:
    """pycocoevalcap's ``PTBTokenizer``: ``{id: [{'caption': text}, ...]}`` to
    ``{id: [tokenised, ...]}``,
    computed by the tokenizer registered as ``ptb``."""

    def tokenize(
        self, captions_for_image: Mapping[Hashable, Sequence[Mapping[str, Any]]]
    ) -> dict[Hashable, list[str]]:
        keys, texts = [], []
        for key, anns in captions_for_image.items():
            for n, ann in enumerate(anns):
                caption = ann.get("caption") if isinstance(ann, Mapping) else None
                if not isinstance(caption, str):
                    raise MetricError(
                        f"PTBTokenizer: caption {n} of image {key!r} must be a dict with a "
                        "'caption' string"
                    )
                keys.append(key)
                texts.append(caption.replace("\n", " "))
        tokenizer = _component("ptb")
        assert isinstance(tokenizer, Tokenizer)
        out: dict[Hashable, list[str]] = {}
        for key, line in zip(keys, tokenizer.tokenize_joined(texts)):
            out.setdefault(key, []).append(line)
        return out


# --------------------------------------------------------------------------------------------
class _Annotations:
    """The part of a pycocotools ``COCO`` object that ``COCOEvalCap`` reads, from plain data."""

    def __init__(self, data: Any, what: str) -> None:
        self.imgToAnns: dict[Hashable, list[Mapping[str, Any]]]
        if hasattr(data, "imgToAnns") and hasattr(data, "getImgIds"):
            self.imgToAnns, self._ids = data.imgToAnns, list(data.getImgIds())
            return
        anns = data.get("annotations") if isinstance(data, Mapping) else data
        if not isinstance(anns, list) or not all(
            isinstance(a, Mapping) and "image_id" in a for a in anns
        ):
            raise MetricError(
                f"COCOEvalCap: {what} must be a pycocotools COCO object, a dict with an "
                "'annotations' list, or a list of {'image_id', 'caption'} dicts"
            )
        self.imgToAnns = {}
        for ann in anns:
            self.imgToAnns.setdefault(ann["image_id"], []).append(ann)
        images = data.get("images") if isinstance(data, Mapping) else None
        self._ids = (
            [img["id"] for img in images] if isinstance(images, list) else list(self.imgToAnns)
        )

    def getImgIds(self) -> list[Hashable]:  # noqa: N802 - pycocotools' name
        return list(self._ids)


def spice_available() -> bool:
    """Whether the metric registered as ``spice`` can run here (its jars and Java are present)."""
    try:
        spice = _component("spice")
        check = getattr(spice, "check_resources", None)
        command = getattr(spice, "command", None)
        if check is not None:
            check()
        elif command is not None:
            command("input.json", "output.json")
    except CapmetricsError:
        return False
    return True


def _compute(scorer: Any, gts: Gts, res: Gts) -> tuple[Any, Any]:
    return (
        scorer.compute_score(gts, res, verbose=0)
        if isinstance(scorer, Bleu)
        else scorer.compute_score(gts, res)
    )


class COCOEvalCap:
    """pycocoevalcap's ``COCOEvalCap``: ``evaluate()`` fills ``eval`` (corpus values),
    ``imgToEval`` (per image, in ``params['image_id']`` order) and ``evalImgs``.

    Args:
        coco: the references, a pycocotools ``COCO`` or a COCO annotation dict.
        cocoRes: the results, ``coco.loadRes(...)`` or a results list/dict (one caption per image).
        spice: compute SPICE; default: when its jars are present (pycocoevalcap always tries),
            with a warning naming ``capmetrics setup spice`` when they are not.
        verbose: print pycocoevalcap's progress lines and values.
    """

    def __init__(
        self, coco: Any, cocoRes: Any, *, spice: bool | None = None, verbose: bool = True
    ) -> None:  # noqa: N803
        self.evalImgs: list[dict[str, Any]] = []
        self.eval: dict[str, Any] = {}
        self.imgToEval: dict[Hashable, dict[str, Any]] = {}
        self.coco = coco if hasattr(coco, "imgToAnns") else _Annotations(coco, "coco")
        self.cocoRes = (
            cocoRes if hasattr(cocoRes, "imgToAnns") else _Annotations(cocoRes, "cocoRes")
        )
        self.params: dict[str, Any] = {"image_id": self.coco.getImgIds()}
        self.spice = spice
        self.verbose = verbose

    def _say(self, text: str) -> None:
        if self.verbose:
            print(text)

    def evaluate(self) -> None:
        gts: dict[Any, Any] = {}
        res: dict[Any, Any] = {}
        for img_id in self.params["image_id"]:
            gts[img_id] = self.coco.imgToAnns[img_id]
            res[img_id] = self.cocoRes.imgToAnns[img_id] if img_id in self.cocoRes.imgToAnns else []
        self._say("tokenization...")
        tokenizer = PTBTokenizer()
        gts, res = tokenizer.tokenize(gts), tokenizer.tokenize(res)
        missing = [k for k in gts if k not in res]
        if missing:
            raise MetricError(f"COCOEvalCap: image(s) {missing[:10]} have no result caption")
        self._say("setting up scorers...")
        scorers: list[tuple[Any, Any]] = [
            (Bleu(4), ["Bleu_1", "Bleu_2", "Bleu_3", "Bleu_4"]),
            (Meteor(), "METEOR"),
            (Rouge(), "ROUGE_L"),
            (Cider(), "CIDEr"),
        ]
        if self.spice or (self.spice is None and spice_available()):
            scorers.append((Spice(), "SPICE"))
        elif self.spice is None:
            warnings.warn(
                "COCOEvalCap: SPICE is not set up here, so eval has no 'SPICE' (pycocoevalcap "
                "would compute it): run `capmetrics setup spice`, or pass spice=False to leave "
                "it out without this warning",
                UserWarning,
                stacklevel=2,
            )
        # The scorers run side by side (a JVM-backed METEOR waits on its process, the others
        # compute meanwhile); values are recorded in pycocoevalcap's order.
        with ThreadPoolExecutor(len(scorers)) as pool:
            running = [pool.submit(_compute, scorer, gts, res) for scorer, _ in scorers]
            for (scorer, method), future in zip(scorers, running):
                self._say(f"computing {scorer.method()} score...")
                score, scores = future.result()
                if isinstance(method, list):
                    for sc, scs, m in zip(score, scores, method):
                        self.setEval(sc, m)
                        self.setImgToEvalImgs(scs, gts.keys(), m)
                        self._say(f"{m}: {sc:0.3f}")
                else:
                    self.setEval(score, method)
                    self.setImgToEvalImgs(scores, gts.keys(), method)
                    self._say(f"{method}: {score:0.3f}")
        self.setEvalImgs()

    def setEval(self, score: Any, method: str) -> None:  # noqa: N802 - pycocoevalcap's names
        self.eval[method] = score

    def setImgToEvalImgs(self, scores: Sequence[Any], imgIds: Any, method: str) -> None:  # noqa: N802, N803
        for img_id, score in zip(imgIds, scores):
            entry = self.imgToEval.setdefault(img_id, {"image_id": img_id})
            entry[method] = score

    def setEvalImgs(self) -> None:  # noqa: N802
        self.evalImgs = list(self.imgToEval.values())
