"""chrF takes part in capmetrics' statistics protocol: scored in parts, the parts merged give the
whole corpus's values and corpus chrF to the bit, so a file streams in chunks, chunks fan out to
worker processes, and DDP ranks combine summed statistics."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pytest
from capmetrics.components.protocols import (
    ScoresInParts,
    check_portable,
    fits_in_parts,
    supports_parts,
)
from capmetrics.testing import default_dataset
from capmetrics_chrf import ChrF

SETTINGS = [{}, {"word_order": 2}, {"char_order": 3, "beta": 3.0}]
SPLITS = [(0, 1), (1, 1), (1, 17), (17, 60), (60, None)]  # unequal parts, one of them empty


@pytest.fixture(scope="module")
def pairs() -> tuple[list[str], list[list[str]]]:
    """Every candidate of 20 Flickr8k-Expert items with its item's references."""
    cands, refs, _ = default_dataset(20).flat_pairs()
    return cands, [list(r) for r in refs]


def test_chrf_declares_the_protocol_by_its_methods() -> None:
    chrf = ChrF()
    assert isinstance(chrf, ScoresInParts) and supports_parts(chrf)
    assert not fits_in_parts(chrf)  # no corpus statistics to fit


@pytest.mark.parametrize("settings", SETTINGS)
def test_merged_parts_equal_the_whole_corpus(settings: dict, pairs) -> None:
    cands, refs = pairs
    chrf = ChrF(**settings)
    whole = chrf.score(cands, refs)
    parts = [
        pickle.loads(pickle.dumps(check_portable(chrf.score_part(cands[a:b], refs[a:b]))))
        for a, b in SPLITS
    ]
    merged = chrf.merge_scores(parts)
    assert np.array_equal(merged.values, whole.values)
    assert merged.corpus == whole.corpus != float(np.mean(whole.values))  # from summed statistics
    for key in ("statistics", "best_reference"):
        assert np.array_equal(merged.details[key], whole.details[key])
    # DDP ranks exchange only the sums: any rank's part with the total gives the corpus chrF
    total = np.sum([sums for _, sums in parts], axis=0)
    assert total.dtype == np.int64 and total.shape == (chrf.char_order + chrf.word_order, 3)
    assert chrf.merge_scores([(parts[2][0], total)]).corpus == whole.corpus


def test_merged_corpus_equals_sacrebleu(pairs) -> None:
    sacrebleu_chrf = pytest.importorskip(
        "sacrebleu.metrics.chrf", reason="needs the test extra (sacrebleu)"
    )
    cands, refs = pairs
    width = max(map(len, refs))
    streams = [[r[j] if j < len(r) else None for r in refs] for j in range(width)]
    expected = sacrebleu_chrf.CHRF().corpus_score(cands, streams).score
    chrf = ChrF()
    merged = chrf.merge_scores([chrf.score_part(cands[a:b], refs[a:b]) for a, b in SPLITS])
    assert merged.corpus == pytest.approx(expected, abs=1e-9)


def test_a_file_streams_in_chunks_on_two_worker_processes(tmp_path: Path) -> None:
    """``capmetrics score --chunk-size 7 --jobs 2`` in Python: the chunks are scored on two
    worker processes and joined; the bytes are those of scoring the file whole."""
    import capmetrics
    from capmetrics.engine.parallel import Executor
    from capmetrics.engine.streaming import score_file
    from capmetrics.registry import get_registry, register_plugin

    if "chrf" not in get_registry().names("distance"):  # a source checkout: no entry point
        import capmetrics_chrf

        register_plugin(capmetrics_chrf, "chrf")
    path = tmp_path / "items.jsonl"
    with path.open("w", encoding="utf-8") as f:
        for item in default_dataset(20):
            f.write(
                json.dumps(
                    {
                        "id": item.id,
                        "references": list(item.references),
                        "candidates": list(item.candidates),
                    }
                )
                + "\n"
            )
    specs = ["chrf", "chrf(word_order=2)"]
    whole = capmetrics.score(capmetrics.load_dataset(path), specs)
    streamed = score_file(
        path, specs, chunk_size=7, executor=Executor("processes", jobs=2, chunk_size=1)
    )
    for spec in specs:
        assert streamed[spec].corpus == whole[spec].corpus
        assert [list(v) for v in streamed[spec].candidate_values] == [
            list(v) for v in whole[spec].candidate_values
        ]
    assert streamed.to_json() == whole.to_json()
