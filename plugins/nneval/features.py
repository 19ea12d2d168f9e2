"""NNEval's features: which metrics, whether their plugins and extras are installed, and their
per-candidate scores, computed once and cached on disk."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from capmetrics.component import Distance
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
}


def build_feature(spec: str) -> Distance:
    """The distance a feature spec names."""
    from capmetrics.registry.compose import compose

    return compose(spec, "distance")  # type: ignore[return-value]


def paper_features() -> list[str]:
    """The paper's features (without SPICE) that the installed plugins provide."""
    from capmetrics.registry import get_registry

    names = set(get_registry().names("distance"))
    chosen = [f for f in PAPER_FEATURES if f in names]
    missing = [f for f in PAPER_FEATURES if f not in names]
    if missing:
        warnings.warn(f"NNEval: feature metric(s) {', '.join(missing)} not installed; training without them",
                      stacklevel=3)
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


def check_features(specs: Sequence[str], source: str) -> list[Distance]:
    """Build every feature metric; name every one that no installed plugin provides and every
    extra that a feature needs and that is not installed."""
    built, missing = [], []
    for spec in specs:
        try:
            built.append(build_feature(spec))
        except UnknownComponentError:
            missing.append(spec)
    if missing:
        raise MetricError(f"{source} needs the feature metric(s) {', '.join(map(repr, missing))}, which no "
                          "installed plugin provides; install the plugin(s) (e.g. pip install 'capmetrics[all]')")
    extras = missing_extras(specs)
    if extras:
        needs = ", ".join(f"{spec!r} needs capmetrics[{extra}]" for spec, extra in extras.items())
        wanted = ",".join(dict.fromkeys(extras.values()))
        raise MetricError(f"{source}: {needs}, which is not installed; pip install 'capmetrics[{wanted}]'")
    return built


def data_hash(candidates: Sequence[str], references: Sequence[Sequence[str]]) -> str:
    """A digest of the scored pairs (order matters)."""
    h = hashlib.sha256()
    for cand, refs in zip(candidates, references):
        h.update(json.dumps([cand, list(refs)], ensure_ascii=False).encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()


def feature_column(metric: Distance, candidates: Sequence[str], references: Sequence[Sequence[str]],
                   cache_dir: str | Path | None = None, digest: str | None = None) -> np.ndarray:
    """``metric``'s per-candidate scores, read from / written to an .npz cache in ``cache_dir``.

    The cache key is the metric's signature (spec plus versions and file checksums) and the
    digest of the data.
    """
    if cache_dir is None:
        return np.asarray(metric.score(list(candidates), list(references)).values, dtype=float)
    digest = digest or data_hash(candidates, references)
    key = hashlib.sha256(json.dumps([metric.signature(), digest], sort_keys=True).encode()).hexdigest()[:24]
    path = Path(cache_dir) / f"{key}.npz"
    if path.is_file():
        return np.load(path)["values"]
    values = np.asarray(metric.score(list(candidates), list(references)).values, dtype=float)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.npz")
    np.savez(tmp, values=values, spec=metric.spec, data=digest)
    tmp.replace(path)
    return values


def feature_matrix(metrics: Sequence[Distance], candidates: Sequence[str], references: Sequence[Sequence[str]],
                   cache_dir: str | Path | None = None) -> np.ndarray:
    """One column per metric (see :func:`feature_column`)."""
    digest = data_hash(candidates, references) if cache_dir is not None else None
    columns = []
    for metric in metrics:
        try:
            columns.append(feature_column(metric, candidates, references, cache_dir, digest))
        except MetricError as err:
            raise MetricError(f"NNEval feature {metric.spec!r}: {err}") from err
    return np.column_stack(columns)
