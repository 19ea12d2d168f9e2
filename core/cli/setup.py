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
