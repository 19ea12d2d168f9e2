"""NNEval (Sharif et al., ECCV 2018): a learned caption metric over other metrics' scores.

Registers the learner ``nneval`` (:mod:`.learner`; network in :mod:`.network`, training data in
:mod:`.training_data`, cached features in :mod:`.features`), the distance ``nneval``
(:mod:`.metric`: a shipped model by default, see :mod:`.model_files`) and the ``capmetrics nneval``
command group (:mod:`.cli`). See docs/metrics/nneval.md.
"""

from collections.abc import Callable
from typing import Any

from capmetrics import hookimpl
from capmetrics.plugins.nneval.learner import NNEval
from capmetrics.plugins.nneval.metric import NNEvalMetric
from capmetrics.plugins.nneval.model_files import DEFAULT_MODEL, SHIPPED_MODELS

__all__ = ["DEFAULT_MODEL", "NNEval", "NNEvalMetric", "SHIPPED_MODELS"]


@hookimpl
def register_learners(register: Callable[..., None]) -> None:
    register(NNEval)


@hookimpl
def register_distances(register: Callable[..., None]) -> None:
    register(NNEvalMetric)


@hookimpl
def register_commands(app: Any) -> None:
    if not any(getattr(g, "name", None) == "nneval" for g in app.registered_groups):
        from capmetrics.plugins.nneval.cli import build_cli

        app.add_typer(build_cli(), name="nneval")
