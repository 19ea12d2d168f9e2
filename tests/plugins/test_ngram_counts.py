"""The shared n-gram machinery: the stable-sort ``unique`` and the multi-order join."""

from __future__ import annotations

import numpy as np
import pytest

from capmetrics.plugins.ngram.counts import BatchDistance, make_batch, match, ngrams, unique
from capmetrics.plugins.tokenizers import WhitespaceTokenizer


@pytest.mark.parametrize("seed", range(5))
def test_unique_equals_numpy(seed: int) -> None:
    keys = np.random.default_rng(seed).integers(0, 50, size=300 * seed + 1)
    distinct, first, inverse, counts = unique(keys, index=True, inverse=True, counts=True)
    want = np.unique(keys, return_index=True, return_inverse=True, return_counts=True)
    for got, expected in zip((distinct, first, inverse, counts), want):
        assert np.array_equal(got, expected)


def test_unique_of_nothing() -> None:
    distinct, inverse = unique(np.zeros(0, dtype=np.int64), inverse=True)
    assert len(distinct) == 0 and len(inverse) == 0


def test_joining_all_orders_at_once_equals_order_by_order() -> None:
    cands = ["a man rides a horse", "a dog", "horse"]
    refs = [["a man riding a horse", "a man rides"], ["the dog runs", "a dog a dog"], ["a horse"]]
    batch = make_batch(WhitespaceTokenizer(), cands, refs, str.split, "test")
    tables = ngrams(batch.sentences, 4)
    joined = match(batch, tables)
    offset = 0
    for table in tables:
        alone = match(batch, table)
        mine = (joined.gram >= offset) & (joined.gram < offset + table.n_grams)
        assert np.array_equal(joined.item[mine], alone.item)
        assert np.array_equal(joined.gram[mine] - offset, alone.gram)
        assert np.array_equal(joined.ref_counts[mine], alone.ref_counts)
        offset += table.n_grams
    # "a dog" against "a dog a dog": the bigram (a, dog) occurs twice in the second reference
    vocab = batch.sentences.vocab
    a_dog = [g for g in range(tables[1].n_grams)
             if [vocab[batch.sentences.ids[tables[1].first[g] + t]] for t in range(2)] == ["a", "dog"]]
    row = np.flatnonzero((joined.item == 1) & (joined.gram == tables[0].n_grams + a_dog[0]))
    assert joined.ref_counts[row].tolist() == [[0, 2]]


def test_whitespace_tokens_skip_the_join_and_split_with_the_same_result() -> None:
    class Rejoined(WhitespaceTokenizer):
        whitespace_free_tokens = False  # takes the join-and-split path

    cands, refs = ["a  man\trides", " x "], [["a man\n rides a horse"], ["x  y", "y"]]
    fast = make_batch(WhitespaceTokenizer(), cands, refs, BatchDistance.split, "test").sentences
    slow = make_batch(Rejoined(), cands, refs, BatchDistance.split, "test").sentences
    assert fast.vocab == slow.vocab == ["a", "man", "rides", "x", "horse", "y"]
    assert np.array_equal(fast.ids, slow.ids) and np.array_equal(fast.offsets, slow.offsets)


def test_shared_reference_lists_give_the_batch_of_repeated_ones() -> None:
    cands = ["a man rides a horse", "a dog", "horse", "a dog runs"]
    refs = [["a man riding a horse", "a man rides"], ["the dog runs", "a dog a dog"]]
    refset = np.array([0, 1, 0, 1])
    shared = make_batch(WhitespaceTokenizer(), cands, refs, str.split, "test", refset)
    repeated = make_batch(WhitespaceTokenizer(), cands, [refs[q] for q in refset], str.split, "test")
    assert shared.sentences.vocab == repeated.sentences.vocab
    assert np.array_equal(shared.item_slots, repeated.item_slots)
    assert np.array_equal(shared.cand, repeated.cand)
