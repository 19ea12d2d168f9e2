"""A torch-only BERT encoder, op for op transformers 5's ``BertModel`` on its default path.

It runs the same torch calls on tensors of the same shapes, in the same order, as
``transformers.models.bert.modeling_bert`` with the ``sdpa`` attention that transformers 5 picks
by default (no mask when no position is padded; else a boolean ``(batch, 1, query, key)`` mask, as
``masking_utils.sdpa_mask`` builds it), so its hidden states equal that model's bit for bit (the
tests compare them with ``torch.equal``). Only what BERTScore reads is built: the embeddings and
the encoder layers (no pooler, no heads, inference only). The weights come from a
``model.safetensors`` through safetensors' own reader (no pickle, no code); see ``_light`` for
which folders qualify.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812


def _param(tensor: torch.Tensor) -> nn.Parameter:
    return nn.Parameter(tensor, requires_grad=False)


class _Layer(nn.Module):
    """One ``BertLayer`` (self-attention, its output, intermediate and output blocks)."""

    def __init__(self, w: dict[str, torch.Tensor], heads: int, eps: float) -> None:
        super().__init__()
        for name, tensor in w.items():
            self.register_parameter(name, _param(tensor))
        self.heads = heads
        self.eps = eps
        self.head_size = int(w["q_weight"].shape[0] / heads)
        self.scaling = self.head_size**-0.5

    def forward(self, hidden: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        shape = hidden.shape[:-1]
        split = (*shape, -1, self.head_size)
        query = F.linear(hidden, self.q_weight, self.q_bias).view(*split).transpose(1, 2)
        key = F.linear(hidden, self.k_weight, self.k_bias).view(*split).transpose(1, 2)
        value = F.linear(hidden, self.v_weight, self.v_bias).view(*split).transpose(1, 2)
        attn = F.scaled_dot_product_attention(
            query, key, value, attn_mask=mask, dropout_p=0.0, scale=self.scaling, is_causal=False
        )
        attn = attn.reshape(attn.shape[0], -1, shape[1], value.shape[-1])
        attn = attn.transpose(1, 2).contiguous()
        attn = attn.reshape(*shape, -1).contiguous()
        out = F.linear(attn, self.ao_weight, self.ao_bias)
        attended = F.layer_norm(
            out + hidden, (out.shape[-1],), self.aln_weight, self.aln_bias, self.eps
        )
        inner = F.gelu(F.linear(attended, self.i_weight, self.i_bias))
        out = F.linear(inner, self.o_weight, self.o_bias)
        return F.layer_norm(
            out + attended, (out.shape[-1],), self.oln_weight, self.oln_bias, self.eps
        )


class _Layers(nn.Module):
    """Holds ``layer`` (a ModuleList), where ``_encoder._layer_list`` finds it to cut it."""

    def __init__(self, layers: list[_Layer]) -> None:
        super().__init__()
        self.layer = nn.ModuleList(layers)


class LightBert(nn.Module):
    """``BertModel`` without pooler: ``model(input_ids, attention_mask=...)[0]`` is the last
    hidden state of its layers (all of them, or as many as are left in ``encoder.layer``)."""

    def __init__(
        self, embeddings: dict[str, torch.Tensor], layers: list[_Layer], eps: float
    ) -> None:
        super().__init__()
        for name, tensor in embeddings.items():
            self.register_parameter(name, _param(tensor))
        self.eps = eps
        positions = self.position_weight.shape[0]
        self.register_buffer(
            "position_ids", torch.arange(positions).expand((1, -1)), persistent=False
        )
        self.register_buffer(
            "token_type_ids",
            torch.zeros(self.position_ids.size(), dtype=torch.long),
            persistent=False,
        )
        self.encoder = _Layers(layers)

    def embed(self, input_ids: torch.Tensor) -> torch.Tensor:
        """``BertEmbeddings.forward`` (absolute positions, token type 0, no dropout)."""
        batch, length = input_ids.size()
        position_ids = self.position_ids[:, :length]
        types = self.token_type_ids.expand(position_ids.shape[0], -1)
        types = torch.gather(types, dim=1, index=position_ids).expand(batch, length)
        out = F.embedding(input_ids, self.word_weight) + F.embedding(types, self.type_weight)
        out = out + F.embedding(position_ids, self.position_weight)
        return F.layer_norm(out, (out.shape[-1],), self.ln_weight, self.ln_bias, self.eps)

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor]:
        hidden = self.embed(input_ids)
        mask = sdpa_mask(attention_mask, hidden.device)
        for layer in self.encoder.layer:
            hidden = layer(hidden, mask)
        return (hidden,)


def sdpa_mask(attention_mask: torch.Tensor | None, device: torch.device) -> torch.Tensor | None:
    """The attention mask transformers' ``sdpa`` path gives a 2-D padding mask: None when nothing
    is padded; else a boolean (batch, 1, length, length) tensor, laid out contiguously as
    transformers builds it, True where a key may be attended (every query row alike)."""
    if attention_mask is None:
        return None
    keys = attention_mask.to(device=device, dtype=torch.bool)
    if keys.all():
        return None
    batch, length = keys.shape
    return keys[:, None, None, :].expand(batch, 1, length, length).contiguous()


#: The names of one layer's tensors in a BERT checkpoint, by the name ``_Layer`` gives them.
LAYER_TENSORS = {
    "q_weight": "attention.self.query.weight",
    "q_bias": "attention.self.query.bias",
    "k_weight": "attention.self.key.weight",
    "k_bias": "attention.self.key.bias",
    "v_weight": "attention.self.value.weight",
    "v_bias": "attention.self.value.bias",
    "ao_weight": "attention.output.dense.weight",
    "ao_bias": "attention.output.dense.bias",
    "aln_weight": "attention.output.LayerNorm.weight",
    "aln_bias": "attention.output.LayerNorm.bias",
    "i_weight": "intermediate.dense.weight",
    "i_bias": "intermediate.dense.bias",
    "o_weight": "output.dense.weight",
    "o_bias": "output.dense.bias",
    "oln_weight": "output.LayerNorm.weight",
    "oln_bias": "output.LayerNorm.bias",
}
#: The embeddings' tensors, by the name ``LightBert`` gives them.
EMBEDDING_TENSORS = {
    "word_weight": "embeddings.word_embeddings.weight",
    "position_weight": "embeddings.position_embeddings.weight",
    "type_weight": "embeddings.token_type_embeddings.weight",
    "ln_weight": "embeddings.LayerNorm.weight",
    "ln_bias": "embeddings.LayerNorm.bias",
}


def expected_shapes(config: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """Every checkpoint tensor the model needs and its shape, from a BERT ``config.json``."""
    hidden, inner = int(config["hidden_size"]), int(config["intermediate_size"])
    shapes: dict[str, tuple[int, ...]] = {
        EMBEDDING_TENSORS["word_weight"]: (int(config["vocab_size"]), hidden),
        EMBEDDING_TENSORS["position_weight"]: (int(config["max_position_embeddings"]), hidden),
        EMBEDDING_TENSORS["type_weight"]: (int(config.get("type_vocab_size", 2)), hidden),
        EMBEDDING_TENSORS["ln_weight"]: (hidden,),
        EMBEDDING_TENSORS["ln_bias"]: (hidden,),
    }
    own = {
        "q": (hidden, hidden),
        "k": (hidden, hidden),
        "v": (hidden, hidden),
        "ao": (hidden, hidden),
        "aln": None,
        "i": (inner, hidden),
        "o": (hidden, inner),
        "oln": None,
    }
    for k in range(int(config["num_hidden_layers"])):
        for name, tensor in LAYER_TENSORS.items():
            part, kind = name.rsplit("_", 1)
            matrix = own[part]
            if matrix is None:
                shape: tuple[int, ...] = (hidden,)
            else:
                shape = matrix if kind == "weight" else (matrix[0],)
            shapes[f"encoder.layer.{k}.{tensor}"] = shape
    return shapes


def build(config: dict[str, Any], tensor: Any, layers: int) -> LightBert:
    """The model of ``config`` with its first ``layers`` layers, its tensors read by
    ``tensor(name)`` (a checkpoint name of :func:`expected_shapes`)."""
    eps = float(config.get("layer_norm_eps", 1e-12))
    heads = int(config["num_attention_heads"])
    built = [
        _Layer({n: tensor(f"encoder.layer.{k}.{t}") for n, t in LAYER_TENSORS.items()}, heads, eps)
        for k in range(layers)
    ]
    return LightBert({n: tensor(t) for n, t in EMBEDDING_TENSORS.items()}, built, eps)
