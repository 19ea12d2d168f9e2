"""torchmetrics ``Metric`` classes for capmetrics' metrics, sharded under DDP.

>>> from capmetrics.integrations.torchmetrics import CaptionMetric, CocoCaptionMetrics
>>> cider = CaptionMetric("cider-d")                      # any capmetrics spec
>>> cider.update(["a dog runs"], [["a dog is running", "a brown dog"]], ids=[17])
>>> cider.compute()                                       # tensor(…, dtype=torch.float64)
>>> coco = CocoCaptionMetrics(vocab=ix_to_word)           # BLEU-1..4, METEOR, ROUGE-L, CIDEr-D
>>> coco.update(model_ids, reference_ids, ids=batch["index"]); coco.compute()   # {name: tensor}

Each rank keeps the text of **its own** items (no torchmetrics list states: nothing is gathered as
strings) and, at :meth:`CaptionMetric.compute`, the ranks exchange only sufficient statistics with
``torch.distributed`` collectives:

- the item ids (8 bytes each), so that an item seen by several ranks (DistributedSampler pads the
  last batch with repeated samples) or twice by one rank is scored once, by the lowest rank that
  has it;
- CIDEr-D's document frequencies (any component with ``fit_state``/``fit_states`` whose state is
  ``(n-gram -> count, images)``): the ranks agree on word ids (each word as its 64-bit BLAKE2b
  digest, about 8 bytes a distinct word), each n-gram is then an exact int64 key of its word ids,
  and the sorted keys (as differences) with their counts go zlib-compressed (about 4 bytes an
  n-gram); the counts are summed, and each rank reads the global count of its own n-grams;
- the per-item values (8 bytes each, with their ids), from which a corpus value that is the mean of
  the item values is taken in item-id order, as one process computes it;
- BLEU's summed n-gram counts (``score_part``), METEOR's summed fragment statistics
  (``score_shard``/``corpus_from_sums``): the corpus value from the sums, as from one process;
- BERTScore's idf (``idf=true``): token-id document counts, summed; each rank embeds only its own
  texts (:class:`BERTScoreMetric`; float32 embeddings: values within about 1e-7, see there).

Values equal those of one process over the deduplicated set: bit-identical when ``ids`` are given
(item order = id order), the corpus mean within 1 ulp-scale rounding otherwise (rank order);
two distinct words would have to share a 64-bit digest to mix two n-grams' counts (probability
about w²/2⁶⁵: 1e-11 for 20,000 distinct words). ``gathered_bytes`` reports what the last compute
received.
"""

from __future__ import annotations

import hashlib
import pickle
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

try:
    import torch
    import torch.distributed as dist
    from torchmetrics import Metric
except ImportError as err:  # pragma: no cover - the extra is not installed
    raise ImportError(f"capmetrics.integrations.torchmetrics needs torch and torchmetrics ({err}): "
                      "pip install 'capmetrics[torchmetrics]'") from err

from capmetrics.component import Component, Scores
from capmetrics.errors import MetricError
from capmetrics.integrations.rewards import check_end_word, decode, vocab_array

__all__ = ["COCO_METRICS", "MEAN_CORPUS", "BERTScoreMetric", "CaptionMetric", "CocoCaptionMetrics", "gram_keys"]

COCO_METRICS = ("bleu-1", "bleu-2", "bleu-3", "bleu-4", "meteor", "rouge-l", "cider-d")
#: Registered names of components whose corpus value is the mean of their item values and whose
#: item values do not depend on the other items of a call (given fixed corpus statistics).
MEAN_CORPUS = frozenset({"bertscore"})


def gram_keys(grams: Sequence[str]) -> np.ndarray:
    """A 64-bit key (int64) of each string: its 8-byte BLAKE2b digest, the same in every process
    (Python's ``hash`` is salted per process)."""
    blake = hashlib.blake2b
    return np.fromiter((int.from_bytes(blake(g.encode("utf-8", "surrogatepass"), digest_size=8).digest(),
                                       "little", signed=True) for g in grams), np.int64, len(grams))


def _ngram_keys(grams: list[str], comm: _Collectives) -> np.ndarray:
    """An int64 key of each n-gram, the same on every rank: its words' ids in a vocabulary shared
    by the ranks (each word by its 64-bit :func:`gram_keys` digest, the ids their rank in the
    union of every rank's digests), in base (words + 1), as exact as the word digests; n-grams of
    more than 4 words, or vocabularies too large for 4 digits in int64, get the n-gram's digest."""
    flat = " ".join(grams).split(" ") if grams else []
    words = list(dict.fromkeys(flat))
    digests = gram_keys(words)
    vocabulary = np.unique(np.concatenate(comm.arrays(digests)))
    orders = np.fromiter((g.count(" ") + 1 for g in grams), np.int64, len(grams))
    base = len(vocabulary) + 1
    if base**4 >= 2**63 or (len(orders) and orders.max() > 4):
        return gram_keys(grams)
    word_id = np.searchsorted(vocabulary, digests) + 1
    position = {w: i for i, w in enumerate(words)}
    ids = word_id[np.fromiter(map(position.__getitem__, flat), np.int64, len(flat))]
    starts = np.cumsum(orders) - orders
    keys = np.zeros(len(grams), np.int64)
    for t in range(4):  # every n-gram at once, word position by word position
        has = np.flatnonzero(orders > t)
        keys[has] = keys[has] * base + ids[starts[has] + t]
    return keys


def _pack(keys: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Sorted int64 keys and their counts as zlib-compressed bytes (keys as differences)."""
    body = np.diff(keys, prepend=np.int64(0)).tobytes() + counts.astype(np.int32).tobytes()
    return np.frombuffer(np.int64(len(keys)).tobytes() + zlib.compress(body, 1), dtype=np.uint8)


def _unpack(packed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    raw = packed.tobytes()
    n = int(np.frombuffer(raw[:8], np.int64)[0])
    body = zlib.decompress(raw[8:])
    return np.cumsum(np.frombuffer(body[: 8 * n], np.int64)), np.frombuffer(body[8 * n :], np.int32).astype(np.int64)


class _Collectives:
    """all_gather of numpy arrays and small objects in a process group, counting received bytes."""

    def __init__(self, group: Any = None) -> None:
        self.group = group
        self.active = dist.is_available() and dist.is_initialized()
        self.world = dist.get_world_size(group) if self.active else 1
        self.rank = dist.get_rank(group) if self.active else 0
        nccl = self.active and dist.get_backend(group) == "nccl"
        self.device = torch.device("cuda", torch.cuda.current_device()) if nccl else torch.device("cpu")
        self.received = 0

    def arrays(self, array: np.ndarray) -> list[np.ndarray]:
        """Every rank's 1-D array (int64 or float64), in rank order."""
        if not self.active:
            return [array]
        sizes = self._tensors(torch.tensor([len(array)], dtype=torch.int64, device=self.device))
        lengths = [int(s.item()) for s in sizes]
        padded = np.zeros(max(lengths), dtype=array.dtype)
        padded[: len(array)] = array
        gathered = self._tensors(torch.from_numpy(padded).to(self.device))
        return [g.cpu().numpy()[:n] for g, n in zip(gathered, lengths)]

    def objects(self, obj: Any) -> list[Any]:
        """Every rank's (small, picklable) object, in rank order."""
        if not self.active:
            return [obj]
        out: list[Any] = [None] * self.world
        dist.all_gather_object(out, obj, group=self.group)
        self.received += sum(len(pickle.dumps(o)) for o in out)
        return out

    def _tensors(self, tensor: torch.Tensor) -> list[torch.Tensor]:
        out = [torch.empty_like(tensor) for _ in range(self.world)]
        dist.all_gather(out, tensor, group=self.group)
        self.received += tensor.element_size() * tensor.numel() * self.world
        return out


class CaptionMetric(Metric):
    """One or more capmetrics metrics (specs) as a torchmetrics ``Metric``.

    Args:
        metrics: a spec (``"cider-d"``, ``"bleu-4"``, ``"meteor"``…) or a list of them; each must
            combine across ranks (see the module doc; others are refused here).
        vocab: id -> word (a list or dict) for token-id input; ``end_id``, ``keep_end``: where
            sequences end (as :mod:`capmetrics.integrations.rewards` cuts them).
        kwargs: torchmetrics' (``process_group`` …).

    :meth:`compute` returns a float64 tensor for one metric, a ``{spec: tensor}`` dict for several.
    """

    is_differentiable = False
    higher_is_better = True
    full_state_update = False

    def __init__(self, metrics: str | Sequence[str] = "cider-d", vocab: Sequence[str] | Mapping[int, str] | None = None,
                 end_id: int | None = 0, keep_end: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        from capmetrics.registry.compose import METRIC_KINDS, compose

        self.specs = [metrics] if isinstance(metrics, str) else list(metrics)
        if not self.specs:
            raise MetricError("CaptionMetric: no metrics given")
        self.components: list[Component] = [compose(s, METRIC_KINDS) for s in self.specs]
        for spec, c in zip(self.specs, self.components):
            if not (hasattr(c, "score_shard") or (hasattr(c, "score_part") and hasattr(c, "merge_scores"))
                    or getattr(c, "name", None) in MEAN_CORPUS):
                raise MetricError(f"CaptionMetric: {spec} cannot be combined across ranks (it has neither "
                                  "score_part/merge_scores nor score_shard/corpus_from_sums)")
            if getattr(c, "name", None) == "bertscore" and getattr(c, "floor", None) == "bert-score":
                raise MetricError(f"CaptionMetric: {spec}: floor=bert-score makes each value depend on the "
                                  "other pairs of its batch of 64, which differ across ranks; use floor=off or zero")
        self.words = None if vocab is None else vocab_array(vocab)
        self.end_id, self.keep_end = end_id, keep_end
        if keep_end:
            check_end_word(self.words, end_id)
        self._items: dict[int, tuple[str, tuple[str, ...]]] = {}
        self._unnamed: list[tuple[str, tuple[str, ...]]] = []
        self._computed_once = False
        self.gathered_bytes = 0

    # -- input ----------------------------------------------------------------------------------
    def _texts(self, sequences: Any, what: str) -> list[str]:
        if isinstance(sequences, str):
            raise MetricError(f"CaptionMetric.update: {what} must be a sequence of texts or token ids, not one string")
        if not torch.is_tensor(sequences) and not isinstance(sequences, np.ndarray) \
                and all(isinstance(s, str) for s in sequences):
            return list(sequences)
        if self.words is None:
            raise MetricError(f"CaptionMetric.update: {what} are token ids; pass vocab=<id -> word> to CaptionMetric")
        return decode(sequences, self.words, self.end_id, self.keep_end)

    def update(self, candidates: Any, references: Sequence[Any], ids: Any = None) -> None:  # type: ignore[override]
        """Add items: one candidate (text or token ids) per item, its references (texts, or
        token-id sequences), and optionally each item's id (int), with which an item seen again
        (on this or another rank) counts once."""
        if self._computed_once:
            raise MetricError("CaptionMetric.update after compute: call reset() first (compute combined the "
                              "ranks' statistics; the next epoch starts from reset)")
        cands = self._texts(candidates, "candidates")
        if len(references) != len(cands):
            raise MetricError(f"CaptionMetric.update: {len(cands)} candidates but {len(references)} reference lists")
        refs = [tuple(self._texts(r, f"references of item {k}")) for k, r in enumerate(references)]
        if ids is None:
            self._unnamed.extend(zip(cands, refs))
            return
        keys = np.asarray(ids.detach().cpu().numpy() if torch.is_tensor(ids) else ids).reshape(-1)
        if len(keys) != len(cands) or not np.issubdtype(keys.dtype, np.integer):
            raise MetricError(f"CaptionMetric.update: ids must be {len(cands)} integers (one per candidate), "
                              f"got {len(keys)} of dtype {keys.dtype}")
        if self._unnamed:
            raise MetricError("CaptionMetric.update: give ids with every update or with none")
        for key, cand, ref in zip(keys.tolist(), cands, refs):
            self._items.setdefault(key, (cand, ref))

    def forward(self, *args: Any, **kwargs: Any) -> None:
        """``update`` only: the values need the whole set's statistics (at :meth:`compute`)."""
        self.update(*args, **kwargs)

    def reset(self) -> None:
        super().reset()
        self._items, self._unnamed = {}, []
        self._computed_once = False

    # -- combining the shards -------------------------------------------------------------------
    def _shard(self, comm: _Collectives) -> tuple[np.ndarray, list[str], list[tuple[str, ...]]]:
        """The global order key of each of this rank's items (deduplicated across ranks), and
        their texts."""
        specs = comm.objects(self.specs)
        if any(s != self.specs for s in specs):
            raise MetricError(f"CaptionMetric.compute: ranks have different metric specs: "
                              + "; ".join(f"rank {r}: {s}" for r, s in enumerate(specs)))
        named = comm.objects(bool(self._items) or not self._unnamed)
        if len(set(named)) > 1:
            raise MetricError("CaptionMetric.compute: some ranks gave ids and others did not")
        if named[0]:
            keys = np.fromiter(self._items, np.int64, len(self._items))
            every = comm.arrays(keys)
            owner = np.concatenate([np.full(len(k), r) for r, k in enumerate(every)]) if every else np.zeros(0)
            flat = np.concatenate(every)
            _, first = np.unique(flat, return_index=True)  # the lowest rank holding each id
            mine = np.sort(flat[first][owner[first] == comm.rank])
            pairs = [self._items[k] for k in mine.tolist()]
        else:  # no ids: rank order, nothing dropped
            counts = [int(n[0]) for n in comm.arrays(np.array([len(self._unnamed)], np.int64))]
            mine = sum(counts[: comm.rank]) + np.arange(len(self._unnamed), dtype=np.int64)
            pairs = self._unnamed
        return mine, [c for c, _ in pairs], [r for _, r in pairs]

    def _fit(self, component: Component, comm: _Collectives, cands: list[str], refs: list[tuple[str, ...]]) -> None:
        """Fix a corpus statistic (CIDEr-D's df) to the sum over ranks, read for this rank's n-grams."""
        state = component.fit_state(refs)  # type: ignore[attr-defined]
        if not (isinstance(state, tuple) and len(state) == 2 and isinstance(state[0], Mapping)):
            component.fit_states(comm.objects(state))  # type: ignore[attr-defined]  # a small generic state
            return
        table, images = state
        # this rank's n-grams: its references' (counted) and its candidates' (looked up only)
        grams = list(table) + [g for g in component.fit_state([[c] for c in cands])[0] if g not in table]  # type: ignore[attr-defined]
        keys = _ngram_keys(grams, comm)
        counted = len(table)
        order = np.argsort(keys[:counted], kind="stable")
        sent = _pack(keys[:counted][order], np.fromiter(table.values(), np.int64, counted)[order])
        parts = [_unpack(p) for p in comm.arrays(sent)]
        total_images = int(sum(int(n[0]) for n in comm.arrays(np.array([images], np.int64))))
        every, inverse = np.unique(np.concatenate([k for k, _ in parts]), return_inverse=True)
        totals = np.bincount(inverse, np.concatenate([c for _, c in parts]).astype(float),
                             minlength=len(every)).astype(np.int64)
        where = np.minimum(np.searchsorted(every, keys), max(len(every) - 1, 0))
        found = every[where] == keys if len(every) else np.zeros(len(keys), bool)
        component.fit_states([(dict(zip([grams[i] for i in np.flatnonzero(found).tolist()],  # type: ignore[attr-defined]
                                        totals[where[found]].tolist())), total_images)])

    @staticmethod
    def _fit_idf(component: Component, comm: _Collectives, refs: list[tuple[str, ...]]) -> None:
        """BERTScore's idf over every rank's references: token-id document counts summed (exact)."""
        component.fit(refs)  # type: ignore[attr-defined]
        local = component.idf_  # type: ignore[attr-defined]
        tokens = comm.arrays(np.fromiter(local.df, np.int64, len(local.df)))
        counts = comm.arrays(np.fromiter(local.df.values(), np.int32, len(local.df)))
        documents = int(sum(int(n[0]) for n in comm.arrays(np.array([local.documents], np.int64))))
        every, inverse = np.unique(np.concatenate(tokens), return_inverse=True)
        totals = np.bincount(inverse, np.concatenate(counts).astype(float), minlength=len(every)).astype(np.int64)
        component.idf_ = type(local)(dict(zip(every.tolist(), totals.tolist())), documents)  # type: ignore[attr-defined]

    def _score(self, component: Component, comm: _Collectives, order: np.ndarray, cands: list[str],
               refs: list[tuple[str, ...]]) -> float:
        """The corpus value of ``component`` over every rank's items."""
        if hasattr(component, "fit_state") and hasattr(component, "fit_states"):
            self._fit(component, comm, cands, refs)
        if getattr(component, "idf", False) is True and hasattr(component, "fit"):
            self._fit_idf(component, comm, refs)
        empty = Scores(np.zeros(0), float("nan"))
        if getattr(component, "name", None) in MEAN_CORPUS:
            scores = component.score(cands, refs) if cands else empty  # type: ignore[attr-defined]
            return _mean_in_order(comm, order, scores.values)
        if hasattr(component, "score_shard"):
            scores, sums = component.score_shard(cands, refs) if cands else (empty, None)  # type: ignore[attr-defined]
            total = _sum(comm.objects(sums))
            return float(component.corpus_from_sums(total)) if total is not None else float("nan")  # type: ignore[attr-defined]
        scores, extra = component.score_part(cands, refs) if cands else (empty, None)  # type: ignore[attr-defined]
        extras = comm.objects(None if extra is None else np.asarray(extra))
        if all(e is None for e in extras):  # the corpus value is the mean of the item values
            return _mean_in_order(comm, order, scores.values)
        total = _sum(extras)
        corpus = float(component.merge_scores([(scores, total)]).corpus) if cands else float("nan")  # type: ignore[attr-defined]
        values = comm.arrays(np.array([corpus]))  # the ranks with items agree; take the first
        known = [v[0] for v in values if not np.isnan(v[0])]
        return known[0] if known else float("nan")

    def compute(self) -> torch.Tensor | dict[str, torch.Tensor]:  # type: ignore[override]
        """The corpus value of each metric over every rank's (deduplicated) items."""
        from capmetrics.prepared import run_scope

        comm = _Collectives(getattr(self, "process_group", None))
        order, cands, refs = self._shard(comm)
        with run_scope():  # tokens and n-gram batches made once for every metric, as in capmetrics.score
            out = {spec: torch.tensor(self._score(c, comm, order, cands, refs), dtype=torch.float64)
                   for spec, c in zip(self.specs, self.components)}
        self.gathered_bytes = comm.received
        self._computed_once = True
        return out[self.specs[0]] if len(out) == 1 else out


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

    def __init__(self, vocab: Sequence[str] | Mapping[int, str] | None = None, end_id: int | None = 0,
                 keep_end: bool = False, **kwargs: Any) -> None:
        super().__init__(list(COCO_METRICS), vocab, end_id, keep_end, **kwargs)


class BERTScoreMetric(CaptionMetric):
    """BERTScore (the ``bertscore`` spec: its defaults, or e.g. ``"bertscore(idf=true)"``): each rank
    embeds only its own items' texts; with ``idf`` the token-id document counts of every rank's
    references are summed first. Item values are float32 embeddings' cosines, so a rank's batch
    composition can move them by about 1e-7 (the corpus mean likewise): not bit-identical."""

    def __init__(self, spec: str = "bertscore", vocab: Sequence[str] | Mapping[int, str] | None = None,
                 end_id: int | None = 0, keep_end: bool = False, **kwargs: Any) -> None:
        super().__init__(spec, vocab, end_id, keep_end, **kwargs)
        if getattr(self.components[0], "name", None) != "bertscore":
            raise MetricError(f"BERTScoreMetric: {spec!r} is not a bertscore spec")
