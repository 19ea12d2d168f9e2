"""capmetrics: fast, plugin-based evaluation of image captions and other conditional text
generation.

>>> import capmetrics
>>> capmetrics.compute(predictions=["a dog runs on the grass"],
...                    references=[["a dog is running on the grass", "a dog runs"]],
...                    metrics="bleu-1")
{'bleu-1': 0.8464817246084536}
>>> capmetrics.compose("mean")([1.0, 2.0, 6.0])
3.0

``capmetrics.score`` takes a Dataset, a path, or ``candidates=``/``references=`` (lists or
pycocoevalcap-style dicts) and returns :class:`Results`, a mapping from metric names to values.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

from capmetrics import _moved

_moved.install()  # former module paths (capmetrics.scoring, ...) stay importable

try:
    __version__ = version("capmetrics")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+unknown"

from capmetrics.components.base import (
    KINDS,
    Aggregator,
    Component,
    Distance,
    Embedder,
    ImageTextMetric,
    ImageTextModel,
    Learner,
    PregenMetric,
    ProbabilitySource,
    Scores,
    Statistic,
    StatResult,
    Tokenizer,
)
from capmetrics.components.hookspecs import hookimpl
from capmetrics.errors import (
    CapmetricsError,
    DataError,
    InternalError,
    MetricError,
    NotFittedError,
    PluginError,
    SpecError,
    SpecSyntaxError,
    UnknownComponentError,
)

if TYPE_CHECKING:
    from capmetrics.components.spec import Spec


def compose(
    spec: str | Spec | Component, kind: str | tuple[str, ...] | None = None, **params: Any
) -> Component:
    """Build a component from a spec; see :func:`capmetrics.registry.compose`."""
    from capmetrics.registry.compose import compose as _compose

    return _compose(spec, kind, **params)


def __getattr__(name: str) -> Any:
    # Lazily expose the heavier modules, so ``import capmetrics`` stays light.
    lazy = {
        "Item": "capmetrics.data.model",
        "Dataset": "capmetrics.data.model",
        "load_dataset": "capmetrics.data.loaders",
        "score": "capmetrics.engine.scoring",
        "compute": "capmetrics.engine.scoring",
        "Results": "capmetrics.engine.results",
        "MetricResult": "capmetrics.engine.results",
        "load_config": "capmetrics.engine.config",
    }
    if name in lazy:
        import importlib

        return getattr(importlib.import_module(lazy[name]), name)
    raise AttributeError(f"module 'capmetrics' has no attribute {name!r}")


__all__ = [
    "KINDS",
    "Aggregator",
    "CapmetricsError",
    "Component",
    "DataError",
    "Dataset",
    "Distance",
    "Embedder",
    "ImageTextMetric",
    "ImageTextModel",
    "InternalError",
    "Item",
    "Learner",
    "MetricError",
    "MetricResult",
    "NotFittedError",
    "PluginError",
    "PregenMetric",
    "ProbabilitySource",
    "Results",
    "Scores",
    "SpecError",
    "SpecSyntaxError",
    "StatResult",
    "Statistic",
    "Tokenizer",
    "UnknownComponentError",
    "__version__",
    "compose",
    "compute",
    "hookimpl",
    "load_config",
    "load_dataset",
    "score",
]
