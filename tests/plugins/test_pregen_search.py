"""Pre-gen search (R² ranking, dropped compositions, plots), stratification and the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest
from capmetrics import DataError, Distance, Scores
from capmetrics.cli import app
from capmetrics.data.model import Item
from capmetrics.plugins.pregen.compute import RaggedProbs, evaluate
from capmetrics.plugins.pregen.search import (
    pearson,
    read_rows,
    search,
    split_columns,
    strata,
    stratified_rows,
    write_rows,
)
from capmetrics.registry import get_registry
from scipy import stats
from typer.testing import CliRunner

from tests.conftest import SHARED

TOY = SHARED / "specs" / "pregen_toy_input.json"


def test_strata_test_vector():
    got = [(S, s, idx.tolist()) for S, s, idx in strata([0.5, 0.1, 0.9, 0.1, 0.0, 2.0, 0.3])]
    assert got == [
        (1, 0, [4, 1, 3, 6, 0, 2, 5]),
        (2, 0, [4, 1, 3]),
        (2, 1, [6, 0, 2]),
        (3, 0, [4, 1]),
        (3, 1, [3, 6]),
        (3, 2, [0, 2]),
        (4, 0, [4]),
        (4, 1, [1]),
        (4, 2, [3]),
        (4, 3, [6]),
        (5, 0, [4]),
        (5, 1, [1]),
        (5, 2, [3]),
        (5, 3, [6]),
        (5, 4, [0]),
    ]
    with pytest.raises(DataError, match="3 items cannot fill 4 strata"):
        strata([1, 2, 3], max_strata=4)


def test_pearson_matches_scipy():
    rng = np.random.default_rng(1)
    x = rng.random((30, 4))
    y = x[:, 0] * 2 + rng.normal(0, 0.3, 30)
    r, p = pearson(x, y)
    for j in range(4):
        ref = stats.pearsonr(x[:, j], y)
        assert r[j] == pytest.approx(ref.statistic, rel=1e-12)
        assert p[j] == pytest.approx(ref.pvalue, rel=1e-9)


def rows_fixture():
    rng = np.random.default_rng(2)
    cider = np.linspace(0.1, 1.2, 12)
    group = np.array(["coco", "flickr"] * 6)
    pre = {
        "mean_max_normcount_prefix0": cider * 0.3 + rng.normal(0, 0.01, 12),
        "geomean_join_pplx_none": 30 - 10 * cider + rng.normal(0, 1.5, 12),
        "sum_sum_pplx_prefix0": np.where(cider > 1, np.inf, cider),
        "sum_sum_normcount_none": np.full(12, 5000.0),
        "mean_mean_count_none": np.where(group == "coco", 12.0, cider),
        "mean_mean_prob_none": rng.random(12),
    }
    return pre, {"CIDEr": cider, "METEOR": cider * 0.2 + 0.1 + rng.normal(0, 0.01, 12)}, group


def test_search_ranks_by_r2_and_explains_drops():
    pre, post, group = rows_fixture()
    result = search(pre, post, group)
    ranking = result.rankings["CIDEr"]
    assert ranking.names[:2] == ["mean_max_normcount_prefix0", "geomean_join_pplx_none"]
    assert ranking.r[1] < 0 and ranking.r2[0] > 0.99
    assert ranking.r2[1] == pytest.approx(
        stats.pearsonr(pre["geomean_join_pplx_none"], post["CIDEr"]).statistic ** 2
    )
    assert set(ranking.r2_by_group) == {"coco", "flickr"}
    assert result.dropped == {
        "sum_sum_pplx_prefix0": "infinite in 2 of 12 rows (all rows)",
        "sum_sum_normcount_none": "constant (= 5000.0) over 12 rows (all rows)",
        "mean_mean_count_none": "constant (= 12.0) over 6 rows (group 'coco')",
    }
    assert result.best() == "mean_max_normcount_prefix0"
    assert not any(np.isinf(r.r2).any() for r in result.rankings.values())


def test_search_refuses_unusable_post_metrics():
    pre = rows_fixture()[0]
    with pytest.raises(DataError, match="post-gen 'flat' is non-finite or constant"):
        search(pre, {"flat": np.ones(12)})
    with pytest.raises(DataError, match="2 rows; R² needs at least 3"):
        search({"mean_mean_prob_none": [0.1, 0.2]}, {"CIDEr": [1.0, 2.0]})


def test_nan_is_dropped_with_a_reason():
    result = search(
        {"mean_mean_prob_none": [0.1, np.nan, 0.3], "mean_mean_prob_filter0": [1, 2, 4]},
        {"CIDEr": [1.0, 2.0, 3.0]},
    )
    assert result.dropped == {"mean_mean_prob_none": "NaN in 1 of 3 rows (all rows)"}


class Overlap(Distance):
    """Share of candidate words found in the references (a stand-in for CIDEr in tests)."""

    name = "overlap"

    def score(self, candidates, references):
        values = np.array(
            [
                np.mean([w in " ".join(refs).split() for w in c.split()]) if c.split() else 0.0
                for c, refs in zip(candidates, references)
            ]
        )
        return Scores(values, float(values.mean()))


def test_stratified_rows_recompute_metrics_per_stratum():
    probs = RaggedProbs.from_nested(json.loads(TOY.read_text()), item_ids=["a", "b", "c"])
    data = [
        Item("a", ("x y", "y z"), ("x q",)),
        Item("b", ("p q", "r"), ("p q",)),
        Item("c", ("s", "t"), ("u",)),
    ]
    rows = stratified_rows(
        probs,
        data,
        {"overlap": Overlap()},
        ["mean_max_normcount_prefix0"],
        by=Overlap(),
        max_strata=3,
        labels={"model": "toy"},
    )
    assert [(r["strata"], r["stratum"], r["n_items"]) for r in rows] == [
        (1, 0, 3),
        (2, 0, 1),
        (2, 1, 1),
        (3, 0, 1),
        (3, 1, 1),
        (3, 2, 1),
    ]
    # per-item overlap: a 0.5, b 1.0, c 0.0 → order c, a, b
    assert [r["overlap"] for r in rows] == [0.5, 0.0, 0.5, 0.0, 0.5, 1.0]
    assert (
        rows[3]["mean_max_normcount_prefix0"]
        == evaluate(probs.subset([2]), ["mean_max_normcount_prefix0"])[0]
    )
    assert all(r["model"] == "toy" for r in rows)
    with pytest.raises(DataError, match="differ from the dataset"):
        stratified_rows(probs, data[::-1], {"overlap": Overlap()}, by=Overlap())


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cli():
    get_registry().plugin_manager.hook.register_commands(app=app)
    return CliRunner()


def test_cli_score_file(cli, tmp_path):
    result = cli.invoke(
        app,
        [
            "pregen",
            "score",
            str(TOY),
            "-m",
            "mean_max_normcount_prefix0",
            "-m",
            "mean-join-pplx-prefix0",
        ],
    )
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "metric\tvalue",
        "mean_max_normcount_prefix0\t0.7222222222222222",
        "mean_join_pplx_prefix0\tinf",
    ]
    out = tmp_path / "all.tsv"
    result = cli.invoke(app, ["pregen", "score", str(TOY), "--all", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert len(out.read_text().splitlines()) == 673


def test_cli_score_from_a_source(cli, tmp_path):
    data = tmp_path / "data.jsonl"
    data.write_text(
        json.dumps({"id": "d", "references": ["dog a", "a dog"], "candidates": ["a dog"]}) + "\n"
    )
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["<s>", "</s>", "<unk>", "a", "dog"]))
    saved = tmp_path / "probs.npz"
    source = f"torch-model(model='tests.plugins.test_pregen_search:uniform', vocabulary='{vocab}')"
    result = cli.invoke(
        app,
        [
            "pregen",
            "score",
            "--source",
            source,
            "--data",
            str(data),
            "-m",
            "sum_join_count_none",
            "--save-probs",
            str(saved),
        ],
    )
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[1] == "sum_join_count_none\t6.0"
    assert saved.exists()


def uniform(cond, tokens):
    import torch

    return torch.zeros(tokens.shape[0], tokens.shape[1], 5)


def test_cli_score_errors(cli, tmp_path):
    result = cli.invoke(app, ["pregen", "score", str(TOY), "-m", "mean_max_normcount_prefix9"])
    assert result.exit_code == 1 and "tier 1: unknown 'prefix9'" in result.output
    result = cli.invoke(app, ["pregen", "score"])
    assert result.exit_code == 1 and "give either a probability file or --source" in result.output
    bad = tmp_path / "bad.json"
    bad.write_text("[[[[0.5, 0], [1.5, 0]]]]")
    result = cli.invoke(app, ["pregen", "score", str(bad)])
    assert (
        result.exit_code == 1
        and "item 0, reference 0, position 1: probability 1.5" in result.output
    )


def test_cli_search_writes_table_and_plot(cli, tmp_path):
    pre, post, group = rows_fixture()
    rows = [
        {
            "model": f"m{i}",
            "dataset": group[i],
            **{k: float(v[i]) for k, v in {**post, **pre}.items()},
        }
        for i in range(12)
    ]
    path = tmp_path / "rows.jsonl"
    write_rows(rows, path)
    columns = read_rows(path)
    assert split_columns(columns)[1:] == (["CIDEr", "METEOR"], ["model", "dataset"])
    ranked, plot = tmp_path / "ranked.tsv", tmp_path / "best.png"
    result = cli.invoke(
        app,
        [
            "pregen",
            "search",
            str(path),
            "--group",
            "dataset",
            "--top",
            "2",
            "--out",
            str(ranked),
            "--plot",
            str(plot),
        ],
    )
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "# CIDEr: 3 compositions ranked, 12 rows"
    assert lines[2].startswith("1\tmean_max_normcount_prefix0\t")
    assert "sum_sum_pplx_prefix0\tinfinite in 2 of 12 rows (all rows)" in lines
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = read_rows(ranked)
    assert len(table["composition"]) == 6 and "r2_coco" in table
    result = cli.invoke(app, ["pregen", "search", str(path), "--post", "BLEU"])
    assert result.exit_code == 1 and "no column 'BLEU'" in result.output


def test_cli_names(cli):
    result = cli.invoke(app, ["pregen", "names"])
    assert result.exit_code == 0 and len(result.output.splitlines()) == 504
    assert result.output.splitlines()[0] == "sum_sum_prob_none"
