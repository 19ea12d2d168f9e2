"""Paired system comparison (approximate randomisation + bootstrap), --sample, the compare and
plot commands."""

from __future__ import annotations

import json
from itertools import product

import numpy as np
import pytest
import typer
from capmetrics import hookimpl
from capmetrics.analysis.compare import align, compare_systems, paired_test
from capmetrics.cli.compare import register
from capmetrics.data.model import Dataset, Item
from capmetrics.data.sampling import sample_dataset
from capmetrics.engine.parallel import Executor
from capmetrics.errors import DataError, MetricError
from typer.testing import CliRunner

from tests.plugins.test_trm import LineDistance
from tests.registry.test_registry import Overlap


class Plugin:
    @hookimpl
    def register_distances(self, register):
        register(Overlap)
        register(LineDistance)


@pytest.fixture
def plugins(add_plugin):
    add_plugin(Plugin(), "compare-test-distances")


def numbers(rng, k, shift):
    return tuple(repr(float(x)) for x in rng.normal(shift, 1, k))


def systems(count=30, shift_b=0.0, seed=0):
    rng = np.random.default_rng(seed)
    refs = [numbers(rng, 4, 0) for _ in range(count)]
    a = Dataset([Item(i, refs[i], numbers(rng, 5, 0)) for i in range(count)], "a")
    b = Dataset([Item(i, refs[i], numbers(rng, 5, shift_b)) for i in reversed(range(count))], "b")
    return a, b


def test_approximate_randomization_matches_exact_sign_flips():
    rng = np.random.default_rng(3)
    a, b = rng.normal(0.3, 1, 10), rng.normal(0, 1, 10)
    diff = a - b
    flips = [abs(np.dot(s, diff)) / 10 for s in product((-1, 1), repeat=10)]
    exact = np.mean([f >= abs(diff.mean()) - 1e-12 for f in flips])
    p, ci = paired_test(a, b, trials=20_000, seed=1)
    assert p == pytest.approx(exact, abs=0.01)
    assert ci["delta"][0] < diff.mean() < ci["delta"][1]
    assert paired_test(a, b, trials=500, seed=1) == paired_test(a, b, trials=500, seed=1)


def test_identical_and_clearly_different_systems():
    x = np.linspace(0, 1, 50)
    p, ci = paired_test(x, x.copy(), trials=200, resamples=100)
    assert p == 1.0 and ci["delta"] == (0.0, 0.0)
    p, ci = paired_test(x + 1, x, trials=999)
    assert p == 1 / 1000 and ci["delta"] == pytest.approx((1.0, 1.0))
    with pytest.raises(MetricError, match="at least 2"):
        paired_test([1.0], [2.0])


def test_classic_metric_comparison(plugins):
    a, b = systems()
    res = compare_systems(a, b, "overlap", trials=300, resamples=200)
    assert res.items == 30 and res.delta == pytest.approx(res.mean_a - res.mean_b)
    assert res.higher_is_better and 0 < res.p_value <= 1
    assert res.ci_a[0] <= res.mean_a <= res.ci_a[1]
    assert res.signature["test"] == "ar:300|bs:200|seed:0"


def test_multi_candidate_statistic_comparison_drops_undefined_items(plugins):
    a, b = systems(shift_b=3.0)
    bad = list(a.items)
    bad[0] = Item(0, bad[0].references, bad[0].candidates[:1])
    a = Dataset(bad, "a")
    spec = "trm(line-test, permutations=50)"
    res = compare_systems(a, b, spec, trials=500, resamples=200)
    assert (
        res.items == 29 and res.dropped[0][0] == 0 and "at least 2 candidates" in res.dropped[0][1]
    )
    assert not res.higher_is_better and res.better == "A" and res.p_value < 0.01
    parallel = compare_systems(
        a, b, spec, trials=500, resamples=200, executor=Executor("processes", 2)
    )
    assert parallel.to_dict() == res.to_dict()


def test_align_reports_mismatches():
    a, b = systems(4)
    assert align(a, b).ids == a.ids
    with pytest.raises(DataError, match="item 3 is in a but not in b"):
        align(a, Dataset(list(b.items)[1:], "b"))
    other = Dataset([Item(i.id, ("x",), i.candidates) for i in b], "b")
    with pytest.raises(DataError, match="different references"):
        align(a, other)


def test_sample_dataset_is_reproducible_and_bounded():
    a, _ = systems(6)
    s1 = sample_dataset(a, candidates=3, references=2, seed=5)
    assert all(len(i.candidates) == 3 and len(i.references) == 2 for i in s1)
    assert all(set(si.candidates) <= set(i.candidates) for si, i in zip(s1, a))
    assert sample_dataset(Dataset(list(reversed(a.items))), 3, 2, seed=5).items == list(
        reversed(s1.items)
    )
    assert sample_dataset(a, candidates=10).items == a.items
    with pytest.raises(MetricError, match="at least 1"):
        sample_dataset(a, candidates=0)


def write_jsonl(path, dataset):
    path.write_text(
        "".join(
            json.dumps(
                {"id": i.id, "references": list(i.references), "candidates": list(i.candidates)}
            )
            + "\n"
            for i in dataset
        )
    )
    return path


@pytest.fixture
def cli():
    app = typer.Typer()
    register(app)
    return app


def test_compare_command(plugins, cli, tmp_path):
    a, b = systems(shift_b=3.0)
    pa, pb = write_jsonl(tmp_path / "a.jsonl", a), write_jsonl(tmp_path / "b.jsonl", b)
    out = tmp_path / "cmp.json"
    result = CliRunner().invoke(
        cli,
        [
            "compare",
            str(pa),
            str(pb),
            "-m",
            "trm(line-test, permutations=20)",
            "-m",
            "overlap",
            "--trials",
            "200",
            "--resamples",
            "100",
            "--sample-candidates",
            "4",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "better: A" in result.output and result.output.count("\n") == 2
    saved = json.loads(out.read_text())
    assert [c["metric"] for c in saved["comparisons"]] == [
        "trm(line-test, permutations=20)",
        "overlap",
    ]
    bad = CliRunner().invoke(cli, ["compare", str(pa), str(pb), "-m", "nope"])
    assert bad.exit_code == 2 and "nope" in bad.output


def test_plot_commands(plugins, cli, tmp_path):
    a, _ = systems(5)
    pa = write_jsonl(tmp_path / "a.jsonl", a)
    png = tmp_path / "null.png"
    result = CliRunner().invoke(
        cli, ["plot", "null", str(pa), "-m", "trm(line-test)", "--item", "2", "--out", str(png)]
    )
    assert result.exit_code == 0, result.output
    assert png.read_bytes()[:4] == b"\x89PNG"
    missing = CliRunner().invoke(
        cli, ["plot", "null", str(pa), "-m", "trm(line-test)", "--item", "77", "--out", str(png)]
    )
    assert missing.exit_code == 1 and "no item with id '77'" in missing.output

    results = {
        "metrics": [
            {
                "name": "trm",
                "spec": "trm",
                "items": [
                    {"id": i, "value": 0.1, "p_value": p}
                    for i, p in enumerate([0.01, 0.2, 0.5, None])
                ],
            }
        ]
    }
    rpath = tmp_path / "r.json"
    rpath.write_text(json.dumps(results))
    ppng = tmp_path / "p.png"
    result = CliRunner().invoke(cli, ["plot", "p-values", str(rpath), "--out", str(ppng)])
    assert result.exit_code == 0, result.output
    assert ppng.read_bytes()[:4] == b"\x89PNG"
