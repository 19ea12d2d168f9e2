"""Harmonic mean p-value: ALGORITHMS.md Part B §6.3 test vectors (harmonicmeanp 3.0)."""

from __future__ import annotations

import numpy as np
import pytest
from capmetrics import compose
from capmetrics.components.pvalues import asymptotic_hmp, harmonic_mean, hmp_threshold
from capmetrics.plugins.aggregators import HarmonicMeanP

P = [0.01, 0.2, 0.5, 0.9]


def test_simple_and_asymptotic_on_the_four_p_values():
    assert HarmonicMeanP("simple")(P) == pytest.approx(0.03699897225077081, rel=1e-15)
    assert HarmonicMeanP()(P) == pytest.approx(0.044186348906669726, rel=1e-12)
    assert asymptotic_hmp(P) == pytest.approx(0.044186348906669726, rel=1e-12)


def test_subset_with_weight():
    assert float(harmonic_mean(np.array([0.01, 0.2]))) == pytest.approx(
        0.01904761904761905, rel=1e-15
    )
    p_r = asymptotic_hmp([0.01, 0.2], weight=0.5, total=4)
    assert p_r == pytest.approx(0.02284106087005744, rel=1e-12)
    assert p_r / 0.5 == pytest.approx(0.04568212174011488, rel=1e-12)


def test_vignette_vectors():
    assert hmp_threshold(0.05, 6_524_432) == pytest.approx(0.025930834719294898, rel=1e-10)
    w_r, raw = 0.0478903, 0.0008734522
    from capmetrics.components.pvalues import landau_sf

    assert w_r * float(landau_sf(w_r / raw, 6_524_432)) == pytest.approx(
        0.0013438973290569873, rel=1e-12
    )


@pytest.mark.parametrize(
    "alpha, expected",
    [
        (0.05, (0.0397209247, 0.0363924425, 0.0335786616)),
        (0.01, (0.0093561359, 0.0091588246, 0.0089696636)),
    ],
)
def test_thresholds(alpha, expected):
    got = [hmp_threshold(alpha, total) for total in (10, 100, 1000)]
    assert got == pytest.approx(list(expected), abs=1e-10)


def test_edge_cases_and_tail():
    assert HarmonicMeanP()([0.0, 0.5]) == 0.0
    assert HarmonicMeanP()([1.0, 1.0]) <= 1.0
    tiny = HarmonicMeanP()([1e-9] * 3)  # far in the tail: ≈ p̊, not a numerical 0
    assert tiny == pytest.approx(1e-9, rel=1e-3)
    with pytest.raises(ValueError, match="NaN"):
        HarmonicMeanP()([0.1, float("nan")])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        HarmonicMeanP("simple")([0.1, 1.5])
    with pytest.raises(ValueError, match="empty"):
        HarmonicMeanP()([])


def test_groups_and_spec():
    groups = HarmonicMeanP().reduce_groups(np.array(P + [0.5, 0.5]), np.array([0, 4, 6]))
    assert groups[0] == pytest.approx(0.044186348906669726, rel=1e-12)
    assert groups[1] == pytest.approx(float(HarmonicMeanP()([0.5, 0.5])))
    assert compose("hmp").method == "asymptotic"
    assert compose("hmp(method=simple)")(P) == pytest.approx(0.03699897225077081)
    assert compose("harmonic-mean-p(simple)").spec == "hmp(method=simple)"


def test_landau_tail_is_scipy_stats_landau_to_the_bit():
    """landau_sf calls the kernel behind scipy.stats.landau.sf (without importing scipy.stats):
    the same bytes for arrays and scalars, over the body, both tails, 0, ±inf and NaN."""
    from capmetrics.components.pvalues import landau_sf
    from scipy.special import digamma
    from scipy.stats import landau

    rng = np.random.default_rng(31)
    xs = np.concatenate(
        [
            rng.standard_normal(500) * 10,
            10 ** rng.uniform(-3, 300, 500),
            -(10 ** rng.uniform(-3, 300, 100)),
            [0.0, np.inf, -np.inf, np.nan, 5e-324, 1.7e308],
        ]
    )
    for total in (1, 4, 6000, 10**6):
        loc = np.log(total) + 1.0 + digamma(1.0) - np.log(2.0 / np.pi)
        with np.errstate(all="ignore"):
            assert (
                landau_sf(xs, total).tobytes() == landau.sf(xs, loc=loc, scale=np.pi / 2).tobytes()
            )
            for x in (3.0, 1e12, np.inf):
                ours, theirs = landau_sf(x, total), landau.sf(x, loc=loc, scale=np.pi / 2)
                assert (
                    type(ours) is type(theirs)
                    and np.array(ours).tobytes() == np.array(theirs).tobytes()
                )
