"""SPICE's scene graphs and tuple matching in Python (capmetrics.plugins.spice._graph), on
hand-made parses with made-up synsets; tests/plugins/test_spice.py checks them against the jar."""

from __future__ import annotations

import math

import numpy as np
import pytest
from capmetrics.plugins.spice._graph import CATEGORIES, FIELDS, build, evaluate

SYNSETS = {
    "dog": {1},
    "puppy": {1, 2},
    "cat": {3},
    "red": {10},
    "crimson": {10, 11},
    "on": {20},
    "atop": {20},
    "a": {30},
    "b": {31},
    "c": {30, 31},
    "x": {40, 41},
    "y": {42, 43},
    "z": {40, 42, 43},
}


def synsets(word: str) -> frozenset[int]:
    return frozenset(SYNSETS.get(word, ()))


def words(graph) -> list[set[str]]:  # type: ignore[no-untyped-def]
    return [n.object.words for n in graph.nodes]


def row(values: np.ndarray) -> dict[str, dict[str, float]]:
    table = values.reshape(len(CATEGORIES), len(FIELDS))
    return {c: dict(zip(FIELDS, table[i].tolist())) for i, c in enumerate(CATEGORIES)}


def test_objects_merge_into_the_most_similar_node() -> None:
    graph = build([[["dog"], ["cat"], ["puppy"]]], synsets)
    assert words(graph) == [{"dog", "puppy"}, {"cat"}] and graph.ties == 0
    graph = build([[["x"], ["y"], ["z"]]], synsets)  # z: Jaccard 1/4 with x, 2/3 with y
    assert words(graph) == [{"x"}, {"y", "z"}] and graph.ties == 0
    graph = build(
        [[["dog"]], [["dog"], ["sofa"], ["sofa"]]], synsets
    )  # equal objects: the same node
    assert words(graph) == [{"dog"}, {"sofa"}]


def test_a_tie_is_counted_and_kept_in_insertion_order() -> None:
    graph = build([[["a"], ["b"], ["c"]]], synsets)  # c: Jaccard 1/2 with both a and b
    assert words(graph) == [{"a", "c"}, {"b"}] and graph.ties == 1
    graph = build([[["a"], ["b"], ["c"]]], synsets, last_in_ties=True)
    assert words(graph) == [{"a"}, {"b", "c"}] and graph.ties == 1


def test_attributes_and_relations_merge_when_similar_and_drop_when_equal() -> None:
    graph = build(
        [
            [["car", "red"], ["car", "crimson"], ["car", "red"], ["car", "fast"]],
            [["car", "road", "be on"], ["car", "road", "atop"], ["car", "road", "on"]],
        ],
        synsets,
    )
    car, road = graph.nodes
    assert [a.words for a in car.attributes] == [{"red", "crimson"}, {"fast"}]
    assert [(e.source, e.target, e.relation.words) for e in graph.edges] == [
        (car, road, {"on", "atop"})
    ]
    assert [tuple(min(c.words) for c in t) for t in graph.tuples()] == [
        ("car",),
        ("car", "crimson"),
        ("car", "fast"),
        ("road",),
        ("car", "atop", "road"),
    ]


def test_evaluation_fields_and_subsets() -> None:
    test = build(
        [[["dog"], ["dog", "two"], ["dog", "red"], ["dog", "grass", "on"], ["ball"]]], synsets
    )
    ref = build(
        [
            [["puppy"], ["puppy", "two"], ["puppy", "crimson"], ["puppy", "grass", "atop"]],
            [["grass"], ["grass", "green"]],
        ],
        synsets,
    )
    got = row(evaluate(test, ref))
    # test: dog, (dog,two), (dog,red), grass, ball, (dog,on,grass): all but ball match;
    # reference: puppy, (puppy,two), (puppy,crimson), grass, (grass,green), (puppy,atop,grass)
    assert got["All"] == {
        "pr": 5 / 6,
        "re": 5 / 6,
        "f": 2 * (5 / 6 * 5 / 6) / (5 / 6 + 5 / 6),
        "tp": 5,
        "fp": 1,
        "fn": 1,
    }
    assert got["Object"]["tp"] == 2 and got["Object"]["fp"] == 1 and got["Relation"]["f"] == 1.0
    assert got["Cardinality"] == {"pr": 1.0, "re": 1.0, "f": 1.0, "tp": 1, "fp": 0, "fn": 0}
    # red matches the reference's crimson, which is not a colour word: no colour tuple in common
    assert got["Color"] == {"pr": 0.0, "re": 0.0, "f": 0.0, "tp": 0, "fp": 1, "fn": 1}
    assert all(math.isnan(got["Size"][f]) for f in ("pr", "re", "f")) and got["Size"]["tp"] == 0


def test_empty_candidate_and_empty_references() -> None:
    empty, some = build([[]], synsets), build([[["dog"]]], synsets)
    assert row(evaluate(empty, some))["All"] == {
        "pr": 0.0,
        "re": 0.0,
        "f": 0.0,
        "tp": 0,
        "fp": 0,
        "fn": 1,
    }
    got = row(evaluate(some, empty))
    assert got["All"]["f"] == 0.0 and math.isnan(got["Object"]["f"])


@pytest.mark.parametrize("sets,expected", [((set(), set()), "nan"), (({1, 2}, {2, 3}), 1 / 3)])
def test_similarity_is_java_float(sets, expected) -> None:  # type: ignore[no-untyped-def]
    from capmetrics.plugins.spice._graph import Concept

    a, b = Concept("p", frozenset(sets[0])), Concept("q", frozenset(sets[1]))
    value = a.similarity(b)
    if expected == "nan":
        assert math.isnan(value)
    else:
        assert value == float(np.float32(1) / np.float32(3)) and value != expected
