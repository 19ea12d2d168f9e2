"""ELMo (Peters et al. 2018) from the standard ``options.json`` + ``weights.hdf5`` files, in numpy.

The weight layout is the one of the released TensorFlow models (read by AllenNLP):
``char_embed``, ``CNN/W_cnn_i`` + ``b_cnn_i``, ``CNN_high_k/{W,b}_{transform,carry}``,
``CNN_proj/{W,b}_proj`` and ``RNN_d/RNN/MultiRNNCell/Cell{l}/LSTMCell/{W_0,B,W_P_0}``.
Layer 0 is the character-CNN token representation (duplicated to the biLM width), layers 1
and 2 the biLSTM outputs (forward and backward concatenated). Every sentence starts from a
zero LSTM state, so results do not depend on batching (AllenNLP's stateful LSTM does).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
from capmetrics import Embedder, MetricError
from capmetrics.io.digests import files_digest
from capmetrics.plugins.embeddings.vectors import corrupt, require

BOS_CHAR, EOS_CHAR, BOW_CHAR, EOW_CHAR, PAD_CHAR = 256, 257, 258, 259, 260


def char_ids(token: str, width: int) -> np.ndarray:
    """ELMo's character ids of one token (1-based; 0 pads), ``<S>``/``</S>`` included."""
    if token in ("<S>", "</S>"):
        body = [BOS_CHAR if token == "<S>" else EOS_CHAR]
    else:
        body = list(token.encode("utf-8", "ignore")[: width - 2])
    ids = np.full(width, PAD_CHAR, dtype=np.int64)
    ids[0], ids[len(body) + 1] = BOW_CHAR, EOW_CHAR
    ids[1 : len(body) + 1] = body
    return ids + 1


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))


class ElmoModel:
    """The character CNN and the two-layer biLSTM of an ELMo model, in float32 numpy."""

    def __init__(self, options: dict[str, Any], weights: Any) -> None:
        cnn, lstm = options["char_cnn"], options["lstm"]
        self.width = cnn.get("max_characters_per_token", 50)
        self.activation = (
            np.tanh if cnn.get("activation", "relu") == "tanh" else (lambda x: np.maximum(x, 0))
        )
        embed = np.asarray(weights["char_embed"], np.float32)
        self.char_embed = np.vstack([np.zeros((1, embed.shape[1]), np.float32), embed])
        self.filters = [
            (
                np.asarray(weights["CNN"][f"W_cnn_{i}"], np.float32)[0],
                np.asarray(weights["CNN"][f"b_cnn_{i}"], np.float32),
            )
            for i in range(len(cnn["filters"]))
        ]
        self.highway = [
            {
                k: np.asarray(weights[f"CNN_high_{h}"][k], np.float32)
                for k in ("W_transform", "b_transform", "W_carry", "b_carry")
            }
            for h in range(cnn["n_highway"])
        ]
        self.proj = (
            np.asarray(weights["CNN_proj"]["W_proj"], np.float32),
            np.asarray(weights["CNN_proj"]["b_proj"], np.float32),
        )
        self.cell_clip, self.proj_clip = lstm.get("cell_clip"), lstm.get("proj_clip")
        self.skip = lstm.get("use_skip_connections", True)
        self.cells = [
            [self._cell(weights, d, layer) for d in (0, 1)] for layer in range(lstm["n_layers"])
        ]

    @staticmethod
    def _cell(weights: Any, direction: int, layer: int) -> tuple[np.ndarray, ...]:
        group = weights[f"RNN_{direction}"]["RNN"]["MultiRNNCell"][f"Cell{layer}"]["LSTMCell"]
        return tuple(np.asarray(group[k], np.float32) for k in ("W_0", "B", "W_P_0"))

    def tokens(self, chars: np.ndarray) -> np.ndarray:
        """Token representations (n, proj_dim) from character ids (n, width)."""
        x = self.char_embed[chars]  # n, width, char_dim
        pooled = []
        for w, b in self.filters:  # w: kernel, char_dim, n_filters
            k = w.shape[0]
            windows = np.lib.stride_tricks.sliding_window_view(
                x, k, axis=1
            )  # n, width-k+1, char_dim, k
            conv = np.einsum("ntdk,kdf->ntf", windows, w, optimize=True) + b
            pooled.append(self.activation(conv.max(axis=1)))
        h = np.concatenate(pooled, axis=-1)
        for layer in self.highway:
            carry = _sigmoid(h @ layer["W_carry"] + layer["b_carry"])
            transform = np.maximum(h @ layer["W_transform"] + layer["b_transform"], 0)
            h = carry * transform + (1 - carry) * h
        return h @ self.proj[0] + self.proj[1]

    def _run(self, x: np.ndarray, cell: tuple[np.ndarray, ...]) -> np.ndarray:
        """One LSTM direction over padded sequences x (batch, T, dim), from zero states.

        Padding sits at the end of each sequence, so it never reaches a real position.
        """
        w, b, w_proj = cell
        c_size = b.shape[0] // 4
        h = np.zeros((x.shape[0], w_proj.shape[1]), np.float32)
        c = np.zeros((x.shape[0], c_size), np.float32)
        x_part = x @ w[: x.shape[2]] + b
        w_h = w[x.shape[2] :]
        out = np.empty((x.shape[0], x.shape[1], w_proj.shape[1]), np.float32)
        for t in range(x.shape[1]):
            z = x_part[:, t] + h @ w_h
            i, j, f, o = np.split(z, 4, axis=1)
            c = _sigmoid(f + 1.0) * c + _sigmoid(i) * np.tanh(j)
            if self.cell_clip:
                c = np.clip(c, -self.cell_clip, self.cell_clip)
            h = (_sigmoid(o) * np.tanh(c)) @ w_proj
            if self.proj_clip:
                h = np.clip(h, -self.proj_clip, self.proj_clip)
            out[:, t] = h
        return out

    def layers(self, sentences: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """The three ELMo layers of each sentence, shape (3, n_tokens, 2 * proj_dim)."""
        padded = [["<S>", *s, "</S>"] for s in sentences]
        lengths = [len(s) for s in padded]
        longest = max(lengths)
        chars = np.full((len(padded), longest, self.width), 0, dtype=np.int64)
        for k, s in enumerate(padded):
            chars[k, : len(s)] = [char_ids(t, self.width) for t in s]
        token = self.tokens(chars.reshape(-1, self.width)).reshape(len(padded), longest, -1)
        reverse = np.array([[n - 1 - t if t < n else t for t in range(longest)] for n in lengths])
        rows = np.arange(len(padded))[:, None]
        outputs = [np.concatenate([token, token], axis=-1)]
        forward, backward = token, token[rows, reverse]
        for layer, (fw_cell, bw_cell) in enumerate(self.cells):
            fw, bw = self._run(forward, fw_cell), self._run(backward, bw_cell)
            if layer and self.skip:
                fw, bw = fw + forward, bw + backward
            forward, backward = fw, bw
            outputs.append(np.concatenate([fw, bw[rows, reverse]], axis=-1))
        stacked = np.stack(outputs, axis=1)  # batch, 3, T, dim
        return [stacked[k, :, 1 : n - 1] for k, n in enumerate(lengths)]


class ElmoEmbedder(Embedder):
    """Contextual word vectors from an ELMo model (the lowest layer, 0, is what WEmbSim used).

    ``embed_words(tokens)`` treats the tokens as one sentence. ``embed_texts`` averages the
    word vectors of each whitespace-split text.

    Args:
        options_file: the model's ``options.json``.
        weight_file: the model's ``weights.hdf5``.
        layer: 0 (character CNN), 1 or 2 (biLSTM layers), or ``mix``.
        mix_weights: for ``mix``: the scalar-mix weights before softmax (none = equal) ...
        mix_scale: ... and the scale gamma.
        batch_size: sentences per forward pass.
    """

    name = "elmo"
    requires = ("elmo",)
    contextual = True

    path_params = ("options_file", "weight_file")

    def __init__(
        self,
        options_file: str | None = None,
        weight_file: str | None = None,
        layer: Literal[0, 1, 2, "mix"] = 0,
        mix_weights: list[float] | None = None,
        mix_scale: float = 1.0,
        batch_size: int = 32,
    ) -> None:
        self.options_file = options_file
        self.weight_file = weight_file
        self.layer = layer
        self.mix_weights = mix_weights
        self.mix_scale = mix_scale
        self.batch_size = batch_size

    def _paths(self) -> tuple[Path, Path]:
        if self.options_file is None or self.weight_file is None:
            raise MetricError(
                "elmo needs options_file and weight_file (no ELMo weights ship with capmetrics)"
            )
        paths = Path(self.options_file).expanduser(), Path(self.weight_file).expanduser()
        for p in paths:
            if not p.is_file():
                raise corrupt(p, "file not found")
        return paths

    def model(self) -> ElmoModel:
        """The loaded model (loaded on first call)."""
        if getattr(self, "_model", None) is None:
            options_path, weight_path = self._paths()
            h5py = require("h5py", "elmo")
            try:
                options = json.loads(options_path.read_text())
                with h5py.File(weight_path, "r") as weights:  # type: ignore[attr-defined]
                    self._model = ElmoModel(options, weights)
            except (
                KeyError,
                ValueError,
                OSError,
                RecursionError,
            ) as err:  # RecursionError: hostile JSON nesting
                raise corrupt(
                    weight_path if isinstance(err, (KeyError, OSError)) else options_path,
                    f"not a readable ELMo model: {err}",
                ) from None
        return self._model

    def signature_extra(self) -> dict[str, str]:
        if getattr(self, "_sha", None) is None:
            self._sha = f"sha256:{files_digest(self._paths())}"
        return {"elmo": self._sha, "elmo_layer": str(self.layer)}

    def _select(self, layers: np.ndarray) -> np.ndarray:
        if self.layer == "mix":
            w = (
                np.zeros(len(layers))
                if self.mix_weights is None
                else np.asarray(self.mix_weights, float)
            )
            if w.shape != (len(layers),):
                raise MetricError(f"elmo mix_weights needs {len(layers)} values, got {w.tolist()}")
            w = np.exp(w - w.max())
            return (self.mix_scale * np.tensordot(w / w.sum(), layers, axes=1)).astype(np.float32)
        return layers[int(self.layer)]

    def embed_sentences(
        self, sentences: Sequence[Sequence[str]]
    ) -> list[tuple[np.ndarray, np.ndarray]]:
        """Word vectors of each sentence (batched, longest first), as ``embed_words`` gives them."""
        model = self.model()
        empty = (np.zeros((0, 2 * model.proj[0].shape[1]), np.float32), np.zeros(0, bool))
        out: list[tuple[np.ndarray, np.ndarray]] = [empty] * len(sentences)
        order = sorted(
            (k for k in range(len(sentences)) if len(sentences[k])),
            key=lambda k: -len(sentences[k]),
        )
        for start in range(0, len(order), self.batch_size):
            batch = order[start : start + self.batch_size]
            for k, layers in zip(batch, model.layers([list(sentences[k]) for k in batch])):
                out[k] = (self._select(layers), np.ones(layers.shape[1], bool))
        return out

    def embed_words(self, tokens: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        return self.embed_sentences([tokens])[0]

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        dim = 2 * self.model().proj[0].shape[1]
        out = [
            v.mean(axis=0) if len(v) else np.zeros(dim, np.float32)
            for v, _ in self.embed_sentences([t.split() for t in texts])
        ]
        return np.array(out, dtype=np.float32).reshape(len(texts), dim)
