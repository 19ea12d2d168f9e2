"""Keys that are an object itself, compared by identity, for caches of derived data.

A cache keyed by ``id(obj)`` returns a stale value once ``obj`` is collected and a new object
gets its address. :class:`Identity` holds the object, so its key lives exactly as long as the
entry, and compares with ``is``, so an equal but different object is a different key.
Use it for objects that are neither hashable by content nor weak-referenceable (lists, dicts,
numpy arrays) where hashing the contents would cost as much as the work being cached.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Identity"]


class Identity:
    """A dict key standing for this very object (held strongly; equal only to itself)."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def __hash__(self) -> int:
        return object.__hash__(self.obj)  # the default (identity) hash, even for unhashables

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Identity) and other.obj is self.obj

    def __repr__(self) -> str:
        return f"Identity({type(self.obj).__name__})"
