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

import typer

GROUP = "setup"
HELP = ("Install the offline resources a component needs into the user cache folder, "
        "or check them with --check.")


def setup_group(app: typer.Typer) -> typer.Typer:
    """The ``setup`` group of ``app``, added on first use."""
    for group in app.registered_groups:
        if group.name == GROUP and group.typer_instance is not None:
            return group.typer_instance
    group = typer.Typer(help=HELP, no_args_is_help=True)
    app.add_typer(group, name=GROUP)
    return group


def command_names(group: typer.Typer) -> set[str]:
    """Names of the commands already in ``group``."""
    return {c.name or (c.callback.__name__ if c.callback else "") for c in group.registered_commands}


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


def readiness(cls: type, setup_names: set[str]) -> str:
    """``""`` when the component ``cls`` can run here, else what is missing and the command
    that readies it: ``pip install 'capmetrics[torch]'`` for a missing extra, ``capmetrics
    setup <name>`` for a missing resource (a component with ``check_resources``)."""
    from capmetrics.errors import CapmetricsError

    extras = [e for e in getattr(cls, "requires", ()) if missing_distributions(e)]
    if extras:
        return f"pip install 'capmetrics[{','.join(extras)}]'"
    check = getattr(cls, "check_resources", None)
    if check is None:
        return ""
    try:
        cls().check_resources()  # type: ignore[call-arg]
    except CapmetricsError as err:
        family = cls.__module__.split(".")[2] if cls.__module__.startswith("capmetrics.plugins.") else ""
        name = next((n for n in (getattr(cls, "name", ""), family) if n in setup_names), None)
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        return f"capmetrics setup {name}" if name else reason
    except Exception:  # noqa: BLE001 - a constructor that needs arguments: nothing to say
        return ""
    return ""


def setup_commands(app: typer.Typer) -> dict[str, object]:
    """The callbacks of the ``setup`` group's commands, by name (empty when no plugin adds one)."""
    for group in app.registered_groups:
        if group.name == GROUP and group.typer_instance is not None:
            return {c.name or (c.callback.__name__ if c.callback else ""): c.callback
                    for c in group.typer_instance.registered_commands if c.callback}
    return {}
