"""Caches of derived data key by the object itself, never by ``id()``: an object made after
another is collected may get its address, and must not get its cached value.

The loops call ``gc.collect()`` each round; the objects the suite already loaded (torch, models)
are frozen first (``gc.freeze``) so that each collection walks only what the test made, not the
whole heap (0.6 s a round otherwise), and unfrozen afterwards."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import numpy as np
import pytest
from capmetrics.io.identity import Identity

ROUNDS = 40


@pytest.fixture(autouse=True, scope="module")
def _small_heap() -> Iterator[None]:
    """Collections that see only this module's objects (the rest of the heap frozen meanwhile)."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def test_identity_keys_are_the_object_itself() -> None:
    a, b = [1], [1]
    assert Identity(a) == Identity(a) and hash(Identity(a)) == hash(Identity(a))
    assert Identity(a) != Identity(b)  # equal contents, different objects
    assert Identity(a) != a and len({Identity(a), Identity(a), Identity(b)}) == 2
    assert Identity({"unhashable": [1]}).obj == {"unhashable": [1]}


def test_shared_for_never_hands_a_new_list_the_value_of_a_collected_one() -> None:
    from capmetrics.engine.prepared import run_scope, shared_for

    with run_scope():
        for i in range(ROUNDS):
            texts = [f"caption {i}"]
            assert shared_for("first", (texts,), lambda: texts[0])  # noqa: F821 (del below) == f"caption {i}"
            del texts
            gc.collect()


def test_cross_index_of_a_new_array_at_a_collected_ones_address() -> None:
    from capmetrics.components.permutation import cross_index

    rng = np.random.default_rng(0)
    addresses: set[int] = set()
    reused = 0
    for _ in range(ROUNDS):
        masks = np.zeros((6, 5))
        for row in masks:
            row[rng.choice(5, 2, replace=False)] = 1.0
        want = cross_index(masks.copy(), 2)  # writeable: computed, not cached
        masks.flags.writeable = False  # read-only split masks are cached
        reused += id(masks) in addresses
        addresses.add(id(masks))
        assert np.array_equal(cross_index(masks, 2), want)
        assert np.array_equal(cross_index(masks, 2), want)  # the cached entry: still this array's
        del masks
        gc.collect()
    assert reused  # the hazard did arise: some array had a collected one's address


def test_df_index_of_a_new_table_at_a_collected_ones_address() -> None:
    from capmetrics.plugins.ngram.cider import _df_index
    from capmetrics.plugins.ngram.counts import make_batch, ngrams
    from capmetrics.plugins.tokenizers import WhitespaceTokenizer

    batch = make_batch(WhitespaceTokenizer(), ["a dog"], [["x"]], str.split, "test")
    tables = ngrams(batch.sentences, 4)
    addresses: set[int] = set()
    reused = 0
    for i in range(ROUNDS):
        df = {"a": i + 1, "dog": 2 * i + 1, "a dog": 3}
        reused += id(df) in addresses
        addresses.add(id(df))
        want = [df.get(g, 0) for t in tables for g in t.strings(batch.sentences)]
        assert _df_index(df).lookup(batch.sentences, tables).tolist() == want
        assert _df_index(df).lookup(batch.sentences, tables).tolist() == want
        del df
        gc.collect()
    assert reused


def test_image_keys_of_loaded_images_are_the_images_themselves() -> None:
    from capmetrics.data.images import image_key

    first, second = bytearray(b"img"), bytearray(b"img")
    assert image_key(first) == image_key(first) != image_key(second)
    assert image_key("a.jpg") == image_key("a.jpg") == ("path", "a.jpg")
