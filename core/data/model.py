"""The data model: an item is one visual input with its references and candidates."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Union

ItemId = Union[str, int]


@dataclass(frozen=True)
class Item:
    """One image (or video) id with its human references and one or more candidates."""

    id: ItemId
    references: tuple[str, ...]
    candidates: tuple[str, ...]


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
        return [(item.id, j) for item in self.items for j, c in enumerate(item.candidates) if not c.strip()]

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
