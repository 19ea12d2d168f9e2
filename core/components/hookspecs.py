"""Hook specifications of capmetrics.

A plugin is a module (or object) with functions marked ``@capmetrics.hookimpl`` whose names are
the hooks below. Each ``register_*`` hook receives a ``register`` callable owned by capmetrics::

    register(component_class, aliases=())

``component_class`` is a subclass of the kind's base class (:class:`capmetrics.Distance`, ...)
with a class attribute ``name``; ``aliases`` are extra names for it. Hooks take no other
arguments, so a plugin's hooks can be called one plugin at a time and every component is
recorded with the plugin (and distribution) that provides it. The long-form reference with
examples is ``docs/plugins/plugin-hooks.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from collections.abc import Callable

    import typer

#: Name shared by the markers and the plugin manager, and the entry-point group.
PROJECT = "capmetrics"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)
"""Decorator that marks a plugin's hook implementations."""


@hookspec
def register_distances(register: Callable[..., Any]) -> None:
    """Register distances: text comparisons usable as classic per-candidate metrics and as
    pairwise distances for multi-candidate statistics.

    :param register: call ``register(cls, aliases=())`` once per :class:`capmetrics.Distance`
        subclass.
    :return: nothing; the return value is ignored.
    """


@hookspec
def register_embedders(register: Callable[..., Any]) -> None:
    """Register embedders that turn words or texts into vectors.

    :param register: call ``register(cls, aliases=())`` once per :class:`capmetrics.Embedder`
        subclass.
    :return: nothing; the return value is ignored.
    """


@hookspec
def register_aggregators(register: Callable[..., Any]) -> None:
    """Register named reductions (mean, max, harmonic mean p-value, ...) usable wherever a
    spec takes a reduction over references, candidates or items.

    :param register: call ``register(cls, aliases=())`` once per :class:`capmetrics.Aggregator`
        subclass.
    :return: nothing; the return value is ignored.
    """


@hookspec
def register_statistics(register: Callable[..., Any]) -> None:
    """Register multi-candidate statistics that compare an item's candidate set with its
    reference set.

    :param register: call ``register(cls, aliases=())`` once per :class:`capmetrics.Statistic`
        subclass.
    :return: nothing; the return value is ignored.
    """


@hookspec
def register_tokenizers(register: Callable[..., Any]) -> None:
    """Register tokenizers, which metrics take as a parameter.

    :param register: call ``register(cls, aliases=())`` once per :class:`capmetrics.Tokenizer`
        subclass.
    :return: nothing; the return value is ignored.
    """


@hookspec
def register_learners(register: Callable[..., Any]) -> None:
    """Register learned metrics (fit on labelled data, save, load, then act as a distance).

    :param register: call ``register(cls, aliases=())`` once per :class:`capmetrics.Learner`
        subclass.
    :return: nothing; the return value is ignored.
    """


@hookspec
def register_probability_sources(register: Callable[..., Any]) -> None:
    """Register sources of per-token reference probabilities for pre-gen metrics.

    :param register: call ``register(cls, aliases=())`` once per
        :class:`capmetrics.ProbabilitySource` subclass.
    :return: nothing; the return value is ignored.
    """


@hookspec
def register_pregen_metrics(register: Callable[..., Any]) -> None:
    """Register pre-gen metrics: reductions of reference-token probabilities to one number.

    :param register: call ``register(cls, aliases=())`` once per
        :class:`capmetrics.PregenMetric` subclass.
    :return: nothing; the return value is ignored.
    """


@hookspec
def register_pregen_tiers(register: Callable[..., Any]) -> None:
    """Register pre-gen tier options: tier-1 token filters and tier-2 sentence scores, or
    aggregators offered at tiers 3 and 4. Every composition picks them up.

    :param register: call ``register(cls)`` once per
        ``capmetrics.plugins.pregen.TokenFilter`` or ``SentenceScore`` subclass, or
        ``register(name)`` with the name of a registered aggregator.
    :return: nothing; the return value is ignored.
    """


@hookspec
def register_image_text_models(register: Callable[..., Any]) -> None:
    """Register image–text models (CLIP and relatives: SigLIP, LongCLIP, ...) that embed images
    and texts in one space, for image-grounded metrics such as CLIP-S and PAC-S.

    :param register: call ``register(cls, aliases=())`` once per
        :class:`capmetrics.ImageTextModel` subclass.
    :return: nothing; the return value is ignored.
    """


@hookspec
def register_image_text_metrics(register: Callable[..., Any]) -> None:
    """Register image–text metrics: metrics that compare each candidate caption with its
    item's image (and its references, for the Ref- variants), such as CLIP-S and PAC-S.

    :param register: call ``register(cls, aliases=())`` once per
        :class:`capmetrics.ImageTextMetric` subclass.
    :return: nothing; the return value is ignored.
    """


@hookspec
def register_commands(app: typer.Typer) -> None:
    """Add commands or command groups to the ``capmetrics`` command line.

    :param app: the root :class:`typer.Typer` application; call ``app.command()`` or
        ``app.add_typer()`` on it.
    :return: nothing; the return value is ignored.
    """
