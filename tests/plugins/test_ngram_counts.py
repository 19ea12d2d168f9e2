"""The shared n-gram machinery: the stable-sort ``unique`` and the multi-order join."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from capmetrics.plugins.ngram.counts import (
    BatchDistance,
    make_batch,
    match,
    ngrams,
    stable_argsort,
    unique,
)
from capmetrics.plugins.tokenizers import WhitespaceTokenizer


@pytest.mark.parametrize("seed", range(5))
def test_unique_equals_numpy(seed: int) -> None:
    keys = np.random.default_rng(seed).integers(0, 50, size=300 * seed + 1)
    distinct, first, inverse, counts = unique(keys, index=True, inverse=True, counts=True)
    want = np.unique(keys, return_index=True, return_inverse=True, return_counts=True)
    for got, expected in zip((distinct, first, inverse, counts), want):
        assert np.array_equal(got, expected)


@pytest.mark.parametrize("top", [1, 600, 2**16, 2**20, 2**32, 2**40])
def test_stable_argsort_equals_numpy(top: int) -> None:
    """The 16-bit radix passes keep equal keys in their order, as NumPy's stable sort does,
    on each side of the one- and two-pass bounds and past them (NumPy's own sort)."""
    rng = np.random.default_rng(top)
    keys = np.concatenate([rng.integers(0, top, 3000), [top - 1, 0, top - 1]])
    assert np.array_equal(stable_argsort(keys), np.argsort(keys, kind="stable"))
    with_negative = np.concatenate([keys, [-1, -(2**40)]])
    assert np.array_equal(stable_argsort(with_negative), np.argsort(with_negative, kind="stable"))
    assert len(stable_argsort(np.zeros(0, dtype=np.int64))) == 0


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
    a_dog = [
        g
        for g in range(tables[1].n_grams)
        if [vocab[batch.sentences.ids[tables[1].first[g] + t]] for t in range(2)] == ["a", "dog"]
    ]
    row = np.flatnonzero((joined.item == 1) & (joined.gram == tables[0].n_grams + a_dog[0]))
    assert joined.ref_counts[row].tolist() == [[0, 2]]


def test_the_join_with_set_grams_finds_the_same_matches() -> None:
    """The join numbers both sides' (set, n-gram) keys in one sort; with ``set_grams`` it looks
    candidates up among the references' keys instead. Both find the same counts."""
    rng = np.random.default_rng(7)
    words = "a b c d e f g".split()
    text = lambda: " ".join(rng.choice(words, rng.integers(0, 9)))  # noqa: E731
    refs = [[text() for _ in range(rng.integers(1, 5))] for _ in range(20)]
    cands = [text() for _ in range(60)]
    batch = make_batch(
        WhitespaceTokenizer(), cands, refs, str.split, "test", rng.integers(0, 20, 60)
    )
    tables = ngrams(batch.sentences, 4)
    plain, with_sets = match(batch, tables), match(batch, tables, set_grams=True)
    for name in ("item", "gram", "count", "ref_counts", "matched", "table"):
        assert np.array_equal(getattr(plain, name), getattr(with_sets, name)), name
    assert len(plain.matched) > 50 and plain.ref_counts.max() > 1


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
    repeated = make_batch(
        WhitespaceTokenizer(), cands, [refs[q] for q in refset], str.split, "test"
    )
    assert shared.sentences.vocab == repeated.sentences.vocab
    assert np.array_equal(shared.item_slots, repeated.item_slots)
    assert np.array_equal(shared.cand, repeated.cand)


def test_metrics_of_a_run_share_one_batch_and_its_tables(monkeypatch):  # type: ignore[no-untyped-def]
    import capmetrics
    from capmetrics.data import load_dataset
    from capmetrics.plugins.ngram import counts

    sample = Path(capmetrics.__file__).with_name("sample") / "flickr8k_expert_sample.jsonl"
    data = load_dataset(sample)
    specs = ["bleu-1", "bleu-2", "bleu-3", "bleu-4", "rouge-l", "cider-d"]
    alone = {s: capmetrics.score(data, [s])[s] for s in specs}  # one metric per run: nothing shared
    built = []
    real = counts.make_batch
    monkeypatch.setattr(counts, "make_batch", lambda *a, **k: built.append(1) or real(*a, **k))
    together = capmetrics.score(data, specs)
    assert (
        len(built) == 2
    )  # BLEU-1..4 and CIDEr-D share one batch; ROUGE-L splits tokens its own way
    for s in specs:
        assert together[s].corpus == alone[s].corpus
        assert together[s].item_values.tolist() == alone[s].item_values.tolist()
    batch = real(
        counts.PTB,
        ["a dog runs"],
        [["a dog is running", "dogs run"]],
        counts.BatchDistance.split,
        "x",
    )
    assert (
        counts.ngrams(batch.sentences, 2) == counts.ngrams(batch.sentences, 4)[:2]
    )  # built once, in order


def test_shared_for_is_keyed_by_identity_within_a_run() -> None:
    from capmetrics.engine.prepared import run_scope, shared_for

    a, b = ["x"], ["x"]
    calls: list[int] = []
    compute = lambda: calls.append(1) or len(calls)  # noqa: E731
    assert (
        shared_for("t", (a,), compute) == 1 and shared_for("t", (a,), compute) == 2
    )  # no run: no sharing
    with run_scope():
        assert shared_for("t", (a,), compute) == 3
        assert shared_for("t", (a,), compute) == 3  # the very same list
        assert (
            shared_for("t", (b,), compute) == 4
        )  # an equal but different list is not the same input
        assert shared_for("u", (a,), compute) == 5
