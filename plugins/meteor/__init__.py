"""METEOR 1.5: ``meteor`` (native Python, no Java) and ``meteor-jar`` (the original jar)."""

from __future__ import annotations

from collections.abc import Callable

from capmetrics import hookimpl
from capmetrics.plugins.meteor.jar import MeteorJar, clean_segment, meteor_files, score_line

__all__ = ["MeteorJar", "clean_segment", "meteor_files", "score_line"]


@hookimpl
def register_distances(register: Callable[..., None]) -> None:
    register(MeteorJar)
