"""Results.to_pandas (long and wide) and the readable repr / notebook HTML of results."""

from __future__ import annotations

import re
import sys
import warnings

import capmetrics
import numpy as np
import pytest
from capmetrics.data import from_gts_res, load_dataset

from tests.conftest import SAMPLE

pd = pytest.importorskip("pandas")


@pytest.fixture(scope="module")
def results():  # type: ignore[no-untyped-def]
    return capmetrics.score(
        load_dataset(SAMPLE), ["bleu-4", "rouge-l", "over-candidates(distance=rouge-l, reduce=max)"]
    )


def test_long_form_holds_every_value(results) -> None:  # type: ignore[no-untyped-def]
    long = results.to_pandas()
    assert list(long.columns) == ["metric", "level", "item", "candidate", "value", "p_value"]
    bleu = results["bleu-4"]
    rows = long[long.metric == "bleu-4"]
    assert rows[rows.level == "corpus"].value.item() == bleu.corpus
    np.testing.assert_array_equal(rows[rows.level == "item"].value, bleu.item_values)
    np.testing.assert_array_equal(
        rows[rows.level == "candidate"].value, np.concatenate(bleu.candidate_values)
    )
    assert (
        rows[rows.level == "candidate"].groupby("item", sort=False).candidate.max() + 1
    ).tolist() == [len(v) for v in bleu.candidate_values]
    stat = long[long.metric.str.startswith("over-candidates")]
    assert set(stat.level) == {"corpus", "item"}  # a statistic has one value per item
    assert len(long) == 2 * (1 + 20 + 112) + 1 + 20


def test_wide_forms(results) -> None:  # type: ignore[no-untyped-def]
    wide = results.to_pandas("wide")
    assert wide.index.name == "item" and list(wide.index) == results["bleu-4"].item_ids
    for m in results.metrics:
        np.testing.assert_array_equal(wide[m.name].to_numpy(), m.item_values)
    per_candidate = results.to_pandas("wide", level="candidate")
    assert list(per_candidate.columns) == ["bleu-4", "rouge-l"] and len(per_candidate) == 112
    first = results["rouge-l"].item_ids[0]
    np.testing.assert_array_equal(
        per_candidate.loc[first, "rouge-l"].to_numpy(), results["rouge-l"].candidate_values[0]
    )
    with pytest.raises(ValueError, match="unknown form 'tall'"):
        results.to_pandas("tall")
    with pytest.raises(ValueError, match="unknown level 'image'"):
        results.to_pandas("wide", level="image")


def test_without_pandas_the_error_says_how_to_install(results, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match="pip install pandas"):
        results.to_pandas()


def test_repr_and_html_show_corpus_values_and_signatures(results) -> None:  # type: ignore[no-untyped-def]
    text = repr(results)
    assert text.startswith(f"<Results {SAMPLE}: 20 items, 112 candidates")
    assert re.search(rf"\n  bleu-4 +{results['bleu-4'].corpus:.4f}\n", text)
    assert repr(results["rouge-l"]).startswith(
        f"<MetricResult rouge-l: corpus {results['rouge-l'].corpus:.4f} over 20 items"
    )
    page = results._repr_html_()
    assert page.count("<tr>") == 4 and results["bleu-4"].signature_string in page
    assert "<b>rouge-l</b>" in results["rouge-l"]._repr_html_()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        odd = capmetrics.score(from_gts_res({"<x>": ["a dog"]}, {"<x>": [""]}), ["bleu-1"])
    assert "&lt;x&gt;" in odd["bleu-1"]._repr_html_() and "1 empty candidate(s) scored" in repr(odd)
