"""The light path of BERTScore's encoder: a BERT model folder read without transformers.

A run that must embed texts spends most of its start-up importing transformers (and, through
``AutoModel``, its generation and distributed machinery); a BERT encoder needs none of it. For a
folder that qualifies, the tokenizer is built with the ``tokenizers`` library as transformers 5's
``BertTokenizer`` builds it (the vocabulary of ``tokenizer.json``; normalizer, pre-tokenizer,
special tokens and ``[CLS] … [SEP]`` template from ``tokenizer_config.json``) and the model is
``_bert.LightBert`` on the tensors of ``model.safetensors``: the same token ids and, bit for bit,
the same hidden states as the transformers path (tests/plugins/test_bertscore_light.py), hence the
same disk-cache keys and values.

A folder qualifies (:func:`light_path` says so, or why not) when it is a local folder given as a
path (or the bundled model), with ``config.json`` of ``model_type`` ``bert`` in float32 with the
default options (absolute positions, ``gelu``, an encoder), ``model.safetensors`` holding every
tensor the layers need in float32 at the configured shapes, and ``tokenizer.json`` with a
WordPiece vocabulary plus a ``tokenizer_config.json`` of a ``BertTokenizer`` that sets
``model_max_length`` and nothing the light tokenizer does not reproduce. Anything else takes the
transformers path, as does every model while ``$CAPMETRICS_BERTSCORE_BACKEND`` is
``transformers``. Reading a folder runs no code: JSON files and a safetensors header, after
``capmetrics.io.model_folder.check_model_path`` has checked every file's kind and size.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import Any

#: Set to ``transformers`` to embed with transformers' model and tokenizer for every model.
BACKEND_ENV = "CAPMETRICS_BERTSCORE_BACKEND"
#: The named special tokens of a ``BertTokenizer`` and their defaults, in transformers' order.
SPECIAL = {
    "unk_token": "[UNK]",
    "sep_token": "[SEP]",
    "pad_token": "[PAD]",
    "cls_token": "[CLS]",
    "mask_token": "[MASK]",
}
#: ``tokenizer_config.json`` keys with no effect on the ids of a ``BertTokenizer`` (or handled).
TOKENIZER_KEYS = frozenset(
    {
        *SPECIAL,
        "do_lower_case",
        "tokenize_chinese_chars",
        "strip_accents",
        "name_or_path",
        "do_basic_tokenize",
        "never_split",
        "tokenizer_class",
        "model_max_length",
        "clean_up_tokenization_spaces",
        "special_tokens_map_file",
        "added_tokens_decoder",
        "extra_special_tokens",
        "model_input_names",
        "padding_side",
        "truncation_side",
        "pad_token_type_id",
        "backend",
    }
)
#: ``config.json`` values transformers' ``BertModel`` must have for ``LightBert`` to equal it.
CONFIG_DEFAULTS: dict[str, tuple[Any, ...]] = {
    "hidden_act": ("gelu",),
    "position_embedding_type": (None, "absolute"),
    "is_decoder": (None, False),
    "add_cross_attention": (None, False),
    "chunk_size_feed_forward": (None, 0),
    "dtype": (None, "float32"),
    "torch_dtype": (None, "float32"),
    "_attn_implementation": (None, "sdpa"),
    "attn_implementation": (None, "sdpa"),
    "quantization_config": (None,),
    "auto_map": (None,),
    "pruned_heads": (None, {}),
}
WEIGHTS = "model.safetensors"


@dataclass(frozen=True)
class LightFolder:
    """What the light path needs of a qualifying folder (see :func:`light_path`)."""

    path: str
    config: dict[str, Any]
    tokenizer_config: dict[str, Any]
    specials: dict[str, str]
    prefix: str  # the checkpoint's name prefix ("" or "bert.")
    vocab: dict[str, int]


def _json(file: Path) -> Any:
    return json.loads(file.read_bytes().decode("utf-8-sig"))


def _token(value: Any) -> str | None:
    """A special token of a tokenizer config: its text, or None where it has options the light
    tokenizer does not reproduce (stripping, single word, normalized)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        if not any(value.get(f) for f in ("lstrip", "rstrip", "single_word", "normalized")):
            return str(value["content"])
    return None


def light_path(model: str | None, path: str) -> tuple[LightFolder | None, str]:
    """The light path's view of the model folder ``path`` (``model`` as the user named it; None
    for the bundled model), or None; and why, in a few words."""
    if os.environ.get(BACKEND_ENV, "").strip().lower() == "transformers":
        return None, f"${BACKEND_ENV}=transformers"
    if model is not None and (not os.path.isdir(path) or "@" in model):
        return None, "not a local model folder (a hub name or a revision)"
    for module in ("tokenizers", "safetensors"):
        if find_spec(module) is None:
            return None, f"{module} is not installed"
    folder = Path(path)
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json", WEIGHTS):
        if not (folder / name).is_file():
            return None, f"no {name}"
    if (folder / "added_tokens.json").exists():
        return None, "an added_tokens.json"
    try:
        config = _json(folder / "config.json")
        tok_config = _json(folder / "tokenizer_config.json")
        specials_file = folder / "special_tokens_map.json"
        specials_map = _json(specials_file) if specials_file.is_file() else {}
    except (OSError, ValueError, RecursionError) as err:
        return None, f"unreadable config ({type(err).__name__})"
    if not all(isinstance(x, dict) for x in (config, tok_config, specials_map)):
        return None, "a config that is not a JSON object"
    why = _config_problem(config) or _tokenizer_problem(tok_config, specials_map)
    if why:
        return None, why
    specials = _specials(tok_config, specials_map)
    if specials is None:
        return None, "a special token with options"
    try:
        spec = _json(folder / "tokenizer.json")
    except (OSError, ValueError, RecursionError) as err:
        return None, f"unreadable tokenizer.json ({type(err).__name__})"
    model_spec = spec.get("model") if isinstance(spec, dict) else None
    vocab = model_spec.get("vocab") if isinstance(model_spec, dict) else None
    if (
        not isinstance(vocab, dict)
        or model_spec.get("type") not in (None, "WordPiece")
        or not all(type(i) is int for i in vocab.values())
    ):
        return None, "tokenizer.json holds no WordPiece vocabulary"
    if any(t not in vocab for t in specials.values()):
        return None, "a special token outside the vocabulary"
    added = (
        list(tok_config["added_tokens_decoder"].items())
        if "added_tokens_decoder" in tok_config
        else [(t.get("id") if isinstance(t, dict) else None, t) for t in spec.get("added_tokens")]
        if isinstance(spec.get("added_tokens", []), list)
        else [(None, None)]
    )
    for index, token in added:
        if not _plain_special(index, token, vocab, set(specials.values())):
            return None, "an added token other than the named special tokens"
    prefix = _checkpoint_prefix(folder / WEIGHTS, config)
    if prefix is None:
        return None, f"{WEIGHTS} unreadable or without float32 tensors of the configured shapes"
    folder_view = LightFolder(path, config, tok_config, specials, prefix, vocab)
    return folder_view, "a float32 BERT encoder with a WordPiece tokenizer"


def _specials(tok_config: dict[str, Any], specials_map: dict[str, Any]) -> dict[str, str] | None:
    """The named special tokens as transformers reads them: ``special_tokens_map.json`` first
    unless ``tokenizer_config.json`` has an ``added_tokens_decoder`` (then it is not read)."""
    first = {} if "added_tokens_decoder" in tok_config else specials_map
    out = {}
    for key, default in SPECIAL.items():
        token = _token(first.get(key, tok_config.get(key, default)))
        if token is None:
            return None
        out[key] = token
    return out


def _plain_special(index: Any, token: Any, vocab: dict[str, int], specials: set[str]) -> bool:
    """Whether an added token is one of the named special tokens, at its vocabulary id, with
    the options transformers gives a special token it adds itself."""
    if not isinstance(token, dict) or token.get("content") not in specials:
        return False
    flags = ("lstrip", "rstrip", "single_word", "normalized")
    try:
        same_id = int(index) == vocab[token["content"]]
    except (TypeError, ValueError):
        return False
    return same_id and token.get("special") is True and not any(token.get(f) for f in flags)


def _config_problem(config: dict[str, Any]) -> str | None:
    if config.get("model_type") != "bert":
        return f"model_type {config.get('model_type')!r} (the light path reads bert only)"
    for key, allowed in CONFIG_DEFAULTS.items():
        if config.get(key) not in allowed:
            return f"config {key}={config.get(key)!r}"
    needed = ("hidden_size", "num_attention_heads", "num_hidden_layers", "intermediate_size")
    needed += ("vocab_size", "max_position_embeddings")
    if not all(type(config.get(k)) is int and config[k] > 0 for k in needed):
        return "config without positive sizes"
    if config["hidden_size"] % config["num_attention_heads"]:
        return "hidden_size not a multiple of num_attention_heads"
    eps = config.get("layer_norm_eps", 1e-12)
    if type(config.get("type_vocab_size", 2)) is not int or not isinstance(eps, (int, float)):
        return "config type_vocab_size or layer_norm_eps"
    return None


def _tokenizer_problem(tok_config: dict[str, Any], specials_map: dict[str, Any]) -> str | None:
    if tok_config.get("tokenizer_class") not in ("BertTokenizer", "BertTokenizerFast"):
        return f"tokenizer_class {tok_config.get('tokenizer_class')!r}"
    unknown = sorted(set(tok_config) - TOKENIZER_KEYS)
    if unknown:
        return f"tokenizer_config key {unknown[0]!r}"
    if set(specials_map) - set(SPECIAL):
        return "special_tokens_map with extra tokens"
    maximum = tok_config.get("model_max_length")
    if type(maximum) is not int or not 0 < maximum <= 1 << 20:
        return "tokenizer_config without model_max_length"
    if tok_config.get("truncation_side", "right") != "right":
        return "truncation_side left"
    if tok_config.get("extra_special_tokens") not in (None, {}, []):
        return "extra special tokens"
    for key in ("do_lower_case", "tokenize_chinese_chars"):
        if type(tok_config.get(key, True)) is not bool:
            return f"tokenizer_config {key}"
    if tok_config.get("strip_accents") not in (None, True, False):
        return "tokenizer_config strip_accents"
    return None


def _checkpoint_prefix(file: Path, config: dict[str, Any]) -> str | None:
    """ "" or "bert." where every tensor the model needs is in ``file`` in float32 at its
    shape (names as saved by ``BertModel`` or by a model with a ``bert`` base), else None."""
    from capmetrics.plugins.bertscore._bert import expected_shapes
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(file), framework="pt") as f:  # the header only
            names = set(f.keys())
            shapes = expected_shapes(config)
            for prefix in ("", "bert."):
                if all(prefix + n in names for n in shapes):
                    ok = all(
                        f.get_slice(prefix + n).get_dtype() == "F32"
                        and tuple(f.get_slice(prefix + n).get_shape()) == shape
                        for n, shape in shapes.items()
                    )
                    return prefix if ok else None
    except (OSError, SafetensorError, ValueError, TypeError):
        return None
    return None


class LightTokenizer:
    """A ``tokenizers.Tokenizer`` built as transformers 5's ``BertTokenizer`` builds its
    backend, with the few attributes ``TokenEncoder`` reads of a tokenizer."""

    is_fast = True
    split_special_tokens = False
    vocab_files_names = {"vocab_file": "vocab.txt", "tokenizer_file": "tokenizer.json"}

    def __init__(self, folder: LightFolder) -> None:
        from tokenizers import (
            AddedToken,
            Tokenizer,
            decoders,
            normalizers,
            pre_tokenizers,
            processors,
        )
        from tokenizers.models import WordPiece

        conf, specials = folder.tokenizer_config, folder.specials
        backend = Tokenizer(WordPiece(folder.vocab, unk_token=specials["unk_token"]))
        backend.normalizer = normalizers.BertNormalizer(
            clean_text=True,
            handle_chinese_chars=conf.get("tokenize_chinese_chars", True),
            strip_accents=conf.get("strip_accents"),
            lowercase=conf.get("do_lower_case", True),
        )
        backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        backend.decoder = decoders.WordPiece(prefix="##")
        named = sorted(set(specials.values()), key=folder.vocab.__getitem__)
        backend.add_special_tokens([AddedToken(t, special=True) for t in named])
        cls, sep = specials["cls_token"], specials["sep_token"]
        self.cls_token_id = backend.token_to_id(cls)
        self.sep_token_id = backend.token_to_id(sep)
        self.pad_token_id = backend.token_to_id(specials["pad_token"])
        backend.post_processor = processors.TemplateProcessing(
            single=f"{cls}:0 $A:0 {sep}:0",
            pair=f"{cls}:0 $A:0 {sep}:0 $B:1 {sep}:1",
            special_tokens=[(cls, self.cls_token_id), (sep, self.sep_token_id)],
        )
        self.backend_tokenizer = backend
        self.model_max_length = int(conf["model_max_length"])
        self._truncating: Any = None

    def encode(
        self,
        text: str,
        add_special_tokens: bool = True,
        max_length: int | None = None,
        truncation: bool = False,
    ) -> list[int]:
        """The ids of ``text`` (truncated to ``max_length`` tokens as transformers truncates a
        single text: its end cut, the special tokens kept)."""
        backend = self.backend_tokenizer
        if truncation and max_length is not None:
            if self._truncating is None or self._truncating[0] != max_length:
                from tokenizers import Tokenizer

                cut = Tokenizer.from_str(backend.to_str())
                cut.enable_truncation(max_length, stride=0, strategy="longest_first")
                self._truncating = (max_length, cut)
            backend = self._truncating[1]
        return list(backend.encode(text, add_special_tokens=add_special_tokens).ids)


def load_model(folder: LightFolder, layers: int, device: str) -> Any:
    """``_bert.LightBert`` with the first ``layers`` layers of the folder's checkpoint."""
    from capmetrics.plugins.bertscore._bert import build
    from safetensors import safe_open

    with safe_open(str(Path(folder.path) / WEIGHTS), framework="pt", device="cpu") as f:
        model = build(folder.config, lambda name: f.get_tensor(folder.prefix + name), layers)
    return model.eval().to(device)
