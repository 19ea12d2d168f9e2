"""capmetrics.integrations.hf.compute_metrics with a tokenizer built here (tokenizers' WordLevel
over the Flickr8k words, wrapped in PreTrainedTokenizerFast) and a tiny GPT-2 in a real Trainer."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("transformers")

import capmetrics  # noqa: E402
from capmetrics.errors import MetricError  # noqa: E402
from capmetrics.integrations.hf import compute_metrics  # noqa: E402

from tests.core.test_torchmetrics_ddp import flickr8k_items  # noqa: E402
from tests.plugins.coco_reference import needs_flickr8k  # noqa: E402

pytestmark = needs_flickr8k
SPECIAL = ["[PAD]", "[UNK]", "[EOS]"]


@pytest.fixture(scope="module")
def data() -> tuple[list[str], list[list[str]]]:
    cands, refs = flickr8k_items(40)
    ptb = capmetrics.compose("ptb")
    return ptb.tokenize_joined(cands), [ptb.tokenize_joined(r) for r in refs]


@pytest.fixture(scope="module")
def tokenizer(data: tuple[list[str], list[list[str]]]):  # type: ignore[no-untyped-def]
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    cands, refs = data
    words = sorted({w for t in cands + [r for rs in refs for r in rs] for w in t.split()})
    vocab = {w: i for i, w in enumerate(SPECIAL + words)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]", eos_token="[EOS]"
    )


def padded(tokenizer, texts: list[str], width: int, fill: int) -> np.ndarray:  # type: ignore[no-untyped-def]
    out = np.full((len(texts), width), fill, dtype=np.int64)
    for row, ids in enumerate(tokenizer(texts, add_special_tokens=False)["input_ids"]):
        out[row, : len(ids) + 1] = ids + [tokenizer.eos_token_id]
    return out


def test_decodes_masked_labels_and_scores(tokenizer, data) -> None:  # type: ignore[no-untyped-def]
    from transformers import EvalPrediction

    cands, refs = data
    first_refs = [r[0] for r in refs]
    preds, labels = (
        padded(tokenizer, cands, 40, tokenizer.pad_token_id),
        padded(tokenizer, first_refs, 40, -100),
    )
    values = compute_metrics(tokenizer, ["bleu-4", "cider-d"])(
        EvalPrediction(predictions=preds, label_ids=labels)
    )
    expected = capmetrics.score(
        candidates=cands, references=[[r] for r in first_refs], metrics=["bleu-4", "cider-d"]
    )
    assert values == {"bleu-4": expected["bleu-4"].corpus, "cider-d": expected["cider-d"].corpus}
    assert all(type(v) is float for v in values.values()) and values["bleu-4"] > 0.01
    # every item's reference list, and logits in place of ids (their argmax)
    logits = np.eye(len(tokenizer))[np.where(preds == -100, 0, preds)]
    values = compute_metrics(tokenizer, "cider-d", references=refs)((logits, labels))
    assert (
        values["cider-d"]
        == capmetrics.score(candidates=cands, references=refs, metrics="cider-d")["cider-d"].corpus
    )


def test_bad_input(tokenizer, data) -> None:  # type: ignore[no-untyped-def]
    cands, refs = data
    preds = padded(tokenizer, cands, 40, 0)
    with pytest.raises(MetricError, match="40 predictions but 39 labels"):
        compute_metrics(tokenizer)((preds, padded(tokenizer, [r[0] for r in refs[:39]], 40, -100)))
    with pytest.raises(MetricError, match="40 predictions but 2 references"):
        compute_metrics(tokenizer, references=refs[:2])((preds, None))
    with pytest.raises(MetricError, match="2-D array of token ids"):
        compute_metrics(tokenizer)((preds[0], preds[0]))


def test_in_a_trainer(tokenizer, data, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A tiny GPT-2 (1 layer, 16 dims) evaluated by Trainer: it calls compute_metrics with its
    logits and -100-masked labels; the metrics come back as eval_ floats."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    torch.manual_seed(0)
    cands, refs = data
    model = GPT2LMHeadModel(
        GPT2Config(vocab_size=len(tokenizer), n_positions=48, n_embd=16, n_layer=1, n_head=2)
    )
    ids = padded(tokenizer, [r[0] for r in refs], 24, tokenizer.pad_token_id)
    dataset = [
        {"input_ids": torch.tensor(row), "labels": torch.tensor(np.where(row == 0, -100, row))}
        for row in ids
    ]
    seen = {}

    def metric(eval_pred):  # type: ignore[no-untyped-def]
        seen["labels"] = eval_pred.label_ids
        return compute_metrics(tokenizer, ["bleu-1", "cider-d"])(eval_pred)

    args = TrainingArguments(
        output_dir=str(tmp_path), per_device_eval_batch_size=16, report_to=[], use_cpu=True
    )
    out = Trainer(model=model, args=args, eval_dataset=dataset, compute_metrics=metric).evaluate()
    assert (seen["labels"] == -100).any()
    assert type(out["eval_bleu-1"]) is float and type(out["eval_cider-d"]) is float
    assert 0 <= out["eval_bleu-1"] <= 1
