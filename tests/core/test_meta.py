"""Meta-evaluation: correlations, bootstrap, judgments loader, pairwise accuracy, presets, CLI."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
import typer
from capmetrics import Distance, Scores
from capmetrics.analysis.meta import (
    agreement,
    correlate,
    correlations,
    leave_one_out,
    load_preset,
    pairwise_accuracy,
)
from capmetrics.data.judgments import (
    Judgments,
    JudgmentsError,
    MissingRatingError,
    NonNumericRatingError,
    PairJudgments,
    UnknownIdError,
    load_judgments,
)
from capmetrics.data.model import Dataset, Item
from capmetrics.errors import DataError
from scipy import stats
from typer.testing import CliRunner

from tests.conftest import FLICKR8K

needs_flickr8k = pytest.mark.skipif(
    not (FLICKR8K / "Flickr8k.token.txt").is_file(), reason="Flickr8k not found"
)


class WordOverlap(Distance):
    """Test metric: share of candidate words found in any reference."""

    name = "test-overlap"

    def score(self, candidates: Sequence[str], references: Sequence[Sequence[str]]) -> Scores:
        vals = []
        for c, refs in zip(candidates, references):
            words = c.lower().split()
            ref_words = {w for r in refs for w in r.lower().split()}
            vals.append(sum(w in ref_words for w in words) / max(len(words), 1))
        v = np.array(vals)
        return Scores(v, float(v.mean()) if v.size else 0.0)


def write_jsonl(path: Path, records: list[object]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


# -- correlations ------------------------------------------------------------------------------
@pytest.mark.parametrize("n,levels", [(40, 4), (500, 3), (3000, 11), (200, 150)])
def test_correlations_match_scipy(n: int, levels: int) -> None:
    rng = np.random.default_rng(n)
    x = np.round(rng.random(n) * 10) / 10  # many ties in the metric too
    y = rng.integers(0, levels, n) + (x > 0.5)
    got = correlations(x, y)
    assert got["pearson"] == pytest.approx(stats.pearsonr(x, y)[0], abs=1e-12)
    assert got["spearman"] == pytest.approx(stats.spearmanr(x, y)[0], abs=1e-12)
    assert got["kendall_b"] == pytest.approx(
        stats.kendalltau(x, y, variant="b").statistic, abs=1e-12
    )
    assert got["kendall_c"] == pytest.approx(
        stats.kendalltau(x, y, variant="c").statistic, abs=1e-12
    )


def test_correlations_constant_input_is_nan() -> None:
    assert all(np.isnan(v) for v in correlations(np.ones(5), np.arange(5)).values())


def _toy_judgments(n: int = 60, raters: int = 3) -> tuple[Judgments, np.ndarray]:
    rng = np.random.default_rng(0)
    items = [
        Item(f"img{i // 3}#{i}", ("a dog runs", "a dog is running"), (f"cand {i}",))
        for i in range(n)
    ]
    scores = rng.random(n)
    ratings = np.clip(np.round(scores[:, None] * 4 + rng.normal(0, 1, (n, raters))), 1, 4)
    judged = Judgments.from_ratings(Dataset(items), ratings, [f"img{i // 3}" for i in range(n)])
    return judged, scores


def test_bootstrap_is_seeded_and_brackets_the_estimate() -> None:
    judged, scores = _toy_judgments()
    a = correlate(scores, judged, n_boot=200, seed=1)
    b = correlate(scores, judged, n_boot=200, seed=1)
    c = correlate(scores, judged, n_boot=200, seed=2)
    assert a == b and a != c
    for est in a.values():
        assert est.low <= est.value <= est.high
    assert judged.n_points == 180
    assert np.isnan(correlate(scores, judged, n_boot=0)["kendall_c"].low)


def test_item_rating_reductions_and_split() -> None:
    items = [Item(str(i), ("r",), ("c",)) for i in range(3)]
    judged = Judgments.from_ratings(Dataset(items), [[1, 1, 4], [1, 2, 4], [2, 3, np.nan]])
    assert judged.n_points == 8  # the NaN rating is no data point
    assert judged.item_rating("mode").tolist() == [1.0, 2.0, 2.5]  # ties: median of the modes
    assert judged.item_rating("mean").tolist() == pytest.approx([2.0, 7 / 3, 2.5])
    big, _ = _toy_judgments(90)
    first, second = big.split_by_group(0.5, seed=3)
    assert not (first & second).any() and (first | second).all()
    assert {big.groups[i] for i in np.flatnonzero(first)}.isdisjoint(
        {big.groups[i] for i in np.flatnonzero(second)}
    )
    assert big.subset(first).n_points == 3 * int(first.sum())


def test_agreement_with_ceiling() -> None:
    judged, _ = _toy_judgments(12)
    res = agreement(WordOverlap(), judged, n_boot=50)
    assert res.n_items == 12 and res.n_points == 36
    assert res.ceiling_n == 2 * 4  # 4 images x 2 references, each left out once
    assert res.ceiling_mean == pytest.approx(
        (2 / 3 + 2 / 4) / 2
    )  # "a dog runs" <-> "a dog is running"
    assert np.isnan(res.statistics["kendall_b"].value)  # every candidate scores 0
    loo = leave_one_out(judged.dataset, judged.groups)
    assert loo[0].candidates == ("a dog runs",) and loo[0].references == ("a dog is running",)


# -- judgments loader --------------------------------------------------------------------------
def test_load_rated_and_pairwise(tmp_path: Path) -> None:
    rated = write_jsonl(
        tmp_path / "r.jsonl",
        [
            {
                "id": "a",
                "image": "img1",
                "references": ["x y"],
                "candidate": "x",
                "rating": [1, 2, 3],
            },
            {"id": "b", "image": "img1", "candidate": "y", "rating": 4},
        ],
    )
    judged = load_judgments(rated, {"img1": ["x y", "y z"]})
    assert isinstance(judged, Judgments)
    assert judged.point_rating.tolist() == [1, 2, 3, 4] and judged.point_item.tolist() == [
        0,
        0,
        0,
        1,
    ]
    assert judged.dataset[1].references == ("x y", "y z") and judged.groups == ["img1", "img1"]
    pairs = load_judgments(
        write_jsonl(
            tmp_path / "p.jsonl",
            [
                {
                    "id": 1,
                    "references": ["a dog runs"],
                    "candidates": ["a dog", "a cat"],
                    "preferred": 0,
                    "category": "HC",
                },
                {
                    "id": 2,
                    "references": ["a dog runs"],
                    "candidates": ["a cat", "a dog runs"],
                    "preferred": 0,
                    "category": "HI",
                },
                {
                    "id": 3,
                    "references": ["a dog runs"],
                    "candidates": ["a dog", "dog a"],
                    "preferred": 1,
                    "category": "HI",
                },
            ],
        )
    )
    assert isinstance(pairs, PairJudgments)
    acc = pairwise_accuracy(WordOverlap(), pairs)
    assert acc.accuracy == {"HC": 1.0, "HI": 0.25} and acc.ties == {"HC": 0.0, "HI": 0.5}
    assert acc.mean == pytest.approx(0.625) and acc.counts == {"HC": 1, "HI": 2}


@pytest.mark.parametrize(
    "record,error,text",
    [
        ({"id": "a", "references": ["r"], "candidate": "c"}, MissingRatingError, "no rating"),
        (
            {"id": "a", "references": ["r"], "candidate": "c", "rating": "good"},
            NonNumericRatingError,
            "'good'",
        ),
        (
            {"id": "a", "references": ["r"], "candidate": "c", "rating": [1, None]},
            NonNumericRatingError,
            "finite",
        ),
        (
            {"id": "a", "image": "nope", "candidate": "c", "rating": 1},
            UnknownIdError,
            "unknown image id 'nope'",
        ),
        (
            {"id": "a", "references": ["r"], "candidates": ["c", "d"]},
            MissingRatingError,
            "no preference",
        ),
    ],
)
def test_bad_judgments_raise_named_errors(
    tmp_path: Path, record: dict, error: type, text: str
) -> None:
    path = write_jsonl(tmp_path / "bad.jsonl", [record])
    with pytest.raises(error, match=text) as info:
        load_judgments(path, {"img": ["r"]})
    assert isinstance(info.value, DataError) and ":1: item 'a'" in str(info.value)


def test_mixed_problems_are_all_listed(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "bad.jsonl",
        [
            {"id": "a", "references": ["r"], "candidate": "c"},
            {"id": "b", "references": ["r"], "candidate": "c", "rating": float("nan")},
            {"id": "b", "references": ["r"], "candidate": "c", "rating": 1},
        ],
    )
    with pytest.raises(JudgmentsError) as info:
        load_judgments(path)
    assert type(info.value) is JudgmentsError and len(info.value.problems) == 3
    assert "duplicate id" in str(info.value)


# -- presets: the numbers of PROVENANCE.md ------------------------------------------------------
TARGETS = {  # metric -> (Expert tau-c x100, CF tau-b x100)
    "bleu-1": (32.324, 17.947),
    "bleu-4": (30.776, 16.858),
    "rouge-l": (32.314, 19.899),
    "cider-d": (43.891, 24.614),
    "meteor": (41.822, 22.265),
}


@needs_flickr8k
def test_presets_follow_the_protocol() -> None:
    expert, p = load_preset("flickr8k-expert", FLICKR8K)
    assert (len(expert.dataset), expert.n_points, p.primary) == (5664, 16992, "kendall_c")
    assert len(set(expert.groups)) == 1000
    cf, p = load_preset("flickr8k-cf", FLICKR8K)
    assert (len(cf.dataset), cf.n_points, p.primary) == (47830, 47830, "kendall_b")
    assert set(cf.groups) == set(expert.groups)


@pytest.fixture(scope="module")
def flickr8k_presets() -> dict[str, tuple[Judgments, str]]:
    out = {}
    for name in ("flickr8k-expert", "flickr8k-cf"):
        judged, p = load_preset(name, FLICKR8K)
        out[name] = (judged, p.primary)
    return out


@needs_flickr8k
@pytest.mark.parametrize("metric", ["bleu-1", "bleu-4", "rouge-l", "cider-d"])
def test_reproduces_published_correlations(metric: str, flickr8k_presets) -> None:  # type: ignore[no-untyped-def]
    """METEOR (41.822 / 22.265) is left to docs/usage/meta.md: its JVM needs minutes here."""
    from capmetrics.analysis.meta import metric_scores

    for k, preset in enumerate(("flickr8k-expert", "flickr8k-cf")):
        judged, primary = flickr8k_presets[preset]
        value = correlate(metric_scores(metric, judged.dataset), judged, n_boot=0)[primary].value
        assert 100 * value == pytest.approx(TARGETS[metric][k], abs=0.01), preset


# -- CLI ---------------------------------------------------------------------------------------
def test_meta_cli(tmp_path: Path, add_plugin) -> None:  # type: ignore[no-untyped-def]
    from capmetrics import hookimpl
    from capmetrics.cli.meta import register

    class Plugin:
        @hookimpl
        def register_distances(self, register):  # type: ignore[no-untyped-def]
            register(WordOverlap)

    add_plugin(Plugin(), "test-overlap")
    app = typer.Typer()
    register(app)
    app.command("noop")(lambda: None)  # a second command keeps `meta` a subcommand
    judged, _ = _toy_judgments(12)
    path = write_jsonl(
        tmp_path / "j.jsonl",
        [
            {
                "id": it.id,
                "image": g,
                "references": list(it.references),
                "candidate": it.candidates[0],
                "rating": float(r),
            }
            for it, g, r in zip(judged.dataset, judged.groups, judged.item_rating())
        ],
    )
    result = CliRunner().invoke(
        app, ["meta", str(path), "-m", "test-overlap", "--bootstrap", "20", "--format", "json"]
    )
    assert result.exit_code == 0, result.output
    row = json.loads(result.output)[0]
    assert row["metric"] == "test-overlap" and row["n_points"] == 12 and row["human_ceiling_n"] == 8
    bad = CliRunner().invoke(app, ["meta", str(path), "--preset", "flickr8k-cf"])
    assert bad.exit_code == 2 and "not both" in bad.output


# -- Polaris CSV (Polos's validate/dataset.py layout) ------------------------------------------
POLARIS = Path(__file__).parents[1] / "data" / "polaris" / "polaris_test.csv"
CLIP_IMAGES = Path(__file__).parents[1] / "data" / "clip" / "images"


def test_polaris_csv_items_images_and_tau_c() -> None:
    from capmetrics.data.clipscore_json import is_polaris_csv, load_polaris_csv

    assert is_polaris_csv(POLARIS)
    judged = load_polaris_csv(POLARIS, CLIP_IMAGES)
    assert len(judged.dataset) == 6 and judged.groups[:3] == [
        "astronaut.jpg",
        "astronaut.jpg",
        "chelsea.jpg",
    ]
    first = judged.dataset[0]
    assert first.image == str(CLIP_IMAGES / "astronaut.jpg") and len(first.references) == 4
    assert first.candidates[0].startswith("A young child is wearing blue goggles")
    assert judged.point_rating.tolist() == [0.0, 0.25, 0.5, 1.0, 0.75, 0.5]
    # scores 1..6 against those ratings: C = 11, D = 3, one tie in y, m = min(6, 5) = 5:
    # tau_c = 2 (C - D) / (n^2 (m - 1) / m) = 16 / 28.8 = 5/9
    tau = correlate(np.arange(1.0, 7.0), judged, n_boot=0)["kendall_c"].value
    assert tau == pytest.approx(5 / 9, abs=1e-12)
    assert load_polaris_csv(POLARIS).dataset[0].image == str(
        POLARIS.parent / "images" / "astronaut.jpg"
    )


def test_polaris_csv_bad_rows_are_all_named(tmp_path: Path) -> None:
    from capmetrics.data.clipscore_json import load_polaris_csv

    bad = tmp_path / "polaris_bad.csv"
    bad.write_text(
        "mt,refs,score,imgid\n,\"['a']\",0.5,x.jpg\n"
        "ok,not a list,0.5,x.jpg\nok,\"['a']\",high,x.jpg\n"
    )
    with pytest.raises(DataError) as err:
        load_polaris_csv(bad)
    text = str(err.value)
    assert (
        "mt (candidate)" in text
        and "refs must be" in text
        and "'high' is not a finite number" in text
    )
    (tmp_path / "other.csv").write_text("mt,score\nx,1\n")
    with pytest.raises(DataError, match="missing refs, imgid"):
        load_polaris_csv(tmp_path / "other.csv")


def test_meta_cli_reads_polaris_csv() -> None:
    from capmetrics.cli.meta import register

    app = typer.Typer()
    register(app)
    app.command("noop")(lambda: None)
    result = CliRunner().invoke(
        app,
        [
            "meta",
            str(POLARIS),
            "--images",
            str(CLIP_IMAGES),
            "-m",
            "bleu-1",
            "--bootstrap",
            "0",
            "--format",
            "json",
        ],
    )
    assert result.exit_code == 0, result.output
    row = json.loads(result.output)[0]
    assert row["n_points"] == 6 and "kendall_c" in row
