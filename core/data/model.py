"""The data model: an item is one visual input with its references and candidates."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

ItemId = str | int


@dataclass(frozen=True)
class Item:
    """One image (or video) id with its human references and one or more candidates.

    ``image`` is the image itself where image-grounded metrics (CLIP-S) need it: a local path
    (``str`` or ``Path``, resolved by the loaders) or an already loaded ``PIL.Image.Image``.
    ``candidate_graphs`` (one per candidate) and ``reference_graphs`` (one per reference) are
    scene graphs the user parsed (FACTUAL's format: ``{"entities", "relations"}`` or a list of
    them, one per sentence), read by the metrics that compare graphs (``capture``).
    """

    id: ItemId
    references: tuple[str, ...]
    candidates: tuple[str, ...]
    image: Any = field(default=None, hash=False)
    candidate_graphs: tuple[Any, ...] | None = field(default=None, hash=False, repr=False)
    reference_graphs: tuple[Any, ...] | None = field(default=None, hash=False, repr=False)

    def __repr__(self) -> str:
        image = getattr(self, "image", None)
        shown = f", image={_short(str(image), 40)}" if image is not None else ""
        return (
            f"Item(id={self.id!r}, candidates={_captions(self.candidates)}, "
            f"references={_captions(self.references)}{shown})"
        )


#: Items shown in a Dataset's repr, and characters shown of a caption.
REPR_ITEMS, REPR_CHARS = 3, 40


def _short(text: str, limit: int = REPR_CHARS) -> str:
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


def _captions(captions: tuple[str, ...], shown: int = 2) -> str:
    """A bounded repr of a list of captions: the first ``shown``, each cut at ``REPR_CHARS``."""
    more = f", … {len(captions) - shown} more" if len(captions) > shown else ""
    return "[" + ", ".join(_short(c) for c in captions[:shown]) + more + "]"


@dataclass(frozen=True)
class Problem:
    """One problem found in the input: where it is and what is wrong."""

    source: str
    item: ItemId | None
    message: str
    line: int | None = None

    def __str__(self) -> str:
        where = self.source
        if self.line is not None:
            where += f":{self.line}"
        if self.item is not None:
            where += f": item {self.item!r}"
        return f"{where}: {self.message}"


@dataclass
class Dataset:
    """A sequence of items, with the problems of any items that were skipped on request."""

    items: list[Item]
    source: str = "<memory>"
    skipped: list[Problem] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.items)

    def __repr__(self) -> str:
        nrefs = sorted({len(item.references) for item in self.items})
        refs = (
            ""
            if not nrefs
            else (
                f", {nrefs[0]} references per item"
                if len(nrefs) == 1
                else f", {nrefs[0]}-{nrefs[-1]} references per item"
            )
        )
        lines = [
            f"<Dataset {self.source}: {len(self.items)} items, {self.n_candidates} candidates{refs}"
        ]
        lines += [f"  {item!r}" for item in self.items[:REPR_ITEMS]]
        if len(self.items) > REPR_ITEMS:
            lines.append(f"  ... and {len(self.items) - REPR_ITEMS} more items")
        if self.skipped:
            lines.append(f"  ({len(self.skipped)} problem(s) skipped)")
        return "\n".join(lines) + ">"

    def __iter__(self) -> Iterator[Item]:
        return iter(self.items)

    def __getitem__(self, index: int) -> Item:
        return self.items[index]

    @property
    def ids(self) -> list[ItemId]:
        return [item.id for item in self.items]

    @property
    def n_candidates(self) -> int:
        return sum(len(item.candidates) for item in self.items)

    def empty_candidates(self) -> list[tuple[ItemId, int]]:
        """(item id, candidate index) of every empty or whitespace-only candidate."""
        return [
            (item.id, j)
            for item in self.items
            for j, c in enumerate(item.candidates)
            if not c.strip()
        ]

    def flat_items(self) -> list[Item]:
        """Each candidate's item, in the order of :meth:`flat_pairs`."""
        return [item for item in self.items for _ in item.candidates]

    def flat_images(self) -> list[Any]:
        """Each candidate's image (its item's), in the order of :meth:`flat_pairs`."""
        return [item.image for item in self.items for _ in item.candidates]

    def flat_pairs(self) -> tuple[list[str], list[Sequence[str]], list[int]]:
        """Every candidate with its item's references, and the offsets of each item's block."""
        cands: list[str] = []
        refs: list[Sequence[str]] = []
        offsets = [0]
        for item in self.items:
            cands.extend(item.candidates)
            refs.extend([item.references] * len(item.candidates))
            offsets.append(len(cands))
        return cands, refs, offsets
