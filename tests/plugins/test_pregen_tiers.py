"""Pre-gen tiers and compositions: the paper's worked examples, all 504 toy values of the
released code, names, enumeration, extension by a third-party tier, bad input."""

from __future__ import annotations

import json

import capmetrics
import numpy as np
import pytest
from capmetrics import DataError, MetricError, SpecError
from capmetrics.errors import PluginError
from capmetrics.plugins.pregen import tiers
from capmetrics.plugins.pregen.compute import RaggedProbs, evaluate, group_reduce
from capmetrics.plugins.pregen.tiers import Composition, SentenceScore, TokenFilter

all_compositions, paper_compositions = tiers.all_compositions, tiers.paper_compositions
parse_composition, register_tier = tiers.parse_composition, tiers.register_tier

from tests.conftest import SHARED

SPECS = SHARED / "specs"


def bold(*values):
    """A caption from the paper's figures: positive = bold (top choice), negative = not."""
    return [[abs(v), v > 0] for v in values]


# Fig. 1 of the conference version: probabilities, bold = maximal in the vocabulary.
FIG1 = [
    [
        bold(0.975, 0.566, 0.246, 0.938, 0.913, 0.486, 0.940, 0.925, -0.142, 0.928),
        bold(0.975, 0.566, -0.244, 0.918, 0.938, -0.483, 0.926),
    ],
    [
        bold(0.975, 0.566, -0.245, 0.918, -0.283, 0.960, 0.958),
        bold(0.975, 0.566, -0.245, 0.928, 0.908, -0.283, 0.96, 0.958),
    ],
]
# Fig. 2 of the extended version (underlined = reference word, not maximal).
FIG2 = [
    [
        bold(0.711, 0.507, 0.380, 0.563, 0.577, -0.352, 0.557, 0.574, -0.268, 0.615),
        bold(0.711, 0.507, -0.369, 0.561, 0.605, 0.384, 0.520),
    ],
    [
        bold(0.714, -0.438, 0.364, 0.580, 0.454, 0.739, 0.743),
        bold(0.714, -0.438, -0.340, 0.592, 0.536, 0.454, 0.739, 0.743),
    ],
]


@pytest.fixture(scope="module")
def toy() -> RaggedProbs:
    return RaggedProbs.from_nested(json.loads((SPECS / "pregen_toy_input.json").read_text()))


def released_table() -> list[tuple[str, float]]:
    lines = (SPECS / "pregen_toy_504.tsv").read_text().splitlines()[1:]
    return [(name, float(value)) for name, value in (line.split("\t") for line in lines)]


def test_conference_worked_example():
    value = capmetrics.compose("pregen(mean_max_normcount_prefix0)")(RaggedProbs.from_nested(FIG1))
    assert value == pytest.approx((8 / 10 + 2 / 7) / 2, rel=1e-15)
    assert round(value, 3) == 0.543


def test_extended_worked_example_from_its_inputs():
    value = capmetrics.compose("pregen(mean_max_normcount_prefix0)")(RaggedProbs.from_nested(FIG2))
    assert value == pytest.approx((5 / 10 + 1 / 7) / 2, rel=1e-15)
    assert f"{value:.4f}" == "0.3214"


def test_all_504_values_of_the_released_code(toy):
    table = released_table()
    # The released code's filter0 keeps the non-top positions: capmetrics' nonmax.
    names = [name.replace("filter0", "nonmax") for name, _ in table]
    expected = np.array([v for _, v in table])
    values = evaluate(toy, names)
    assert np.isinf(expected).sum() == 53
    np.testing.assert_array_equal(np.isinf(values), np.isinf(expected))
    finite = np.isfinite(expected)
    np.testing.assert_allclose(values[finite], expected[finite], rtol=1e-13, atol=0)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("mean_max_normcount_prefix0", 0.7222222222222222),
        ("mean_max_count_prefix0", 2.0),
        ("mean_mean_prob_none", 0.09700000000000002),
        ("median_median_prob_none", 0.069),
        ("mean_mean_pplx_none", 2.607238405777601),
        ("geomean_mean_pplx_none", 2.592499500058054),
        ("sum_join_count_none", 19.0),
        ("sum_join_normcount_nonmax", 1.8166666666666667),
        ("mean_sum_normcount_nonmax", 0.6055555555555555),
        ("geomean_geomean_prob_nonmax", 0.0),
        ("min_min_pplx_prefix0", 1.25),
        ("mean_join_pplx_prefix0", np.inf),
        ("max_geomean_prob_none", 0.19091883092036782),
    ],
)
def test_spec_table_values(toy, name, expected):
    assert evaluate(toy, [name])[0] == pytest.approx(expected, rel=1e-13)


def test_filter0_is_the_papers_filter(toy):
    # The paper's filter0 keeps the top positions: 13 of the 19 toy positions are top.
    assert evaluate(toy, ["sum_join_count_filter0", "sum_join_count_nonmax"]).tolist() == [
        13.0,
        6.0,
    ]


def test_enumeration_order_and_counts():
    names = [c.name for c in paper_compositions()]
    assert names == [name for name, _ in released_table()]
    assert len(names) == 504 and len(all_compositions()) == 672
    assert {c.tier1 for c in all_compositions()} == {"none", "filter0", "prefix0", "nonmax"}
    assert not any(c.tier4 == "join" for c in all_compositions())


@pytest.mark.parametrize(
    "text",
    [
        "mean_max_normcount_prefix0",
        "mean-max-normcount-prefix0",
        "MEAN_max_normcount_prefix0",
    ],
)
def test_names_parse(text):
    assert parse_composition(text) == Composition("mean", "max", "normcount", "prefix0")


def test_spec_forms_compose():
    pregen = capmetrics.compose("pregen(mean_join_pplx_none)")
    assert pregen.parsed == Composition("mean", "join", "pplx", "none")
    assert (
        capmetrics.compose("pregen(composition=geomean_join_pplx_none)").spec
        == "pregen(composition=geomean_join_pplx_none)"
    )
    assert capmetrics.compose("pregen").parsed.name == "mean_max_normcount_prefix0"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("mean_max_normcount_prefix1", "tier 1: unknown 'prefix1'. Did you mean 'prefix0'"),
        ("join_max_normcount_prefix0", "tier 4: unknown 'join'"),
        ("mean_max_normcount", "tier 1 options: none, filter0, prefix0, nonmax"),
    ],
)
def test_bad_names(text, message):
    with pytest.raises(SpecError, match=message):
        parse_composition(text)


def test_pregen_refuses_plain_values():
    with pytest.raises(MetricError, match="RaggedProbs"):
        capmetrics.compose("pregen")([0.1, 0.2])


def test_geomean_rules(toy):
    # prob = 0 (empty selection) makes a geometric mean 0; pplx = inf propagates.
    values = evaluate(
        toy,
        ["geomean_geomean_prob_filter0", "geomean_join_pplx_prefix0", "min_geomean_pplx_prefix0"],
    )
    assert values[0] > 0  # every toy caption has a top position
    assert values[1] == np.inf
    # image B: prefixes [0.8] and [0.6, 0.6] give pplx 1.25 and 1/0.6; images A and C give inf
    assert values[2] == pytest.approx(np.sqrt(1.25 / 0.6), rel=1e-14)


def test_ragged_references_reduce_per_item():
    data = [[bold(0.5, 0.4)], [bold(0.5, -0.5), bold(0.9, 0.8), bold(0.2)]]
    probs = RaggedProbs.from_nested(data)
    assert evaluate(
        probs, ["sum_sum_count_none", "mean_max_count_prefix0", "sum_median_count_none"]
    ).tolist() == [2 + 2 + 2 + 1, (2 + 2) / 2, 2 + 2]
    with pytest.raises(
        DataError, match=r"item 1: 3 references, most items have|item 0: 1 references"
    ):
        probs.with_reference_policy("error")
    assert probs.with_reference_policy("truncate").references_per_item.tolist() == [1, 1]


def test_group_reduce_matches_per_group_loop():
    rng = np.random.default_rng(0)
    values = rng.random((40, 3))
    offsets = np.array([0, 5, 10, 12, 19, 20, 25, 40])
    for name in ("sum", "mean", "median", "geomean", "max", "min"):
        agg = capmetrics.compose(name, "aggregator")
        expected = np.array(
            [[agg(values[a:b, j]) for j in range(3)] for a, b in zip(offsets[:-1], offsets[1:])]
        )
        np.testing.assert_allclose(group_reduce(agg, values, offsets), expected, rtol=1e-14)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([[bold(0.5, 1.2)]], r"item 0, reference 0, position 1: probability 1.2, outside \[0, 1\]"),
        (
            [[bold(0.5)], [[[float("nan"), True]]]],
            r"item 1, reference 0, position 0: probability NaN",
        ),
        (
            [[bold(0.5), []]],
            r"item 0, reference 1: no positions \(the END position must be included\)",
        ),
        ([[bold(0.5)], []], r"item 1: no reference captions"),
    ],
)
def test_bad_probabilities_are_named(data, message):
    with pytest.raises(DataError, match=message):
        RaggedProbs.from_nested(data)


def test_empty_dataset():
    with pytest.raises(MetricError, match="empty"):
        evaluate(RaggedProbs.from_nested([]), ["mean_max_normcount_prefix0"])


def test_subset_keeps_items_in_order(toy):
    part = toy.subset([2, 0])
    assert part.item_ids == (2, 0)
    whole = RaggedProbs.from_nested(json.loads((SPECS / "pregen_toy_input.json").read_text())[::-2])
    np.testing.assert_array_equal(
        evaluate(part, ["sum_join_prob_none"]), evaluate(whole, ["sum_join_prob_none"])
    )


class LastFilter(TokenFilter):
    """Keep only the END position."""

    name = "last"

    def keep(self, probs):
        out = np.zeros(len(probs.p), dtype=bool)
        out[probs.caption_offsets[1:] - 1] = True
        return out


class MeanProb(SentenceScore):
    """Arithmetic mean of the kept probabilities (0 if none)."""

    name = "meanprob"

    def score(self, probs, keep):
        count = np.add.reduceat(keep, probs.starts, axis=0)
        total = np.add.reduceat(np.where(keep, probs.p[:, None], 0.0), probs.starts, axis=0)
        return np.divide(total, count, out=np.zeros(count.shape), where=count > 0)


@pytest.fixture
def extra_tiers():
    saved = dict(tiers.FILTERS), dict(tiers.SCORES), list(tiers.REDUCTIONS)
    register_tier(LastFilter)
    register_tier(MeanProb)
    register_tier("hmp")
    yield
    tiers.FILTERS.clear()
    tiers.FILTERS.update(saved[0])
    tiers.SCORES.clear()
    tiers.SCORES.update(saved[1])
    tiers.REDUCTIONS[:] = saved[2]


def test_third_party_tiers_join_every_composition(extra_tiers, toy):
    assert len(all_compositions()) == 7 * 8 * 5 * 5
    assert len(paper_compositions()) == 504
    values = evaluate(toy, ["sum_join_meanprob_last", "hmp_max_prob_last", "sum_sum_count_last"])
    assert values[0] == pytest.approx(0.6 + 0.9 + 0.7 + 0.05 + 0.9 + 0.3)
    assert values[2] == 6.0
    assert 0 < values[1] <= 1


def test_register_tier_refuses_other_objects():
    with pytest.raises(SpecError, match="not a pre-gen tier"):
        register_tier(int)


def test_a_tier_name_registered_twice_is_a_named_error(extra_tiers):
    class OtherLast(LastFilter):
        """Another filter under the name ``last``."""

    register_tier(LastFilter)  # the same class again: nothing changes
    assert tiers.FILTERS["last"] is LastFilter
    with pytest.raises(
        PluginError,
        match=r"tier name 'last' is registered twice: .*LastFilter "
        r"and .*OtherLast",
    ):
        register_tier(OtherLast)
    assert tiers.FILTERS["last"] is LastFilter
    with pytest.raises(PluginError, match="'prob' is registered twice"):
        register_tier(type("OtherProb", (MeanProb,), {"name": "prob"}))


class TierPlugin:
    @capmetrics.hookimpl
    def register_pregen_tiers(self, register):
        register(LastFilter)


def test_tiers_from_a_plugin_hook(add_plugin):
    saved = dict(tiers.FILTERS)
    try:
        add_plugin(TierPlugin(), "pregen-tier-plugin")
        assert "last" in tiers.tier_options(1)
        assert len(all_compositions()) == 6 * 7 * 4 * 5
    finally:
        tiers.FILTERS.clear()
        tiers.FILTERS.update(saved)
