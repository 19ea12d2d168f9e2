"""Scene graphs as CAPTURE reads them: a caption's objects, attributes and relations.

A caption's graph comes either from the item (FACTUAL's format, one graph or one per sentence:
``{"entities": [{"head", "quantity", "attributes"}], "relations": [{"subject", "relation",
"object"}]}`` with entity indices in the relations) or from SPICE's CoreNLP tuples
(``[object]``, ``[object, attribute]``, ``[subject, object, relation]``). Either is merged the
way CAPTURE merges its parser's sentence graphs: object heads lemmatized as nouns, attributes as
adjectives (WordNet), attributes containing `` of`` dropped, relations kept as (subject lemma,
relation, object lemma); then objects in CAPTURE's stop-word list are dropped (with
``stop_words``). Sets keep first-appearance order (CAPTURE's Python sets iterate in hash order,
which changes from one interpreter to the next; see docs/metrics/detailed-captions.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from capmetrics.errors import MetricError
from capmetrics.plugins.detailed._wordnet import WordNet

Relation = tuple[str, str, str]


@dataclass(frozen=True)
class Parsed:
    """One caption's objects, attribute words (grouped by object, in order) and relations."""

    objects: tuple[str, ...]
    attributes: tuple[str, ...]
    relations: tuple[Relation, ...]


@lru_cache(maxsize=1)
def stop_words() -> frozenset[str]:
    """CAPTURE's stop-word list of objects (``capture_stop_words.txt``)."""
    lines = (
        Path(__file__).with_name("capture_stop_words.txt").read_text(encoding="utf-8").splitlines()
    )
    return frozenset(w for w in lines if w and not w.startswith("#"))


def check_factual(graph: Any, where: str) -> list[Mapping[str, Any]]:
    """A FACTUAL graph (or a list of them, one per sentence) as a list, checked in full.

    Raises:
        MetricError: naming ``where`` (the item and caption) and the first problem.
    """
    graphs = graph if isinstance(graph, list) else [graph]
    for s, g in enumerate(graphs):
        at = f"{where}, sentence graph {s}" if isinstance(graph, list) else where
        if not isinstance(g, Mapping):
            raise MetricError(f"{at}: a scene graph must be an object, got {type(g).__name__}")
        entities, relations = g.get("entities"), g.get("relations", [])
        if not isinstance(entities, list) or not isinstance(relations, list):
            raise MetricError(f"{at}: a scene graph needs lists 'entities' and 'relations'")
        for k, e in enumerate(entities):
            if not isinstance(e, Mapping) or not isinstance(e.get("head"), str):
                raise MetricError(f"{at}: entity {k} needs a string 'head'")
            attributes = e.get("attributes", [])
            if not isinstance(attributes, list) or not all(isinstance(a, str) for a in attributes):
                raise MetricError(f"{at}: entity {k}: 'attributes' must be a list of strings")
        for k, r in enumerate(relations):
            if not isinstance(r, Mapping) or not isinstance(r.get("relation"), str):
                raise MetricError(f"{at}: relation {k} needs a string 'relation'")
            for end in ("subject", "object"):
                index = r.get(end)
                if (
                    isinstance(index, bool)
                    or not isinstance(index, int)
                    or not 0 <= index < len(entities)
                ):
                    raise MetricError(
                        f"{at}: relation {k}: '{end}' must be an entity index "
                        f"(0-{len(entities) - 1}), got {index!r}"
                    )
    return graphs


def relation_word(relation: str) -> str:
    """A SPICE relation as its scene graph names it: without a leading ``be`` (``be on`` ->
    ``on``)."""
    return relation.removeprefix("be ")


def from_tuples(tuples: Sequence[Sequence[str]]) -> dict[str, Any]:
    """SPICE's tuples of one sentence as a FACTUAL-format graph (SPICE's relation words lose a
    leading ``be``, as its scene graphs do)."""
    entities: list[dict[str, Any]] = []
    index: dict[str, int] = {}
    relations = []

    def entity(head: str) -> int:
        if head not in index:
            index[head] = len(entities)
            entities.append({"head": head, "quantity": "", "attributes": []})
        return index[head]

    for t in tuples:
        if len(t) == 1:
            entity(t[0])
        elif len(t) == 2:
            attributes = entities[entity(t[0])]["attributes"]
            if t[1] not in attributes:
                attributes.append(t[1])
        elif len(t) == 3:
            relations.append(
                {"subject": entity(t[0]), "relation": relation_word(t[2]), "object": entity(t[1])}
            )
    return {"entities": entities, "relations": relations}


def merge(graphs: Sequence[Mapping[str, Any]], wordnet: WordNet, use_stop_words: bool) -> Parsed:
    """A caption's sentence graphs merged into CAPTURE's sets (see the module docstring)."""
    objects: dict[str, None] = {}
    attributes: dict[str, dict[str, None]] = {}
    relations: dict[Relation, None] = {}
    lemma = wordnet.lemmatize
    for graph in graphs:
        entities = graph["entities"]
        for entity in entities:
            head = lemma(entity["head"], "n")
            objects[head] = None
            for attribute in entity.get("attributes", ()):
                word = lemma(attribute, "a")
                if " of" not in word:
                    attributes.setdefault(head, {})[word] = None
        for r in graph.get("relations", ()):
            subject, obj = entities[r["subject"]]["head"], entities[r["object"]]["head"]
            relations[(lemma(subject, "n"), r["relation"], lemma(obj, "n"))] = None
    stop = stop_words() if use_stop_words else frozenset()
    return Parsed(
        tuple(o for o in objects if o not in stop),
        tuple(a for words in attributes.values() for a in words),
        tuple(relations),
    )
