"""SPICE 1.0's scene graphs and tuple matching, from each caption's parsed tuples.

A caption's parse is a list of string tuples: ``[object]``, ``[object, attribute]`` or
``[subject, object, relation]`` (made by the jar's parser, see ``_parse``). The references of an
item are merged into one scene graph, the candidate makes another, as SPICE does:

- a *concept* is a set of words and the union of their WordNet synsets (Meteor's synonym data);
  two concepts are *similar* when they share a word or a synset, and the *similarity* of two
  concepts is 1 when they share a word, else the Jaccard index of their synsets (a 32-bit float);
- an object word joins the node whose object concept equals it, else is merged into the most
  similar node (similarity > 0), else becomes a new node;
- an attribute that equals one of its node's attributes is dropped, else is merged into the first
  similar one, else added; a relation that equals an edge between the same two nodes is dropped,
  else is merged into the first similar one, else added.

The graph's tuples are every node's object, every (object, attribute) and every (source object,
relation, target object). A candidate tuple is a true positive when some reference tuple of the
same length is similar position by position; ``fp = |candidate| - tp``, ``fn = |reference| - tp``.

The jar keeps nodes, attributes and edges in hash sets whose order follows Java identity hash
codes, so where a word is equally similar to two nodes (or an attribute or relation to two
similar ones) the jar picks one at random. Such *ties* are counted here (``Graph.ties``; these are
kept in insertion order) so that their effect can be reported; they are rare.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

Tuples = Sequence[Sequence[str]]

#: The words of SPICE's Cardinality, Color and Size subsets (attribute concepts of one word).
SMALL_NUMBERS = frozenset("one two three four five six seven eight nine ten".split())
COMMON_COLORS = frozenset(
    (
        "black brown blue red yellow pink gray grey green dark light white cream orange "
        "purple maroon beige violet"
    ).split()
)
SIZE_ADJECTIVES = frozenset(
    (
        "baby illimitable scrawny beefy immeasurable short big immense sizable bony infinitesimal "
        "skeletal boundless lanky skimpy brawny large skinny broad lean slender bulky life-size "
        "slim chunky limitless small colossal little squat compact mammoth stocky corpulent "
        "massive stout cosmic meager strapping cubby measly sturdy curvy microscopic tall elfin "
        "mini teensy emaciated miniature teeny endless minuscule teeny-tiny enormous minute "
        "teeny-weeny epic narrow thick expansive obese thickset extensive outsized thin fat "
        "oversize tiny fleshy overweight titanic full-size paltry towering gargantuan petite "
        "trifling gaunt pint-size trim giant plump tubby gigantic pocket-size undersized grand "
        "portly underweight great pudgy unlimited heavy puny vast hefty rotund wee huge scanty "
        "whopping hulking scraggy wide"
    ).split()
)
#: The categories of SPICE's ``-subset`` output, in coco-caption's order, and the per-category
#: fields.
CATEGORIES = ("All", "Object", "Attribute", "Relation", "Color", "Cardinality", "Size")
FIELDS = ("pr", "re", "f", "tp", "fp", "fn")
_LEADING_BE = re.compile(r"^be ")
_JAVA_SPACE = "".join(chr(c) for c in range(33))


def lookup_key(word: str) -> str:
    """The form a word or phrase is looked up in WordNet by (Java-trimmed, lower case, ``_`` for
    spaces)."""
    return word.strip(_JAVA_SPACE).lower().replace(" ", "_")


def relation_word(relation: str) -> str:
    """A relation's concept word: without a leading ``be `` (``be on`` -> ``on``)."""
    return _LEADING_BE.sub("", relation)


def synset_keys(tuples: Tuples) -> set[str]:
    """The lookup keys of every concept a caption's tuples make (what its synsets are needed
    for)."""
    keys = set()
    for t in tuples:
        words = [t[0], t[1], relation_word(t[2])] if len(t) == 3 else t
        keys.update(lookup_key(w) for w in words)
    return keys


class Concept:
    """A set of words and their synsets (SPICE's SemanticConcept)."""

    __slots__ = ("words", "synsets", "_features")

    def __init__(self, word: str, synsets: frozenset[int]) -> None:
        self.words = {word}
        self.synsets = set(synsets)
        self._features: frozenset[str | int] | None = None

    def features(self) -> frozenset[str | int]:
        """Words and synsets in one set (strings never equal numbers): two concepts are similar
        exactly when their features intersect. Taken once the graph is complete."""
        if self._features is None:
            self._features = frozenset(self.words) | frozenset(self.synsets)
        return self._features

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Concept)
            and self.words == other.words
            and self.synsets == other.synsets
        )

    __hash__ = None  # type: ignore[assignment]  # mutable

    def similar(self, other: Concept) -> bool:
        return not self.synsets.isdisjoint(other.synsets) or not self.words.isdisjoint(other.words)

    def similarity(self, other: Concept) -> float:
        if not self.words.isdisjoint(other.words):
            return 1.0
        common = len(self.synsets & other.synsets)
        if common == 0:
            return 0.0 if self.synsets or other.synsets else math.nan  # Java's 0f/0f: never greater
        return float(np.float32(common) / np.float32(len(self.synsets | other.synsets)))

    def merge(self, other: Concept) -> None:
        self.words |= other.words
        self.synsets |= other.synsets

    def single_word(self) -> str | None:
        """The concept's word when it has exactly one (SPICE's subset filters compare those)."""
        return next(iter(self.words)) if len(self.words) == 1 else None


@dataclass
class Node:
    object: Concept
    attributes: list[Concept] = field(default_factory=list)


@dataclass
class Edge:
    source: Node
    target: Node
    relation: Concept


class Graph:
    """One scene graph built from tuples in order; ``synsets(word)`` gives a word's WordNet
    synsets."""

    def __init__(
        self, synsets: Callable[[str], frozenset[int]], last_in_ties: bool = False
    ) -> None:
        self.synsets = synsets
        self.pick = (
            -1 if last_in_ties else 0
        )  # which of several equally good candidates a tie takes
        self.nodes: list[Node] = []
        self.edges: list[Edge] = []
        self.ties = 0
        self.prepared: Any = None  # see prepare(); set once the graph is complete

    def concept(self, word: str) -> Concept:
        return Concept(word, self.synsets(lookup_key(word)))

    def add(self, tuple_: Sequence[str]) -> None:
        """Add one parsed tuple (1: object, 2: object + attribute, 3: subject, object, relation)."""
        if len(tuple_) == 1:
            self.node(tuple_[0])
        elif len(tuple_) == 2:
            self.add_attribute(self.node(tuple_[0]), self.concept(tuple_[1]))
        elif len(tuple_) == 3:
            source = self.node(tuple_[0])
            target = self.node(tuple_[1])
            self.add_relation(source, target, self.concept(relation_word(tuple_[2])))

    def node(self, word: str) -> Node:
        """The node ``word`` belongs to: equal object, else merged into the most similar, else
        new."""
        concept = self.concept(word)
        equal = [n for n in self.nodes if n.object.words == concept.words and n.object == concept]
        if equal:
            self.ties += len(equal) > 1
            return equal[self.pick]
        best, chosen = 0.0, []
        for n in self.nodes:
            value = concept.similarity(n.object)
            if value > best:
                best, chosen = value, [n]
            elif value == best and chosen:
                chosen.append(n)
        if chosen:
            self.ties += len(chosen) > 1
            chosen[self.pick].object.merge(concept)
            return chosen[self.pick]
        self.nodes.append(Node(concept))
        return self.nodes[-1]

    def add_attribute(self, node: Node, concept: Concept) -> None:
        if any(concept == a for a in node.attributes):
            return
        similar = [a for a in node.attributes if concept.similar(a)]
        if similar:
            self.ties += len(similar) > 1
            similar[self.pick].merge(concept)
        else:
            node.attributes.append(concept)

    def add_relation(self, source: Node, target: Node, concept: Concept) -> None:
        same_ends = [e for e in self.edges if e.source is source and e.target is target]
        if any(concept == e.relation for e in same_ends):
            return
        similar = [e for e in same_ends if concept.similar(e.relation)]
        if similar:
            self.ties += len(similar) > 1
            similar[self.pick].relation.merge(concept)
        else:
            self.edges.append(Edge(source, target, concept))

    def tuples(self) -> list[tuple[Concept, ...]]:
        """Every object, (object, attribute) and (source, relation, target) of the graph."""
        out: list[tuple[Concept, ...]] = []
        for n in self.nodes:
            out.append((n.object,))
            out.extend((n.object, a) for a in n.attributes)
        out.extend((e.source.object, e.relation, e.target.object) for e in self.edges)
        return out

    def duplicate_objects(self) -> int:
        """Pairs of distinct nodes with equal objects (only after a tie; the jar then compares
        their attribute sets through broken hash codes)."""
        objects = [n.object for n in self.nodes]
        return sum(a == b for i, a in enumerate(objects) for b in objects[i + 1 :])


def build(
    parses: Sequence[Tuples], synsets: Callable[[str], frozenset[int]], last_in_ties: bool = False
) -> Graph:
    """The scene graph of one or more captions' tuples, added in order (SPICE's merged references);
    a tie takes the first candidate in insertion order (the last with ``last_in_ties``)."""
    graph = Graph(synsets, last_in_ties)
    for tuples in parses:
        for tuple_ in tuples:
            graph.add(tuple_)
    graph.ties += graph.duplicate_objects()
    return graph


def _category(t: tuple[Concept, ...]) -> tuple[str, ...]:
    """The categories besides All that a tuple belongs to."""
    if len(t) == 1:
        return ("Object",)
    if len(t) == 3:
        return ("Relation",)
    word = t[1].single_word()
    extra = (
        (("Color",) if word in COMMON_COLORS else ())
        + (("Cardinality",) if word in SMALL_NUMBERS else ())
        + (("Size",) if word in SIZE_ADJECTIVES else ())
    )
    return ("Attribute", *extra)


def _f(tp: int, fp: int, fn: int, allow_nan: bool) -> tuple[float, float, float]:
    """SPICE's precision, recall and F1 (``Evaluation.calcFScore``)."""
    ref_n, test_n = fn + tp, fp + tp
    if ref_n == 0:
        return (math.nan,) * 3 if allow_nan else (0.0, 0.0, 0.0)
    re_ = tp / ref_n
    pr = tp / test_n if test_n > 0 else 0.0
    f = 2.0 * (pr * re_) / (pr + re_) if pr > 0 and re_ > 0 else 0.0
    return pr, re_, f


Prepared = tuple[
    list[tuple[tuple[frozenset, ...], tuple[str, ...]]], dict[int, list], dict[str, int]
]


def prepare(graph: Graph) -> Prepared:
    """A finished graph's tuples as (features, categories), also grouped by length, and the number
    of tuples per category; computed once per graph (a reference graph serves many candidates)."""
    if graph.prepared is None:
        rows = [(tuple(c.features() for c in t), _category(t)) for t in graph.tuples()]
        by_size: dict[int, list] = {1: [], 2: [], 3: []}
        sizes = dict.fromkeys(CATEGORIES, 0)
        for features, cats in rows:
            by_size[len(features)].append((features, cats))
            sizes["All"] += 1
            for c in cats:
                sizes[c] += 1
        graph.prepared = (rows, by_size, sizes)
    return graph.prepared


def evaluate(test: Graph, ref: Graph) -> np.ndarray:
    """One item's row: ``FIELDS`` of each of ``CATEGORIES`` (as ``_jar.to_row`` reads the jar's
    output)."""
    test_rows, _, test_sizes = prepare(test)
    _, ref_by_size, ref_sizes = prepare(ref)
    tp = dict.fromkeys(CATEGORIES, 0)
    for f, cats in test_rows:
        refs = ref_by_size[len(f)]
        if len(f) == 1:
            matched = [rc for (g, rc) in refs if not f[0].isdisjoint(g[0])]
        elif len(f) == 2:
            matched = [
                rc for (g, rc) in refs if not f[0].isdisjoint(g[0]) and not f[1].isdisjoint(g[1])
            ]
        else:
            matched = [
                rc
                for (g, rc) in refs
                if not f[0].isdisjoint(g[0])
                and not f[1].isdisjoint(g[1])
                and not f[2].isdisjoint(g[2])
            ]
        if matched:
            tp["All"] += 1
            for c in cats:
                tp[c] += any(c in rc for rc in matched)
    row = []
    for c in CATEGORIES:
        fp, fn = test_sizes[c] - tp[c], ref_sizes[c] - tp[c]
        row.extend((*_f(tp[c], fp, fn, allow_nan=c != "All"), tp[c], fp, fn))
    return np.array(row, dtype=float)
