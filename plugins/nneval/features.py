"""NNEval's features: which metrics, whether their plugins and extras are installed, and their
per-candidate scores (with each candidate's image for the metrics that need images), computed
once and cached on disk."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from capmetrics.components.base import Distance, Embedder, ImageTextMetric
from capmetrics.errors import MetricError, UnknownComponentError

#: The paper's feature set without SPICE: the default does not change with what is installed
#: (SPICE parses every caption with CoreNLP); add it with ``features=[..., "spice"]``.
PAPER_FEATURES = ("cider-d", "bleu-1", "bleu-2", "bleu-3", "bleu-4", "meteor", "wmd")

#: Optional modules a feature metric (by name, with its default embedder) needs, and the
#: capmetrics extra that installs them.
FEATURE_EXTRAS: dict[str, tuple[tuple[str, str], ...]] = {
    "wmd": (("ot", "embeddings"), ("gensim", "embeddings")),
    "wembsim": (("gensim", "embeddings"),),
    "embedding-cosine": (("torch", "torch"), ("sentence_transformers", "torch")),
    "bertscore": (("torch", "torch"), ("transformers", "bertscore")),
    # embedders of the interaction inputs (NNEval(interaction=...))
    "bert": (("torch", "torch"), ("sentence_transformers", "torch")),
    "sentence-transformer": (("torch", "torch"), ("sentence_transformers", "torch")),
}


#: The kinds a feature is: a distance, or an image-text metric (scored with the images).
FEATURE_KINDS = ("distance", "image-text-metric")
#: A feature metric.
Feature = Distance | ImageTextMetric


def build_feature(spec: str) -> Feature:
    """The distance (or image-text metric) a feature spec names."""
    from capmetrics.registry.compose import compose

    return compose(spec, FEATURE_KINDS)  # type: ignore[return-value]


def paper_features() -> list[str]:
    """The paper's features (without SPICE) that the installed plugins provide."""
    from capmetrics.registry import get_registry

    names = set(get_registry().names("distance"))
    chosen = [f for f in PAPER_FEATURES if f in names]
    missing = [f for f in PAPER_FEATURES if f not in names]
    if missing:
        warnings.warn(
            f"NNEval: feature metric(s) {', '.join(missing)} not installed; training without them",
            stacklevel=3,
        )
    return chosen


def missing_extras(specs: Sequence[str]) -> dict[str, str]:
    """Feature spec -> the capmetrics extra it needs and that is not installed."""
    out = {}
    for spec in specs:
        name = spec.split("(", 1)[0].strip()
        for module, extra in FEATURE_EXTRAS.get(name, ()):
            if importlib.util.find_spec(module) is None:
                out[spec] = extra
                break
    return out


def check_features(specs: Sequence[str], source: str) -> list[Feature]:
    """Build every feature metric; name every one that no installed plugin provides, every
    extra that a feature needs and that is not installed, and the first missing resource of a
    feature that can check them (``check_resources``: SPICE's jars and Java)."""
    built, missing = [], []
    for spec in specs:
        try:
            built.append(build_feature(spec))
        except UnknownComponentError:
            missing.append(spec)
    if missing:
        raise MetricError(
            f"{source} needs the feature metric(s) {', '.join(map(repr, missing))}, which no "
            "installed plugin provides; install the plugin(s) (e.g. pip install 'capmetrics[all]')"
        )
    extras = missing_extras(specs)
    if extras:
        needs = ", ".join(f"{spec!r} needs capmetrics[{extra}]" for spec, extra in extras.items())
        wanted = ",".join(dict.fromkeys(extras.values()))
        raise MetricError(
            f"{source}: {needs}, which is not installed; pip install 'capmetrics[{wanted}]'"
        )
    for metric in built:  # e.g. SPICE's CoreNLP jars and Java: named before any feature is computed
        check = getattr(metric, "check_resources", None)
        if check is not None:
            try:
                check()
            except MetricError as err:
                raise MetricError(f"{source}: feature {metric.spec!r}: {err}") from err
    return built


def build_interaction(spec: str, source: str) -> Embedder:
    """The sentence embedder of NNEval's interaction inputs; names a missing plugin or extra."""
    from capmetrics.registry.compose import compose

    extras = missing_extras([spec])
    if extras:
        raise MetricError(
            f"{source}: the interaction embedder {spec!r} needs capmetrics[{extras[spec]}], which "
            f"is not installed; pip install 'capmetrics[{extras[spec]}]'"
        )
    try:
        return compose(spec, "embedder")  # type: ignore[return-value]
    except UnknownComponentError as err:
        raise MetricError(
            f"{source} needs the embedder {spec!r}, which no installed plugin provides"
        ) from err


def interaction_inputs(
    embedder: Embedder, candidates: Sequence[str], references: Sequence[Sequence[str]]
) -> np.ndarray:
    """Per candidate ``[c ⊙ r, |c − r|]`` (2·dim columns): ``c`` its unit sentence vector, ``r`` the
    unit mean of its references' unit vectors; each distinct text is embedded once."""
    texts = list(dict.fromkeys([*candidates, *(r for refs in references for r in refs)]))
    row = {t: k for k, t in enumerate(texts)}
    vectors = np.asarray(embedder.embed_texts(texts), dtype=float)
    if not candidates:
        return np.zeros((0, 2 * vectors.shape[-1]) if vectors.ndim == 2 else (0, 0))
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    cand = vectors[[row[c] for c in candidates]]
    flat = np.array([row[r] for refs in references for r in refs], dtype=np.int64)
    counts = np.array([len(refs) for refs in references], dtype=np.int64)
    if (counts == 0).any():
        raise MetricError(
            f"NNEval interaction inputs: candidate {int(np.argmax(counts == 0))} has no references"
        )
    sums = np.add.reduceat(vectors[flat], np.concatenate([[0], np.cumsum(counts)[:-1]]), axis=0)
    refs = sums / np.maximum(np.linalg.norm(sums, axis=1, keepdims=True), 1e-12)
    return np.hstack([cand * refs, np.abs(cand - refs)])


def cached_columns(
    key_parts: object,
    compute: Callable[[], np.ndarray],
    spec: str,
    digest: str,
    cache_dir: str | Path | None,
) -> np.ndarray:
    """``compute()``'s columns, read from / written to ``<cache_dir>/<hash of key_parts>.npz``."""
    if cache_dir is None:
        return compute()
    key = hashlib.sha256(json.dumps(key_parts, sort_keys=True).encode()).hexdigest()[:24]
    path = Path(cache_dir) / f"{key}.npz"
    if path.is_file():
        return np.load(path)["values"]
    values = compute()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.npz")
    np.savez(tmp, values=values, spec=spec, data=digest)
    tmp.replace(path)
    return values


def data_hash(candidates: Sequence[str], references: Sequence[Sequence[str]]) -> str:
    """A digest of the scored pairs (order matters)."""
    h = hashlib.sha256()
    for cand, refs in zip(candidates, references):
        h.update(json.dumps([cand, list(refs)], ensure_ascii=False).encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()


def images_hash(images: Sequence[Any]) -> str | None:
    """A digest of the candidates' image files (path, size, modification time; order matters),
    or None when an image is a loaded object (its column is then not cached)."""
    h = hashlib.sha256()
    for image in images:
        if not isinstance(image, (str, os.PathLike)):
            return None
        path = os.fspath(image)
        try:
            st = os.stat(path)
            stamp = [path, st.st_size, st.st_mtime_ns]
        except OSError:
            stamp = [path, None, None]
        h.update(json.dumps(stamp).encode("utf-8") + b"\n")
    return h.hexdigest()


def check_feature_images(
    metric: Feature,
    images: Sequence[Any] | None,
    n: int,
    ids: Sequence[object] | None = None,
    shown: int = 5,
) -> list[Any]:
    """``images`` (one per candidate) for a feature that needs images, or one MetricError naming
    the feature and the first candidates' items without a usable image."""
    from capmetrics.data.images import image_problem

    if images is None:
        images = [None] * n
    if len(images) != n:
        raise MetricError(
            f"NNEval feature {metric.spec!r}: {len(images)} images for {n} candidates"
        )
    problems: dict[object, str] = {}
    seen: dict[Any, str | None] = {}
    for k, image in enumerate(images):
        key = os.fspath(image) if isinstance(image, (str, os.PathLike)) else id(image)
        if key not in seen:
            seen[key] = image_problem(image)
        if seen[key] is not None:
            label = f"item {ids[k]!r}" if ids is not None else f"candidate {k}"
            problems.setdefault(label, seen[key])  # type: ignore[arg-type]
    if problems:
        first = "; ".join(f"{label} {why}" for label, why in list(problems.items())[:shown])
        more = f" (and {len(problems) - shown} more)" if len(problems) > shown else ""
        raise MetricError(
            f"NNEval feature {metric.spec!r} needs an image for every candidate; "
            f"{len(problems)} without a usable one: {first}{more}"
        )
    return list(images)


def feature_column(
    metric: Feature,
    candidates: Sequence[str],
    references: Sequence[Sequence[str]],
    cache_dir: str | Path | None = None,
    digest: str | None = None,
    images: Sequence[Any] | None = None,
    ids: Sequence[object] | None = None,
) -> np.ndarray:
    """``metric``'s per-candidate scores, read from / written to an .npz cache in ``cache_dir``.

    A metric that needs images (``needs_images``: CLIP-S, ...) is scored with ``images`` (the
    candidates' images) through ``score_images``, as :func:`capmetrics.score` scores it; items
    without one are named (``ids``: each candidate's item id). The cache key is the metric's
    signature (spec plus versions and file checksums) and the digest of the data (and of the
    image files).
    """
    if metric.needs_images:
        pictures = check_feature_images(metric, images, len(candidates), ids)

        def compute() -> np.ndarray:
            return np.asarray(
                metric.score_images(list(candidates), list(references), pictures).values,
                dtype=float,
            )

        image_digest = images_hash(pictures) if cache_dir is not None else None
        if image_digest is None:
            return compute()
        digest = digest or data_hash(candidates, references)
        return cached_columns(
            [metric.signature(), digest, image_digest], compute, metric.spec, digest, cache_dir
        )

    def compute() -> np.ndarray:
        assert isinstance(metric, Distance)  # the others need images (above)
        return np.asarray(metric.score(list(candidates), list(references)).values, dtype=float)

    if cache_dir is None:
        return compute()
    digest = digest or data_hash(candidates, references)
    return cached_columns([metric.signature(), digest], compute, metric.spec, digest, cache_dir)


def feature_matrix(
    metrics: Sequence[Feature],
    candidates: Sequence[str],
    references: Sequence[Sequence[str]],
    cache_dir: str | Path | None = None,
    interaction: Embedder | None = None,
    images: Sequence[Any] | None = None,
    ids: Sequence[object] | None = None,
) -> np.ndarray:
    """One column per metric (see :func:`feature_column`; ``images`` and ``ids`` for the metrics
    that need images), then ``interaction``'s :func:`interaction_inputs` when given (cached
    likewise)."""
    from capmetrics.engine.prepared import run_scope
    from capmetrics.engine.progress import work

    digest = data_hash(candidates, references) if cache_dir is not None else None
    columns = []
    # one run: the features share what they prepare (a CLIP checkpoint loads once for CLIP-S
    # and RefCLIP-S, each text and image is embedded once), as under capmetrics.score
    with run_scope(), work(len(metrics) + (interaction is not None), "features") as advance:
        for metric in metrics:
            try:
                columns.append(
                    feature_column(metric, candidates, references, cache_dir, digest, images, ids)
                )
            except MetricError as err:
                if str(err).startswith("NNEval feature"):
                    raise
                raise MetricError(f"NNEval feature {metric.spec!r}: {err}") from err
            advance(1)
        if interaction is not None:
            key = ["interaction", interaction.signature(), digest]
            columns.append(
                cached_columns(
                    key,
                    lambda: interaction_inputs(interaction, candidates, references),
                    interaction.spec,
                    digest or "",
                    cache_dir,
                )
            )
            advance(1)
    return np.column_stack(columns)
