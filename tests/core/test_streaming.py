"""Streaming a JSONL file in chunks gives the bytes of scoring it whole, on every executor."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from capmetrics import Distance, Scores, hookimpl, score
from capmetrics.cli import app
from capmetrics.data.loaders import load_dataset
from capmetrics.engine.parallel import Executor
from capmetrics.engine.streaming import score_file, should_stream
from capmetrics.errors import DataError, MetricError
from typer.testing import CliRunner

from tests.conftest import SAMPLE

METRICS = ["bleu-4", "rouge-l", "cider-d", "bleu-1"]


def strip_version(text: str) -> str:
    return re.sub(r'"capmetrics": "[^"]*"', '"capmetrics": ""', text)


@pytest.fixture(scope="module")
def whole():
    return score(load_dataset(SAMPLE), METRICS).to_json()


@pytest.mark.parametrize("chunk", [1, 7, 1000])
def test_streamed_in_tiny_chunks_is_byte_identical(whole, chunk):
    streamed = score_file(SAMPLE, METRICS, chunk_size=chunk).to_json()
    assert streamed == whole
    assert json.loads(streamed)["metrics"][2]["details"] == {"df": "corpus"}


def test_streamed_on_processes_and_dask_is_byte_identical(whole):
    assert (
        score_file(SAMPLE, METRICS, chunk_size=9, executor=Executor("processes", jobs=2)).to_json()
        == whole
    )
    dask = Executor("dask", jobs=2, dask_processes=False)
    assert score_file(SAMPLE, METRICS, chunk_size=13, executor=dask).to_json() == whole


def test_cli_streams_with_chunk_size_and_writes_the_same_file(tmp_path, whole):
    out = tmp_path / "r.json"
    args = ["score", str(SAMPLE), "-q", "--out", str(out)] + [a for m in METRICS for a in ("-m", m)]
    result = CliRunner().invoke(app, args + ["--chunk-size", "5"])
    assert result.exit_code == 0, result.output
    assert out.read_text(encoding="utf-8") == whole
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no temporary file left


def test_problems_are_all_reported_before_scoring_and_skipped_items_match(tmp_path):
    lines = SAMPLE.read_text(encoding="utf-8").splitlines()
    first = json.loads(lines[0])
    bad = lines[:3] + ['{"id": 5}', "not json", json.dumps(first)] + lines[3:10]
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(bad) + "\n", encoding="utf-8")
    with pytest.raises(DataError) as err:
        score_file(path, ["bleu-4"], chunk_size=2)
    text = str(err.value)
    assert ":5: not valid JSON" in text and "duplicate id" in text and "item 5" in text
    good = tmp_path / "good.jsonl"
    good.write_text(
        "\n".join(bad[:3] + ['{"id": 5}', json.dumps(first)] + bad[6:]) + "\n", encoding="utf-8"
    )
    streamed = score_file(good, ["cider-d", "bleu-4"], chunk_size=2, on_error="skip")
    whole = score(load_dataset(good, on_error="skip"), ["cider-d", "bleu-4"])
    assert streamed.metrics[0].item_ids == whole.metrics[0].item_ids
    for a, b in zip(streamed.metrics, whole.metrics):
        assert a.corpus == b.corpus and a.item_values.tolist() == b.item_values.tolist()
    assert sorted(map(str, streamed.skipped)) == sorted(map(str, whole.skipped))


def test_what_cannot_stream_is_refused_with_the_reason(tmp_path):
    with pytest.raises(MetricError, match="trm.* is a statistic; streaming scores distances only"):
        score_file(SAMPLE, ["trm(cider-d)"], chunk_size=10)
    with pytest.raises(MetricError, match="meteor.* has no score_part/merge_scores"):
        score_file(SAMPLE, ["meteor"], chunk_size=10)
    assert should_stream(SAMPLE, "auto", 5) and not should_stream(SAMPLE, "auto", None)
    with pytest.raises(MetricError, match="streams JSONL files only"):
        should_stream(tmp_path / "x.json", "auto", 5)


class _Pooled(Distance):
    """A third-party distance of the statistics protocol: matched words over all words."""

    name = "stream-pooled"

    def _parts(self, candidates, references):
        found = np.array(
            [
                sum(w in " ".join(r).split() for w in c.split())
                for c, r in zip(candidates, references)
            ]
        )
        words = np.array([len(c.split()) for c in candidates])
        return found, words

    def score(self, candidates, references):
        return self.score_part(candidates, references)[0]

    def score_part(self, candidates, references):
        found, words = self._parts(candidates, references)
        sums = np.array([found.sum(), words.sum()], dtype=np.int64)
        return Scores(found / np.maximum(words, 1), float(sums[0] / max(sums[1], 1))), sums

    def merge_scores(self, parts):
        sums = np.sum([s for _, s in parts], axis=0)
        return Scores(
            np.concatenate([p.values for p, _ in parts]), float(sums[0] / max(sums[1], 1))
        )


class _FitsWhole(_Pooled):
    """Has corpus statistics (fit) but no way to fit them in parts."""

    name = "stream-fits-whole"

    def fit(self, references):
        self.seen_ = len(references)
        return self


class _StreamPlugin:
    @hookimpl
    def register_distances(self, register):
        register(_Pooled)
        register(_FitsWhole)


def test_a_third_party_distance_of_the_protocol_streams_and_one_without_its_fit_is_refused(
    add_plugin,
):
    add_plugin(_StreamPlugin(), "stream-toys")
    whole = score(load_dataset(SAMPLE), ["stream-pooled"])["stream-pooled"]
    for executor in (None, Executor("processes", jobs=2)):
        streamed = score_file(SAMPLE, ["stream-pooled"], chunk_size=3, executor=executor)[
            "stream-pooled"
        ]
        assert streamed.corpus == whole.corpus != float(np.mean(whole.item_values))
        assert streamed.item_values.tolist() == whole.item_values.tolist()
    with pytest.raises(
        MetricError, match="stream-fits-whole has corpus statistics .fit. without fit_state"
    ):
        score_file(SAMPLE, ["stream-fits-whole"], chunk_size=3)
