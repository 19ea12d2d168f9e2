"""SPICE by category as sub-metrics: ``spice(category=object)`` and the other subcategories the jar
reports (attribute, relation, color, count, size), per item equal to the original jar's output on
the 40 Flickr8k-Expert items (+ 2 edge cases) of SPICE's parity test
(tests/data/spice/expert40.json, made by pycocoevalcap's own flow with spice-1.0.jar)."""

from __future__ import annotations

import json
from pathlib import Path

import capmetrics
import numpy as np
import pytest
from capmetrics.errors import MetricError
from capmetrics.plugins import spice
from capmetrics.plugins.spice import _resources

FIXTURE = json.loads(
    (Path(__file__).resolve().parents[1] / "data" / "spice" / "expert40.json").read_text()
)
#: spec category -> the jar's category name
JAR = {
    "object": "Object",
    "attribute": "Attribute",
    "relation": "Relation",
    "color": "Color",
    "count": "Cardinality",
    "size": "Size",
}


def _ready() -> str | None:
    try:
        problems = _resources.check()
    except MetricError as err:
        return str(err)
    return "; ".join(map(str, problems)) or None


def test_count_is_the_jars_cardinality() -> None:
    assert capmetrics.compose("spice(category=count)") == capmetrics.compose(
        "spice(category=cardinality)"
    )
    assert (
        capmetrics.compose("spice(category=Count, part=r)").spec
        == "spice(category=cardinality, part=r)"
    )
    with pytest.raises(MetricError, match="unknown category 'colour'"):
        spice.Spice(category="colour")


@pytest.mark.java
@pytest.mark.filterwarnings("ignore:1 empty candidate")
@pytest.mark.skipif(_ready() is not None, reason=f"SPICE is not set up: {_ready()}")
def test_category_sub_metrics_equal_the_jar() -> None:
    """One run, every category as its own metric: per-item F (and P, R for objects) as the jar's
    output gives them (None there = no tuples of that category = NaN here)."""
    items = FIXTURE["items"]
    specs = [f"spice(category={c})" for c in JAR] + [
        "spice(category=object, part=p)",
        "spice(category=object, part=r)",
    ]
    results = capmetrics.score(
        candidates=[it["candidate"] for it in items],
        references=[it["references"] for it in items],
        metrics=specs,
    )
    for spec in specs:
        category = spec.split("category=")[1].split(",")[0].rstrip(")")
        field = (
            {"p": "pr", "r": "re"}.get(spec.split("part=")[1][0], "f") if "part=" in spec else "f"
        )
        expected = np.array(
            [
                np.nan
                if it["scores"][JAR[category]][field] is None
                else it["scores"][JAR[category]][field]
                for it in items
            ],
            dtype=float,
        )
        np.testing.assert_allclose(
            results[spec].item_values, expected, rtol=0, atol=1e-12, err_msg=spec
        )
        known = expected[~np.isnan(expected)]
        assert results[spec].corpus == pytest.approx(known.mean(), abs=1e-12), spec
    # the categories are not all empty on this data: objects, attributes and relations are matched
    for category in ("object", "attribute", "relation", "color", "count"):
        assert np.nanmax(results[f"spice(category={category})"].item_values) > 0, category
