"""Greedy token matching of BERTScore as batched matrix products (torch, any device).

Texts are held as one flat table of unit token embeddings with per-text offsets and per-token
weights (idf, 0 for the special tokens). Precision of a candidate against a reference is the
weighted mean, over the candidate's tokens, of each token's best cosine among the reference's
tokens (special tokens included as match targets, as in bert-score); recall swaps the roles.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: Text pairs matched per batch.
PAIR_BATCH = 4096
#: Pools (sets of texts matched all against all) per batch.
POOL_BATCH = 128


@dataclass(frozen=True)
class TokenTable:
    """Flat unit token embeddings (tokens × dim), offsets of each text, token weights."""

    tokens: np.ndarray
    offsets: np.ndarray
    weights: np.ndarray

    @classmethod
    def build(cls, embedded: Sequence[np.ndarray], weights: Sequence[np.ndarray]) -> TokenTable:
        lengths = [len(e) for e in embedded]
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        dim = embedded[0].shape[1] if embedded else 1
        tokens = np.concatenate(list(embedded)) if embedded else np.zeros((0, dim), np.float32)
        flat_w = (
            np.concatenate(list(weights)).astype(np.float32) if weights else np.zeros(0, np.float32)
        )
        return cls(tokens, offsets, flat_w)

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)


def _gather(torch, table: TokenTable, tokens, texts: np.ndarray, device: str):  # type: ignore[no-untyped-def]
    """Padded embeddings (…, L, dim), validity mask (…, L) and normalised weights of ``texts``;
    the embeddings are gathered from ``tokens`` (the table's tokens, already on ``device``)."""
    lengths = table.lengths[texts]
    width = int(lengths.max()) if lengths.size else 1
    pos = np.arange(width)
    valid = pos < lengths[..., None]
    index = np.where(valid, table.offsets[texts][..., None] + pos, 0)
    emb = tokens[torch.from_numpy(index).to(device)]
    weights = np.where(valid, table.weights[index], 0.0).astype(np.float32)
    weights = torch.from_numpy(weights).to(device)
    weights = weights / _row_sums(torch, weights, lengths, device)[..., None]
    return emb, torch.from_numpy(valid).to(device), weights


def _row_sums(torch, values, lengths: np.ndarray, device: str):  # type: ignore[no-untyped-def]
    """The sum of each row's first ``lengths`` entries, added in order in float64 (a running
    sum) and rounded to the rows' dtype, so that it does not depend on how far the row is
    padded, i.e. on the other pairs of its batch."""
    last = torch.from_numpy(np.maximum(lengths, 1) - 1).to(device)
    running = values.to(torch.float64).cumsum(dim=-1)
    return running.gather(-1, last[..., None])[..., 0].to(values.dtype)


def pair_scores(
    table: TokenTable,
    a: np.ndarray,
    b: np.ndarray,
    device: str = "cpu",
    floor_a: np.ndarray | None = None,
    floor_b: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Precision and recall of text ``a[k]`` as candidate against text ``b[k]``, for every k.

    Where ``floor_a[k]`` (``floor_b[k]``), the best match of each token of ``a[k]`` (``b[k]``)
    is at least 0, as when bert-score pads the other text (its padding scores cosine 0).
    """
    floor_a = np.zeros(len(a), bool) if floor_a is None else floor_a
    floor_b = np.zeros(len(a), bool) if floor_b is None else floor_b
    import torch

    precision = np.zeros(len(a), np.float32)
    recall = np.zeros(len(a), np.float32)
    order = np.lexsort((table.lengths[b], table.lengths[a]))
    with torch.inference_mode():
        tokens = torch.from_numpy(table.tokens).to(
            device
        )  # one copy to the device (none on the CPU)
        for start in range(0, len(order), PAIR_BATCH):
            rows = order[start : start + PAIR_BATCH]
            ea, va, wa = _gather(torch, table, tokens, a[rows], device)
            eb, vb, wb = _gather(torch, table, tokens, b[rows], device)
            sim = torch.bmm(ea, eb.transpose(1, 2))
            sim = sim.masked_fill(~(va[:, :, None] & vb[:, None, :]), -torch.inf)
            best_a, best_b = sim.amax(dim=2), sim.amax(dim=1)
            best_a = torch.where(
                torch.from_numpy(floor_a[rows, None]).to(device), best_a.clamp(min=0.0), best_a
            )
            best_b = torch.where(
                torch.from_numpy(floor_b[rows, None]).to(device), best_b.clamp(min=0.0), best_b
            )
            best_a, best_b = torch.where(va, best_a, 0.0), torch.where(vb, best_b, 0.0)
            lengths_a, lengths_b = table.lengths[a[rows]], table.lengths[b[rows]]
            precision[rows] = _row_sums(torch, best_a * wa, lengths_a, device).cpu().numpy()
            recall[rows] = _row_sums(torch, best_b * wb, lengths_b, device).cpu().numpy()
    return precision, recall


def pool_precisions(
    table: TokenTable, pools: Sequence[np.ndarray], device: str = "cpu", floor: bool = True
) -> list[np.ndarray]:
    """Per pool of texts, the matrix P[i, j] = precision of text i against text j (recall is Pᵀ);
    with ``floor`` every best match is at least 0.

    Each pool's tokens are laid end to end (no padding between its texts): one cosine matrix
    per pool, a segment maximum over each text's columns, and a weighted segment sum of rows.
    """
    import torch

    lengths = table.lengths
    totals = np.array([lengths[p].sum() for p in pools], dtype=np.int64)
    sums = np.add.reduceat(table.weights, table.offsets[:-1]) if len(table.weights) else np.zeros(0)
    sums = np.where(lengths > 0, sums, 1.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        unit_w = (table.weights / np.repeat(sums, lengths)).astype(np.float32)
    out: list[np.ndarray | None] = [None] * len(pools)
    order = np.argsort(totals, kind="stable")
    with torch.inference_mode():
        tokens = torch.from_numpy(table.tokens).to(
            device
        )  # one copy to the device (none on the CPU)
        for start in range(0, len(order), POOL_BATCH):
            chunk = order[start : start + POOL_BATCH]
            width, n = int(totals[chunk].max()), max(len(pools[k]) for k in chunk)
            index = np.zeros((len(chunk), width), np.int64)
            owner = np.full((len(chunk), width), n, np.int64)  # n: padding segment
            for row, k in enumerate(chunk):
                tok = np.concatenate(
                    [np.arange(table.offsets[t], table.offsets[t + 1]) for t in pools[k]]
                )
                index[row, : len(tok)] = tok
                owner[row, : len(tok)] = np.repeat(np.arange(len(pools[k])), lengths[pools[k]])
            emb = tokens[torch.from_numpy(index).to(device)]
            own = torch.from_numpy(owner).to(device)
            weights = torch.from_numpy(
                np.where(owner < n, unit_w[index], 0.0).astype(np.float32)
            ).to(device)
            sim = torch.bmm(emb, emb.transpose(1, 2))  # (B, W, W)
            best = torch.full((len(chunk), width, n + 1), -torch.inf, device=device)
            best = best.scatter_reduce(2, own[:, None, :].expand(-1, width, -1), sim, "amax")
            if floor:
                best = best.clamp(min=0.0)
            best = torch.where(torch.isfinite(best), best, 0.0)
            rows = torch.zeros((len(chunk), n + 1, width), device=device)
            rows.scatter_(1, own[:, None, :], weights[:, None, :])
            prec = torch.bmm(rows, best).cpu().numpy()  # (B, n + 1, n + 1)
            for row, k in enumerate(chunk):
                size = len(pools[k])
                out[k] = prec[row, :size, :size]
    return out  # type: ignore[return-value]
