"""Data prepared once per run and shared by every metric of it.

:func:`capmetrics.score` opens a run scope; inside it, :func:`shared` computes a value once per
key (tokens of a batch of texts under one tokenizer spec, say) and hands the same object to every
later caller. Outside a scope nothing is kept, so a long-lived process does not grow.

Keys are whole batches, not single texts: coco-caption's tokenizer is batch dependent (a
caption ending in a one-letter acronym takes the first word of the next caption into account),
so only an identical batch may reuse tokens. The metrics of one ``score`` call see identical
batches (the same candidates and references, deduplicated in the same order), which is where
the sharing pays: the default set tokenizes its texts once instead of six times. Where hashing
the texts would cost as much as the work, :func:`shared_for` keys by the identity of the very
lists every metric of the run receives (BLEU-1..4 and CIDEr-D build one n-gram batch).
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import Any, TypeVar

from capmetrics.io.identity import Identity

T = TypeVar("T")

_scopes: list[dict[Hashable, Any]] = []
#: Calls that computed a value / found it shared, over the life of the process (for benchmarks).
STATS = {"computed": 0, "shared": 0}


@contextlib.contextmanager
def run_scope() -> Iterator[None]:
    """Share prepared data among everything computed inside (scopes nest; the outermost wins)."""
    _scopes.append(_scopes[-1] if _scopes else {})
    try:
        yield
    finally:
        _scopes.pop()


def in_run() -> bool:
    """Whether a run scope is open (outside one, nothing is shared: keys need not be computed)."""
    return bool(_scopes)


def shared(key: Hashable, compute: Callable[[], T]) -> T:
    """``compute()`` once per ``key`` within the current run scope (every call outside one)."""
    if not _scopes:
        STATS["computed"] += 1
        return compute()
    cache = _scopes[-1]
    if key in cache:
        STATS["shared"] += 1
        return cache[key]
    STATS["computed"] += 1
    cache[key] = value = compute()
    return value


def shared_for(tag: Hashable, objects: tuple[object, ...], compute: Callable[[], T]) -> T:
    """``compute()`` once per ``tag`` and these very ``objects`` (by identity) within the current
    run scope: for data derived from lists every metric of a run receives, where hashing their
    contents would cost as much as the work. The key holds the objects (:class:`Identity`), so
    an object made after one of them is collected can never match its entry."""
    if not _scopes:
        STATS["computed"] += 1
        return compute()
    cache = _scopes[-1]
    key = ("by-identity", tag, *map(Identity, objects))
    if key in cache:
        STATS["shared"] += 1
        return cache[key]
    STATS["computed"] += 1
    cache[key] = value = compute()
    return value


def texts_key(texts: Sequence[str]) -> str:
    """A digest that identifies a batch of texts, in order."""
    digest = hashlib.blake2b(digest_size=20)
    for text in texts:
        digest.update(text.encode("utf-8", "surrogatepass"))
        digest.update(b"\x00")
    return f"{len(texts)}:{digest.hexdigest()}"
