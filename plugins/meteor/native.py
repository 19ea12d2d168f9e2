"""METEOR 1.5 in Python: the jar's numbers (``-l en -norm``, coco-caption's configuration) without
Java.

Each candidate is aligned to each of its references (normalisation, four matching modules, beam
search: see ``_normalize`` and ``_align``); the reference whose alignment scores highest (the
first of equals) gives the candidate's sufficient statistics and score. The corpus value is the
score of the summed statistics, what the jar's EVAL line returns (not the mean of the scores).
Input rules are ``meteor-jar``'s (``_input``): an empty candidate scores 0.0 and its chosen
reference still counts in the corpus value. Resources are read from the installed jar and
paraphrase table and cached (``_resources``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from functools import lru_cache

import numpy as np
from capmetrics import Distance, Scores, Tokenizer
from capmetrics.errors import MetricError
from capmetrics.plugins.java import check_items
from capmetrics.plugins.meteor._child import stoppable
from capmetrics.plugins.meteor._compiled import aligner
from capmetrics.plugins.meteor._formula import MODULES, aggregate, meteor_scores
from capmetrics.plugins.meteor._input import segmenter
from capmetrics.plugins.meteor._lexicon import Lexicon
from capmetrics.plugins.meteor._resources import cache_root, load_resources, resource_key
from capmetrics.plugins.tokenizers import PTBTokenizer
from capmetrics.registry.spec import Spec

#: The jar's English defaults (task "default" = ranking): alpha, beta, gamma, delta and weights.
ENGLISH = {"alpha": 0.85, "beta": 0.2, "gamma": 0.6, "delta": 0.75}
ENGLISH_WEIGHTS = (1.0, 0.6, 0.8, 0.6)


def lexicon(cache_dir: str | None = None) -> Lexicon:
    """The process-wide word/segment memo over the installed resources."""
    return _lexicon(cache_dir)


@lru_cache(maxsize=2)
def _lexicon(cache_dir: str | None) -> Lexicon:
    return Lexicon(load_resources(cache_dir))


class Meteor(Distance):
    """METEOR 1.5 (English, ``-norm``, exact/stem/synonym/paraphrase) computed natively.

    Args:
        tokenizer: tokenizes candidates and references first (coco-caption's PTB by default).
        alpha, beta, gamma, delta: the jar's parameters (F-mean weight, fragmentation exponent
            and weight, content-word weight); defaults are its English ones.
        modules: matching stages in order, a sequence of exact, stem, synonym, paraphrase.
        weights: one weight per module (the jar's English: 1.0 0.6 0.8 0.6).
        max_tokens: longer captions are cut to their first ``max_tokens`` tokens (with a
            warning), as ``meteor-jar`` does; None keeps them whole.
        cache_dir: root of the resource cache (default ``$CAPMETRICS_CACHE_DIR`` or
            ``~/.cache/capmetrics``).
    """

    name = "meteor"
    requires = ("coco",)  # the jar and paraphrase table pycocoevalcap installs
    path_params = ("cache_dir",)  # a folder it creates: a model file may name it only inside
    languages = ("en",)  # the English resources of METEOR 1.5 (paraphrases, stems, synonyms)
    higher_is_better = True
    distance_offset = 1.0
    accepts_empty_candidates = (
        True  # 0.0, the jar's answer; the references still count in the corpus value
    )

    def __init__(
        self,
        tokenizer: Tokenizer = PTBTokenizer(),
        alpha: float = 0.85,
        beta: float = 0.2,
        gamma: float = 0.6,
        delta: float = 0.75,
        modules: Sequence[str] = MODULES,
        weights: Sequence[float] = ENGLISH_WEIGHTS,
        max_tokens: int | None = 256,
        cache_dir: str | None = None,
    ) -> None:
        self.tokenizer = tokenizer
        self.alpha = alpha
        self.beta = beta
        self.gamma = gamma
        self.delta = delta
        self.modules = modules
        self.weights = weights
        self.max_tokens = max_tokens
        self.cache_dir = cache_dir
        self._checked()  # a wrong setting fails when the metric is built, before any metric runs

    def _checked(self) -> tuple[tuple[str, ...], tuple[float, ...]]:
        # a spec's bare words (``modules=[exact, stem]``) arrive as Spec objects
        modules = tuple(m.name if isinstance(m, Spec) and m.is_bare else m for m in self.modules)
        try:
            weights = tuple(float(w) for w in self.weights)
        except (TypeError, ValueError):
            raise MetricError(
                f"meteor: weights must be numbers, got {list(self.weights)}"
            ) from None
        if (
            not modules
            or any(m not in MODULES for m in modules)
            or len(set(modules)) != len(modules)
        ):
            raise MetricError(
                f"meteor: modules must be distinct names among {list(MODULES)}, got {list(modules)}"
            )
        if len(weights) != len(modules):
            english = dict(zip(MODULES, ENGLISH_WEIGHTS))
            suggested = ", ".join(repr(english[m]) for m in modules)
            raise MetricError(
                f"meteor: give one weight per module: {len(modules)} modules, {len(weights)} "
                f"weights (the English weights of these modules: weights=[{suggested}])"
            )
        for name in ("alpha", "beta", "gamma", "delta"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not 0.0 <= value <= (
                10.0 if name == "beta" else 1.0
            ):
                raise MetricError(
                    f"meteor: {name}={value!r} is out of range (alpha, gamma, delta in [0, 1], "
                    "beta in [0, 10])"
                )
        if self.max_tokens is not None and self.max_tokens < 1:
            raise MetricError(
                f"meteor: max_tokens must be at least 1 or None, got {self.max_tokens}"
            )
        return modules, weights

    def _segmenter(self, texts: Sequence[str]) -> Callable[[str], str]:
        return segmenter(self.tokenizer, texts, self.max_tokens, "meteor")

    def score(self, candidates: Sequence[str], references: Sequence[Sequence[str]]) -> Scores:
        check_items(candidates, references, "meteor")
        self._checked()
        segment = self._segmenter([*candidates, *(r for refs in references for r in refs)])
        return self._score_segments(
            [segment(c) for c in candidates], [[segment(r) for r in refs] for refs in references]
        )

    def prepare(
        self, candidates: Sequence[str], references: Sequence[Sequence[str]], stop: threading.Event
    ) -> None:
        """Load METEOR's resources and compiled aligner now (on first use: build the tables and
        compile the aligner, in child processes), in the background of a run
        (``capmetrics.engine.prestart``); ``score`` then finds them loaded. The texts are not
        needed. Once ``stop`` is set, the build's children are terminated and this returns."""
        self._checked()
        with stoppable(stop):
            if not stop.is_set():
                lexicon(self.cache_dir)
            if not stop.is_set():
                aligner(cache_root(self.cache_dir))

    def score_shard(
        self, candidates: Sequence[str], references: Sequence[Sequence[str]]
    ) -> tuple[Scores, np.ndarray]:
        """:meth:`score` of one shard of a corpus and its corpus statistics (the jar's aggregate
        row, sums of counts): summed over shards, :meth:`corpus_from_sums` gives the corpus value
        of the whole (capmetrics.integrations.torchmetrics combines DDP ranks so)."""
        check_items(candidates, references, "meteor")
        _, weights = self._checked()
        segment = self._segmenter([*candidates, *(r for refs in references for r in refs)])
        stats = self.statistics(
            [segment(c) for c in candidates], [[segment(r) for r in refs] for refs in references]
        )
        params = (self.alpha, self.beta, self.gamma, self.delta, weights)
        sums = aggregate(stats)
        return Scores(meteor_scores(stats, *params), float(meteor_scores(sums, *params)[0])), sums[
            0
        ]

    def corpus_from_sums(self, sums: np.ndarray) -> float:
        """The corpus value of summed :meth:`score_shard` statistics."""
        _, weights = self._checked()
        return float(
            meteor_scores(
                np.asarray(sums, dtype=np.float64)[None, :],
                self.alpha,
                self.beta,
                self.gamma,
                self.delta,
                weights,
            )[0]
        )

    def pairwise(self, a: Sequence[str], b: Sequence[str]) -> np.ndarray:
        """Distances 1 − METEOR(a_i, [b_j]); every text is tokenized once."""
        self._checked()
        segment = self._segmenter([*a, *b])
        sa, sb = [segment(x) for x in a], [segment(y) for y in b]
        values = self._score_segments(
            [x for x in sa for _ in sb], [[y] for _ in sa for y in sb]
        ).values
        return self.to_distance(values).reshape(len(a), len(b))

    def statistics(self, cands: Sequence[str], refs: Sequence[Sequence[str]]) -> np.ndarray:
        """The jar's sufficient statistics (n x 23) of cleaned segments, best reference each."""
        return self._best(self.pair_statistics(cands, refs), refs)

    def pair_statistics(self, cands: Sequence[str], refs: Sequence[Sequence[str]]) -> np.ndarray:
        """The statistics of every candidate-reference pair (in order), from one compiled call."""
        modules, _ = self._checked()
        lex = lexicon(self.cache_dir)
        counts = [len(rs) for rs in refs]
        number, tables = lex.tables([*cands, *(r for rs in refs for r in rs)])
        lex.res.release()  # the table pages this call read go back to the page cache
        align_all = aligner(
            cache_root(self.cache_dir)
        )  # compiled on first use, not with the plugin

        tests = np.repeat(number[: len(cands)], counts)
        keys, stems, function, _, _ = lex.word_arrays()
        nb_off, nb_val = lex.neighbours()
        kinds = np.asarray([MODULES.index(m) for m in modules], dtype=np.int64)
        stats = align_all(
            tests,
            number[len(cands) :],
            tables[0],
            tables[1],
            keys,
            stems,
            function,
            nb_off,
            nb_val,
            *tables[2:],
            kinds,
            kinds == 0,
        )
        return stats.astype(np.float64)

    def _best(self, pairs: np.ndarray, refs: Sequence[Sequence[str]]) -> np.ndarray:
        """The statistics of each candidate's best reference: the first of the highest scores."""
        _, weights = self._checked()
        scores = meteor_scores(pairs, self.alpha, self.beta, self.gamma, self.delta, weights)
        owner = np.repeat(np.arange(len(refs)), [len(rs) for rs in refs])
        order = np.lexsort((np.arange(len(scores)), -scores, owner))
        first = np.ones(len(order), dtype=bool)
        first[1:] = owner[order][1:] != owner[order][:-1]
        return pairs[order[first]]

    def _score_segments(self, cands: list[str], refs: list[list[str]]) -> Scores:
        if not cands:
            return Scores(np.zeros(0), float("nan"))
        _, weights = self._checked()
        stats = self.statistics(cands, refs)
        params = (self.alpha, self.beta, self.gamma, self.delta, weights)
        values = meteor_scores(stats, *params)
        corpus = meteor_scores(aggregate(stats), *params)[0]
        return Scores(values, float(corpus))

    def signature_extra(self) -> dict[str, str]:
        return {"meteor": "1.5 native", "meteor_resources": resource_key()}
