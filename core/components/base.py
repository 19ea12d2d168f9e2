"""Base classes of the component kinds.

Components follow scikit-learn's constructor convention: ``__init__`` takes keyword parameters
with defaults and stores each under the same attribute name, nothing else. Parameters, the
canonical spec string and the signature are all read back from that constructor signature.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from capmetrics.errors import CapmetricsError, MetricError

#: The component kinds, in the order of the hookspecs.
KINDS: tuple[str, ...] = (
    "distance",
    "embedder",
    "aggregator",
    "statistic",
    "tokenizer",
    "learner",
    "probability-source",
    "pregen-metric",
    "image-text-model",
    "image-text-metric",
)
#: The kinds whose components score captions (what ``capmetrics score --metric`` accepts).
METRIC_KINDS: tuple[str, ...] = ("distance", "statistic", "image-text-metric")


def init_hints(cls: type[Component]) -> dict[str, Any]:
    """The resolved annotations of ``cls.__init__`` (none where a forward reference does not
    resolve: composing the component reports that itself)."""
    try:
        return typing.get_type_hints(cls.__init__)
    except Exception:  # noqa: BLE001 - an annotation that does not resolve
        return {}


def union_args(tp: Any) -> tuple[Any, ...]:
    """The members of a union annotation (``X | Y`` or ``Union[X, Y]``), else ``(tp,)``."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return typing.get_args(tp)
    return (tp,)


class Component:
    """Base of every registrable component.

    Subclasses set the class attributes ``name`` (the registered, kebab-case name) and
    ``kind``; ``requires`` names the optional extras the component needs;
    ``example_specs`` are specs that build it when the bare name does not (required
    parameters), used by the docs and the conformance kit (:mod:`capmetrics.testing`);
    ``path_params`` name the parameters that are local files or folders: the signature shows
    them as ``<local>`` and carries the files' checksums (``signature_extra``) instead, so the
    same files at another path give the same signature. ``program_params`` name the
    parameters that choose a program or code to run (``java``, a CoreNLP folder of jars,
    ``trust_code``, an importable ``module:attribute``): a spec from a file someone else wrote
    (an NNEval model's ``nneval.json``, composed with ``untrusted=``) may not set them.
    """

    name: ClassVar[str] = ""
    kind: ClassVar[str] = ""
    requires: ClassVar[tuple[str, ...]] = ()
    example_specs: ClassVar[tuple[str, ...]] = ()
    path_params: ClassVar[tuple[str, ...]] = ()
    program_params: ClassVar[tuple[str, ...]] = ()
    #: The languages (ISO 639-1 codes) whose text the component serves, e.g. ``("en",)`` for
    #: one that parses English; ``None`` (the default) for one that serves any language.
    #: ``score(..., lang=...)`` and ``--lang`` refuse, by name, a component (or one it wraps)
    #: whose ``languages`` leave the language out (:mod:`capmetrics.components.language`).
    languages: ClassVar[tuple[str, ...] | None] = None

    @classmethod
    def param_names(cls) -> list[str]:
        """Names of the constructor parameters, in signature order."""
        return list(cls.constructor_parameters())

    @classmethod
    def constructor_parameters(cls) -> dict[str, inspect.Parameter]:
        """The constructor's parameters; refuses ``*args`` and ``**kwargs`` (sklearn's rule)."""
        init = cls.__init__
        if init is object.__init__:
            return {}
        params = {}
        for p in inspect.signature(init).parameters.values():
            if p.name == "self":
                continue
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise CapmetricsError(
                    f"component {cls.__name__} must list its parameters in the signature of "
                    f"__init__ (no *args/**kwargs), got {inspect.signature(init)}"
                )
            params[p.name] = p
        return params

    def get_params(self, deep: bool = False) -> dict[str, Any]:
        """The constructor parameters and their current values (``outer__inner`` if deep)."""
        out: dict[str, Any] = {}
        for key in self.param_names():
            value = getattr(self, key)
            out[key] = value
            if deep and isinstance(value, Component):
                out.update({f"{key}__{k}": v for k, v in value.get_params(deep=True).items()})
        return out

    @property
    def spec(self) -> str:
        """The canonical spec: ``name(key=value, ...)`` with parameters at their default left
        out."""
        from capmetrics.components.spec import format_component

        return format_component(self)

    def portable_spec(self) -> str:
        """The spec with local file parameters (``path_params``) as ``<local>``: the same on
        every machine that has the same files."""
        from capmetrics.components.spec import format_component

        return format_component(self, portable=True)

    def signature(self) -> dict[str, str]:
        """What decides this component's numbers: its portable spec plus the versions and file
        checksums it depends on; never an absolute local path.

        Subclasses extend :meth:`signature_extra` (file checksums, jar versions, ...).
        """
        sig = {"spec": self.portable_spec()}
        for key, value in self.get_params().items():
            if isinstance(value, Component):
                nested = value.signature()
                sig[key] = nested.pop("spec")
                sig.update(nested)
        sig.update(self.signature_extra())
        return sig

    def signature_extra(self) -> dict[str, str]:
        """Extra signature entries (library versions, file checksums); override to add."""
        return {}

    def __repr__(self) -> str:
        return f"<{self.kind or 'component'} {self.spec}>"

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.get_params() == other.get_params()

    def __hash__(self) -> int:
        return hash((type(self), self.spec))


# --------------------------------------------------------------------------------------------
# results of single components
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Scores:
    """Per-candidate values of a distance plus its corpus value.

    ``corpus`` is the metric's own corpus-level value: for BLEU it comes from summed n-gram
    statistics, for most others it is the mean of ``values``.
    """

    values: np.ndarray
    corpus: float
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class StatResult:
    """A multi-candidate statistic for one item, with its p-value where one is defined."""

    value: float
    p_value: float | None = None
    details: dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------------------------
# the kinds
# --------------------------------------------------------------------------------------------
class Tokenizer(Component):
    """Turns texts into token lists."""

    kind = "tokenizer"
    #: Tokens never contain whitespace and are never empty, so joining them with spaces and
    #: splitting again gives them back (lets metrics skip that round trip).
    whitespace_free_tokens: bool = False

    def tokenize(self, texts: Sequence[str]) -> list[list[str]]:
        """Tokenize each text."""
        raise NotImplementedError

    def tokenize_shared(self, texts: Sequence[str]) -> list[list[str]]:
        """:meth:`tokenize`, computed once per batch of texts within a run
        (:mod:`capmetrics.engine.prepared`): the metrics of one ``score`` call share the tokens."""
        from capmetrics.components.language import (
            check_segmentation,  # warns when CJK text stays unsegmented
        )
        from capmetrics.engine.prepared import STATS, in_run, shared, texts_key

        if not in_run():  # a lone call (a training-loop reward): no digest of the texts to pay for
            STATS["computed"] += 1
            return check_segmentation(self, texts, self.tokenize(texts))
        return shared(
            ("tokens", self.portable_spec(), texts_key(texts)),
            lambda: check_segmentation(self, texts, self.tokenize(texts)),
        )

    def tokenize_joined(self, texts: Sequence[str]) -> list[str]:
        """Tokenize and join with single spaces, the form coco-caption's scorers take."""
        return [" ".join(t) for t in self.tokenize_shared(texts)]


class Distance(Component):
    """Compares texts: a classic per-candidate metric and, for multi-candidate statistics,
    a pairwise distance.

    Subclasses implement :meth:`score`; :meth:`pairwise` has a generic implementation that
    vectorised metrics override. ``higher_is_better`` says whether :meth:`score` is a similarity;
    ``distance_offset`` turns a similarity ``s`` into the distance ``offset - s`` (1 − METEOR,
    10 − CIDEr-D, 1 − cosine); it is ``None`` for metrics that are distances already.
    """

    kind = "distance"
    higher_is_better: ClassVar[bool] = True
    distance_offset: ClassVar[float | None] = None
    #: Whether an empty (or whitespace-only) candidate gets the component's documented value
    #: (BLEU 0, METEOR the jar's 0, ...). ``False``: :func:`capmetrics.score` refuses such a
    #: candidate with a MetricError naming the item. A component that wraps others (a statistic
    #: over a distance) accepts them only if the wrapped ones do too.
    accepts_empty_candidates: ClassVar[bool] = False
    #: A distance that scores with images (NNEval over image-text metric features):
    #: :func:`capmetrics.score` calls :meth:`score_images` with each candidate's image instead of
    #: :meth:`score`, after checking that every item has one. Metrics that only compare captions
    #: with images are their own kind, :class:`ImageTextMetric`.
    needs_images: ClassVar[bool] = False
    #: ``False`` for reference-free metrics: items without references are scored.
    needs_references: ClassVar[bool] = True
    #: Metrics that read more of an item than its texts (its id, the scene graphs it carries):
    #: :func:`capmetrics.score` calls :meth:`score_items` instead of :meth:`score`.
    needs_items: ClassVar[bool] = False
    #: Cheap, model-free distances (the n-gram ones): a statistic over one lets each worker
    #: process build its items' pairwise matrices. ``False`` (anything holding a model): the
    #: matrices are built in the parent process and the workers get them.
    pairwise_on_workers: ClassVar[bool] = False

    def fit(self, references: Sequence[Sequence[str]]) -> Distance:
        """Learn corpus statistics (e.g. CIDEr's document frequencies); a no-op by default."""
        return self

    def score(self, candidates: Sequence[str], references: Sequence[Sequence[str]]) -> Scores:
        """Score ``candidates[i]`` against ``references[i]``, for every i."""
        raise NotImplementedError

    def score_images(
        self, candidates: Sequence[str], references: Sequence[Sequence[str]], images: Sequence[Any]
    ) -> Scores:
        """Score ``candidates[i]`` against ``images[i]`` (and ``references[i]``), for every i;
        only for ``needs_images`` metrics. ``images[i]`` is a local path or a loaded image."""
        raise MetricError(f"{self.spec} does not score images")

    def score_items(
        self, candidates: Sequence[str], references: Sequence[Sequence[str]], items: Sequence[Any]
    ) -> Scores:
        """Score ``candidates[i]`` against ``references[i]`` where ``items[i]`` is its
        :class:`~capmetrics.data.Item`; for ``needs_items`` metrics (default: :meth:`score`)."""
        return self.score(candidates, references)

    def to_distance(self, values: np.ndarray) -> np.ndarray:
        """Convert :meth:`score` values to distances (d(x, x) = 0 for a well-behaved metric)."""
        if not self.higher_is_better:
            return values
        if self.distance_offset is None:
            raise MetricError(f"{self.spec} is a similarity without a distance conversion")
        return self.distance_offset - values

    def pairwise(self, a: Sequence[str], b: Sequence[str]) -> np.ndarray:
        """Matrix of distances d(a_i, b_j): ``a_i`` scored as candidate against ``[b_j]``."""
        cands = [x for x in a for _ in b]
        refs = [[y] for _ in a for y in b]
        values = self.pairwise_scores(cands, refs)
        return self.to_distance(np.asarray(values, dtype=float)).reshape(len(a), len(b))

    def pairwise_many(self, pools: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """``pairwise(pool, pool)`` of every pool (what TRM calls, for many items at once);
        metrics that batch the work across pools (BERTScore, the n-gram ones) override it."""
        return [self.pairwise(pool, pool) for pool in pools]

    def pairwise_scores(
        self, candidates: Sequence[str], references: Sequence[Sequence[str]]
    ) -> np.ndarray:
        """Per-pair scores used by :meth:`pairwise`; metrics whose corpus statistics must stay
        fixed across pairs (CIDEr's document frequencies) override this."""
        return self.score(candidates, references).values


class Embedder(Component):
    """Turns words or texts into vectors."""

    kind = "embedder"

    def embed_words(self, tokens: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Vectors of ``tokens`` (n × dim) and a boolean mask, True where the word is known."""
        raise MetricError(f"embedder {self.spec} cannot embed single words")

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        """One vector per text (n × dim)."""
        raise MetricError(f"embedder {self.spec} cannot embed whole texts")


class Aggregator(Component):
    """A named reduction over values."""

    kind = "aggregator"

    def reduce(self, values: np.ndarray, axis: int = -1) -> np.ndarray:
        """Reduce ``values`` along ``axis``."""
        raise NotImplementedError

    def reduce_groups(self, values: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        """Reduce each group ``values[offsets[g]:offsets[g + 1]]`` to one value.

        The generic version loops over groups; aggregators override it with a vectorised one.
        """
        return np.array(
            [self.reduce(values[offsets[g] : offsets[g + 1]]) for g in range(len(offsets) - 1)],
            dtype=float,
        )

    def __call__(self, values: Sequence[float] | np.ndarray) -> float:
        return float(self.reduce(np.asarray(values, dtype=float)))


class Statistic(Component):
    """A statistic over an item's candidate set and reference set, with a p-value."""

    kind = "statistic"
    higher_is_better: ClassVar[bool] = True
    #: Whether an empty (or whitespace-only) candidate gets the component's documented value
    #: (BLEU 0, METEOR the jar's 0, ...). ``False``: :func:`capmetrics.score` refuses such a
    #: candidate with a MetricError naming the item. A component that wraps others (a statistic
    #: over a distance) accepts them only if the wrapped ones do too.
    accepts_empty_candidates: ClassVar[bool] = False

    def fit(self, references: Sequence[Sequence[str]]) -> Statistic:
        """Learn corpus statistics from every item's references before items are compared
        (e.g. CIDEr-D's document frequencies for its distance); a no-op by default."""
        return self

    def compare(self, candidates: Sequence[str], references: Sequence[str]) -> StatResult:
        """The statistic for one item."""
        raise NotImplementedError


class Learner(Component):
    """A component fitted on labelled data that then acts as a distance."""

    kind = "learner"


class ProbabilitySource(Component):
    """Per-token probabilities of reference captions under a caption model (pre-gen metrics)."""

    kind = "probability-source"

    def probabilities(self, dataset: Any) -> Any:
        """Per item, per reference, per position (END included): the probability of the
        reference token and whether it was the model's top choice, as
        ``capmetrics.plugins.pregen.RaggedProbs`` (flat arrays with offsets)."""
        raise NotImplementedError


class PregenMetric(Component):
    """A pre-gen metric: reduces a caption model's reference-token probabilities (as a
    :class:`ProbabilitySource` gives them) to one number, without generating captions."""

    kind = "pregen-metric"

    def compute(self, probs: Any) -> float:
        """The metric's value on ``probs`` (``capmetrics.plugins.pregen.RaggedProbs``)."""
        raise NotImplementedError

    def __call__(self, probs: Any) -> float:
        return self.compute(probs)


class ImageTextModel(Component):
    """A model that embeds images and texts in one space (CLIP and its relatives), with the
    model's own image preprocessing and text tokenization. Image-grounded metrics take one as
    their ``model``; each distinct image and text is embedded once per run.
    """

    kind = "image-text-model"

    def embed_images(self, images: Sequence[Any]) -> np.ndarray:
        """One vector per image (n × dim, not normalised); ``images[i]`` is a local path or a
        loaded image (``PIL.Image.Image``)."""
        raise NotImplementedError

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        """One vector per text (n × dim, not normalised), in the images' space."""
        raise NotImplementedError

    def overlong(self, texts: Sequence[str]) -> list[int]:
        """Indices of the texts longer than the text tower takes (truncated by
        :meth:`embed_texts`); none by default."""
        return []


class ImageTextMetric(Component):
    """A metric that compares each candidate with its item's image (CLIP-S, PAC-S), and with its
    references for the ``needs_references`` variants (RefCLIP-S): one value per candidate, like
    a distance, but scored only with images. :func:`capmetrics.score` (and ``capmetrics score``
    with ``--images``, NNEval's features, ``capmetrics meta``) call :meth:`score_images` with
    every candidate's image, after checking that every item has one; streaming refuses them.
    """

    kind = "image-text-metric"
    higher_is_better: ClassVar[bool] = True
    #: As :attr:`Distance.accepts_empty_candidates`.
    accepts_empty_candidates: ClassVar[bool] = False
    #: Always true: what the scoring code asks any metric before it hands it images.
    needs_images: ClassVar[bool] = True
    #: ``False`` for reference-free metrics (CLIP-S): items without references are scored.
    needs_references: ClassVar[bool] = True

    def score_images(
        self, candidates: Sequence[str], references: Sequence[Sequence[str]], images: Sequence[Any]
    ) -> Scores:
        """Score ``candidates[i]`` against ``images[i]`` (and ``references[i]``), for every i;
        ``images[i]`` is a local path or a loaded image (``PIL.Image.Image``)."""
        raise NotImplementedError


#: The base class of each kind, used to resolve nested specs by parameter annotation.
KIND_BASES: dict[str, type[Component]] = {
    "distance": Distance,
    "embedder": Embedder,
    "aggregator": Aggregator,
    "statistic": Statistic,
    "tokenizer": Tokenizer,
    "learner": Learner,
    "probability-source": ProbabilitySource,
    "pregen-metric": PregenMetric,
    "image-text-model": ImageTextModel,
    "image-text-metric": ImageTextMetric,
}


def scores_with_images(component: Component) -> bool:
    """Whether :func:`capmetrics.score` scores ``component`` through ``score_images`` (an
    :class:`ImageTextMetric`, or a distance that declares ``needs_images``)."""
    return isinstance(component, ImageTextMetric) or (
        isinstance(component, Distance) and bool(component.needs_images)
    )
