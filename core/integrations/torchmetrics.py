"""torchmetrics ``Metric`` classes for capmetrics' metrics, sharded under DDP.

>>> from capmetrics.integrations.torchmetrics import CaptionMetric, CocoCaptionMetrics
>>> cider = CaptionMetric("cider-d")                      # any capmetrics spec
>>> cider.update(["a dog runs"], [["a dog is running", "a brown dog"]], ids=[17])
>>> cider(["a cat"], ["a cat sits"], ids=[18])            # forward: this batch's value
>>> cider.compute()                                       # tensor(…, dtype=torch.float64)
>>> coco = CocoCaptionMetrics(vocab=ix_to_word)           # BLEU-1..4, METEOR, ROUGE-L, CIDEr-D
>>> coco.update(model_ids, reference_ids, ids=batch["index"]); coco.compute()   # {name: tensor}

Each rank keeps the text of **its own** items (no torchmetrics list states: nothing is gathered as
strings) and, at :meth:`CaptionMetric.compute`, the ranks exchange only what the components'
statistics protocol (:mod:`capmetrics.components.protocols`) says crosses a rank boundary, with
``torch.distributed`` collectives:

- the item ids (8 bytes each), so that an item seen by several ranks (DistributedSampler pads the
  last batch with repeated samples) or twice by one rank is scored once, by the lowest rank that
  has it;
- corpus statistics (CIDEr-D's document frequencies, BERTScore's idf): each rank's part
  (``count_state``, else ``fit_state``), summed by the component (``fit_counts``/``fit_states``);
- the corpus value's statistics: a :class:`~capmetrics.components.protocols.ShardStatistics`
  component's summed ``score_shard`` sums (METEOR), a
  :class:`~capmetrics.components.protocols.ScoresInParts` component's summed ``score_part``
  statistics (BLEU) or, where those are None (the corpus value is the mean of the item values:
  ROUGE-L, CIDEr-D, BERTScore), the per-item values with their ids, whose mean is taken in
  item-id order, as one process takes it.

A component that :class:`~capmetrics.components.protocols.Declines` a protocol (BERTScore with
``floor=bert-score``) is refused with its reason.

The integration computes nothing itself: every number is the component's. Values equal those of
one process over the deduplicated set: bit-identical when ``ids`` are given (item order = id
order), the corpus mean within 1 ulp-scale rounding otherwise (rank order). What is gathered is
pickled and zlib-compressed (peers of one job; nothing is unpickled from elsewhere);
``gathered_bytes`` reports what the last compute received. A rank that saw no items takes part
with nothing. :meth:`~CaptionMetric.compute` is collective: call it on every rank.
"""

from __future__ import annotations

import hashlib
import pickle
import zlib
from collections.abc import Mapping, Sequence
from typing import Any, cast

import numpy as np

try:
    import torch
    import torch.distributed as dist
    from torchmetrics import Metric
except ImportError as err:  # pragma: no cover - the extra is not installed
    raise ImportError(
        f"capmetrics.integrations.torchmetrics needs torch and torchmetrics ({err}): "
        "pip install 'capmetrics[torchmetrics]'"
    ) from err

from capmetrics.components.base import Component, Scores
from capmetrics.components.protocols import (
    CountsInParts,
    FitsInParts,
    ScoresInParts,
    ShardStatistics,
    check_portable,
    supports,
    why_unsupported,
)
from capmetrics.errors import MetricError
from capmetrics.integrations.rewards import check_end_word, decode, vocab_array

__all__ = [
    "COCO_METRICS",
    "BERTScoreMetric",
    "CaptionMetric",
    "CocoCaptionMetrics",
]

COCO_METRICS = ("bleu-1", "bleu-2", "bleu-3", "bleu-4", "meteor", "rouge-l", "cider-d")


def __getattr__(name: str) -> Any:
    """``gram_keys``, deprecated: served with a DeprecationWarning to scripts that import it."""
    if name == "gram_keys":
        import warnings

        warnings.warn(
            "capmetrics.integrations.torchmetrics.gram_keys is deprecated and will be removed; "
            "nothing in capmetrics uses it (the DDP classes no longer key n-grams themselves)",
            DeprecationWarning,
            stacklevel=2,
        )
        return _gram_keys
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _gram_keys(grams: Sequence[str]) -> np.ndarray:
    """A 64-bit key (int64) of each string: its 8-byte BLAKE2b digest, the same in every process.
    Deprecated (``gram_keys``): kept for scripts that imported it."""
    blake = hashlib.blake2b
    return np.fromiter(
        (
            int.from_bytes(
                blake(g.encode("utf-8", "surrogatepass"), digest_size=8).digest(),
                "little",
                signed=True,
            )
            for g in grams
        ),
        np.int64,
        len(grams),
    )


class _Collectives:
    """all_gather of numpy arrays and small objects in a process group, counting received bytes
    (``local``: this process alone, as for a batch's own value)."""

    def __init__(self, group: Any = None, local: bool = False) -> None:
        self.group = group
        self.active = not local and dist.is_available() and dist.is_initialized()
        self.world = dist.get_world_size(group) if self.active else 1
        self.rank = dist.get_rank(group) if self.active else 0
        nccl = self.active and dist.get_backend(group) == "nccl"
        self.device = (
            torch.device("cuda", torch.cuda.current_device()) if nccl else torch.device("cpu")
        )
        self.received = 0

    def arrays(self, array: np.ndarray) -> list[np.ndarray]:
        """Every rank's 1-D array (int64, float64 or uint8), in rank order."""
        if not self.active:
            return [array]
        sizes = self._tensors(torch.tensor([len(array)], dtype=torch.int64, device=self.device))
        lengths = [int(s.item()) for s in sizes]
        padded = np.zeros(max(lengths), dtype=array.dtype)
        padded[: len(array)] = array
        gathered = self._tensors(torch.from_numpy(padded).to(self.device))
        return [g.cpu().numpy()[:n] for g, n in zip(gathered, lengths)]

    def objects(self, obj: Any, what: str = "a part") -> list[Any]:
        """Every rank's object (plain data,
        :func:`~capmetrics.components.protocols.check_portable`), in rank order: pickled and
        compressed here, gathered as bytes."""
        if not self.active:
            return [obj]
        data = zlib.compress(
            pickle.dumps(check_portable(obj, what), protocol=pickle.HIGHEST_PROTOCOL), 1
        )
        return [
            pickle.loads(zlib.decompress(a.tobytes()))
            for a in self.arrays(np.frombuffer(data, np.uint8))
        ]

    def _tensors(self, tensor: torch.Tensor) -> list[torch.Tensor]:
        out = [torch.empty_like(tensor) for _ in range(self.world)]
        dist.all_gather(out, tensor, group=self.group)
        self.received += tensor.element_size() * tensor.numel() * self.world
        return out


def _why_not_combined(component: Component) -> str | None:
    """None when the ranks' parts of ``component`` join into its value over every rank's items
    (:class:`~capmetrics.components.protocols.ShardStatistics` or
    :class:`~capmetrics.components.protocols.ScoresInParts`), else why not."""
    if supports(component, ShardStatistics):
        return None
    return why_unsupported(component, ScoresInParts)


class CaptionMetric(Metric):
    """One or more capmetrics metrics (specs) as a torchmetrics ``Metric``.

    Args:
        metrics: a spec (``"cider-d"``, ``"bleu-4"``, ``"meteor"``…) or a list of them; each must
            combine across ranks (a :mod:`capmetrics.components.protocols` statistics protocol;
            others are refused here).
        vocab: id -> word (a list or dict) for token-id input; ``end_id``, ``keep_end``: where
            sequences end (as :mod:`capmetrics.integrations.rewards` cuts them).
        kwargs: torchmetrics' (``process_group`` …); ``compute_with_cache`` is off by default
            (compute is collective: a rank returning a cached value would leave the others
            waiting).

    ``update`` adds a batch; calling the metric (``forward``) adds it too and returns the
    batch's own value (this rank's batch alone, its corpus statistics its own, as
    ``capmetrics.score`` on the batch gives it); :meth:`compute` returns the value over every
    update of every rank since the last ``reset`` (``update`` after ``compute`` goes on adding):
    a float64 tensor for one metric, a ``{spec: tensor}`` dict for several.
    """

    is_differentiable = False
    higher_is_better = True
    full_state_update = False
    #: The registered name every spec of a subclass must have (None: any).
    metric: str | None = None

    def __init__(
        self,
        metrics: str | Sequence[str] = "cider-d",
        vocab: Sequence[str] | Mapping[int, str] | None = None,
        end_id: int | None = 0,
        keep_end: bool = False,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("compute_with_cache", False)
        super().__init__(**kwargs)
        from capmetrics.registry.compose import METRIC_KINDS, compose

        self.specs = [metrics] if isinstance(metrics, str) else list(metrics)
        if not self.specs:
            raise MetricError("CaptionMetric: no metrics given")
        self.components: list[Component] = [compose(s, METRIC_KINDS) for s in self.specs]
        for spec, c in zip(self.specs, self.components):
            if self.metric is not None and getattr(c, "name", None) != self.metric:
                raise MetricError(f"{type(self).__name__}: {spec!r} is not a {self.metric} spec")
            problem = _why_not_combined(c)
            if problem is not None:
                raise MetricError(
                    f"CaptionMetric: {spec} cannot be combined across ranks: {problem} "
                    "(ranks join ScoresInParts or ShardStatistics of "
                    "capmetrics.components.protocols)"
                )
        self.words = None if vocab is None else vocab_array(vocab)
        self.end_id, self.keep_end = end_id, keep_end
        if keep_end:
            check_end_word(self.words, end_id)
        self._items: dict[int, tuple[str, tuple[str, ...]]] = {}
        self._unnamed: list[tuple[str, tuple[str, ...]]] = []
        self.gathered_bytes = 0

    # -- input ----------------------------------------------------------------------------------
    def _texts(self, sequences: Any, what: str) -> list[str]:
        if isinstance(sequences, str):
            raise MetricError(
                f"CaptionMetric.update: {what} must be a sequence of texts or token ids, "
                "not one string"
            )
        if (
            not torch.is_tensor(sequences)
            and not isinstance(sequences, np.ndarray)
            and all(isinstance(s, str) for s in sequences)
        ):
            return [str(s) for s in sequences]
        if self.words is None:
            raise MetricError(
                f"CaptionMetric.update: {what} are token ids; "
                "pass vocab=<id -> word> to CaptionMetric"
            )
        return decode(sequences, self.words, self.end_id, self.keep_end)

    def _batch(
        self, candidates: Any, references: Sequence[Any], ids: Any
    ) -> tuple[list[str], list[tuple[str, ...]], list[int] | None]:
        """A batch's candidate texts, reference texts (a single string is one reference) and
        item ids (None: none given), checked."""
        cands = self._texts(candidates, "candidates")
        if len(references) != len(cands):
            raise MetricError(
                f"CaptionMetric.update: {len(cands)} candidates but "
                f"{len(references)} reference lists"
            )
        refs = [
            (str(r),) if isinstance(r, str) else tuple(self._texts(r, f"references of item {k}"))
            for k, r in enumerate(references)
        ]
        if ids is None:
            return cands, refs, None
        keys = np.asarray(ids.detach().cpu().numpy() if torch.is_tensor(ids) else ids).reshape(-1)
        if len(keys) != len(cands) or not np.issubdtype(keys.dtype, np.integer):
            raise MetricError(
                f"CaptionMetric.update: ids must be {len(cands)} integers (one per candidate), "
                f"got {len(keys)} of dtype {keys.dtype}"
            )
        return cands, refs, keys.tolist()

    def update(self, candidates: Any, references: Sequence[Any], ids: Any = None) -> None:
        """Add items: one candidate (text or token ids) per item, its references (texts, or
        token-id sequences; a single string is the item's one reference), and optionally each
        item's id (int), with which an item seen again (on this or another rank) counts once."""
        cands, refs, keys = self._batch(candidates, references, ids)
        if keys is None:
            if self._items:
                raise MetricError("CaptionMetric.update: give ids with every update or with none")
            self._unnamed.extend(zip(cands, refs))
            return
        if self._unnamed:
            raise MetricError("CaptionMetric.update: give ids with every update or with none")
        for key, cand, ref in zip(keys, cands, refs):
            self._items.setdefault(key, (cand, ref))

    def forward(self, candidates: Any, references: Sequence[Any], ids: Any = None) -> Any:
        """``update`` with the batch, and the batch's own value (this rank's batch alone, as
        ``capmetrics.score`` gives it; items repeated within the batch by id count once)."""
        self.update(candidates, references, ids)
        cands, refs, keys = self._batch(candidates, references, ids)
        if keys is not None:
            first = dict(zip(reversed(keys), range(len(keys) - 1, -1, -1)))  # each id's first item
            order = np.array(sorted(first), dtype=np.int64)
            cands, refs = (
                [cands[first[k]] for k in order.tolist()],
                [refs[first[k]] for k in order.tolist()],
            )
        else:
            order = np.arange(len(cands), dtype=np.int64)
        value = self._values(_Collectives(local=True), order, cands, refs)
        self._forward_cache = value  # type: ignore[assignment]  # what Lightning logs on step
        return value

    def reset(self) -> None:
        super().reset()
        self._items, self._unnamed = {}, []

    # -- combining the shards -------------------------------------------------------------------
    def _shard(self, comm: _Collectives) -> tuple[np.ndarray, list[str], list[tuple[str, ...]]]:
        """The global order key of each of this rank's items (deduplicated across ranks), and
        their texts. A rank without items takes part with none, whatever the others gave."""
        specs = comm.objects(self.specs, "the metric specs")
        if any(s != self.specs for s in specs):
            raise MetricError(
                "CaptionMetric.compute: ranks have different metric specs: "
                + "; ".join(f"rank {r}: {s}" for r, s in enumerate(specs))
            )
        mode = "ids" if self._items else "no ids" if self._unnamed else "idle"
        modes = comm.objects(mode, "the kind of item keys")
        if {"ids", "no ids"} <= set(modes):
            raise MetricError(
                "CaptionMetric.compute: some ranks gave ids and others did not: "
                + "; ".join(f"rank {r}: {m}" for r, m in enumerate(modes))
            )
        if "no ids" not in modes:
            keys = np.fromiter(self._items, np.int64, len(self._items))
            every = comm.arrays(keys)
            owner = np.concatenate([np.full(len(k), r) for r, k in enumerate(every)])
            flat = np.concatenate(every)
            _, first = np.unique(flat, return_index=True)  # the lowest rank holding each id
            mine = np.sort(flat[first][owner[first] == comm.rank])
            pairs = [self._items[k] for k in mine.tolist()]
        else:  # no ids: rank order, nothing dropped
            counts = [int(n[0]) for n in comm.arrays(np.array([len(self._unnamed)], np.int64))]
            mine = sum(counts[: comm.rank]) + np.arange(len(self._unnamed), dtype=np.int64)
            pairs = self._unnamed
        return mine, [c for c, _ in pairs], [r for _, r in pairs]

    @staticmethod
    def _fit(component: Component, comm: _Collectives, refs: list[tuple[str, ...]]) -> None:
        """Fix corpus statistics (CIDEr-D's df) to the sum of every rank's part (protocol:
        :class:`~capmetrics.components.protocols.CountsInParts`, else
        :class:`~capmetrics.components.protocols.FitsInParts`)."""
        if supports(component, CountsInParts):
            counted = cast(CountsInParts, component)
            counted.fit_counts(comm.objects(counted.count_state(refs), "count_state"))
        elif supports(component, FitsInParts):
            fitted = cast(FitsInParts, component)
            fitted.fit_states(comm.objects(fitted.fit_state(refs), "fit_state"))

    def _score(
        self,
        component: Component,
        comm: _Collectives,
        order: np.ndarray,
        cands: list[str],
        refs: list[tuple[str, ...]],
    ) -> float:
        """The corpus value of ``component`` over every rank's items."""
        self._fit(component, comm, refs)
        empty = Scores(np.zeros(0), float("nan"))
        if supports(component, ShardStatistics):
            shards = cast(ShardStatistics, component)
            sums = shards.score_shard(cands, refs)[1] if cands else None
            total = _sum(comm.objects(sums, "score_shard sums"))
            return float(shards.corpus_from_sums(total)) if total is not None else float("nan")
        if supports(component, ScoresInParts):  # refused in __init__ otherwise
            parted = cast(ScoresInParts, component)
            scores, extra = parted.score_part(cands, refs) if cands else (empty, None)
            extras = comm.objects(
                None if extra is None else np.asarray(extra), "score_part statistics"
            )
            if all(e is None for e in extras):  # the corpus value is the mean of the item values
                return _mean_in_order(comm, order, scores.values)
            total = _sum(extras)
            corpus = float(parted.merge_scores([(scores, total)]).corpus) if cands else float("nan")
            values = comm.arrays(np.array([corpus]))  # the ranks with items agree; take the first
            known = [v[0] for v in values if not np.isnan(v[0])]
            return known[0] if known else float("nan")
        raise AssertionError(f"{component!r} takes part in no protocol")  # pragma: no cover

    def _values(
        self, comm: _Collectives, order: np.ndarray, cands: list[str], refs: list[tuple[str, ...]]
    ) -> torch.Tensor | dict[str, torch.Tensor]:
        from capmetrics.engine.prepared import run_scope

        with (
            run_scope()
        ):  # tokens and n-gram batches made once for every metric, as in capmetrics.score
            out = {
                spec: torch.tensor(self._score(c, comm, order, cands, refs), dtype=torch.float64)
                for spec, c in zip(self.specs, self.components)
            }
        return out[self.specs[0]] if len(out) == 1 else out

    def compute(self) -> torch.Tensor | dict[str, torch.Tensor]:
        """The corpus value of each metric over every rank's (deduplicated) items."""
        comm = _Collectives(getattr(self, "process_group", None))
        order, cands, refs = self._shard(comm)
        out = self._values(comm, order, cands, refs)
        self.gathered_bytes = comm.received
        return out


def _mean_in_order(comm: _Collectives, order: np.ndarray, values: np.ndarray) -> float:
    """The mean of every rank's item values, taken in item order (as one process takes it)."""
    keys, parts = comm.arrays(order), comm.arrays(np.asarray(values, dtype=np.float64))
    merged = np.concatenate(parts)[np.argsort(np.concatenate(keys), kind="stable")]
    return float(np.mean(merged)) if len(merged) else float("nan")


def _sum(parts: Sequence[Any]) -> np.ndarray | None:
    """The sum of the ranks' statistics vectors (None: ranks without items)."""
    present = [np.asarray(p, dtype=np.float64) for p in parts if p is not None]
    return np.sum(present, axis=0) if present else None


class CocoCaptionMetrics(CaptionMetric):
    """coco-caption's set: BLEU-1..4, METEOR, ROUGE-L and CIDEr-D (``compute`` gives a dict)."""

    def __init__(
        self,
        vocab: Sequence[str] | Mapping[int, str] | None = None,
        end_id: int | None = 0,
        keep_end: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(list(COCO_METRICS), vocab, end_id, keep_end, **kwargs)


class BERTScoreMetric(CaptionMetric):
    """BERTScore (the ``bertscore`` spec: its defaults, or e.g. ``"bertscore(idf=true)"``): a
    :class:`CaptionMetric` of one bertscore spec. Each rank embeds only its own items' texts;
    with ``idf`` the token-id document counts of every rank's references are summed first (its
    ``count_state``). On the CPU an item's value does not depend on the other texts of its rank
    (bit-identical to one process); a GPU's padded encoder batches can move it by about 1e-7."""

    metric = "bertscore"

    def __init__(
        self,
        spec: str = "bertscore",
        vocab: Sequence[str] | Mapping[int, str] | None = None,
        end_id: int | None = 0,
        keep_end: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(spec, vocab, end_id, keep_end, **kwargs)
