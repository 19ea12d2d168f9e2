"""METEOR 1.5: ``meteor`` (native Python, no Java) and ``meteor-jar`` (the original jar)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from capmetrics import hookimpl
from capmetrics.plugins.meteor._input import clean_segment
from capmetrics.plugins.meteor.jar import MeteorJar, meteor_files, score_line
from capmetrics.plugins.meteor.native import Meteor

__all__ = ["Meteor", "MeteorJar", "clean_segment", "meteor_files", "score_line"]


@hookimpl
def register_distances(register: Callable[..., None]) -> None:
    register(Meteor)
    register(MeteorJar)


@hookimpl
def register_commands(app: Any) -> None:
    from capmetrics.plugins.meteor._cli import add_setup_command

    add_setup_command(app)
