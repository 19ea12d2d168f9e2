"""The vectorised paraphrase-table build: its hash table, its keys, collisions, odd bytes.

The build as a whole is checked against the table read whole in test_meteor_native
(``test_streaming_build_equals_reading_the_table_whole``); these tests pin the parts."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest
from capmetrics.errors import MetricError
from capmetrics.plugins.meteor import _paraphrase_build as build
from capmetrics.plugins.meteor import _resources

from tests.plugins.test_meteor_native import _reference_paraphrase_arrays


def _normal(p: str) -> str:
    return " ".join(_resources.java_split(p))


def _arrays(table: Path) -> tuple[list[str], list[list[int]], list[int], list[int]]:
    vocab, offsets, values, refs, pars = build.build_paraphrase_arrays(
        table, _resources._lines, _normal
    )
    rows = [values[offsets[i] : offsets[i + 1]].tolist() for i in range(len(offsets) - 1)]
    return vocab, rows, refs.tolist(), pars.tolist()


def test_keys_depend_on_the_bytes_not_where_they_are() -> None:
    keys = build._Keys()
    text = b"\nthe dog\nx the dog\nthe dot\n"
    keys.load(np.frombuffer(text, dtype=np.uint8))
    starts, ends = np.array([1, 11, 19, 1]), np.array([8, 18, 26, 4])  # the dog x2, the dot, the
    key, check = keys.of(starts, ends)
    assert key[0] == key[1] and check[0] == check[1]
    assert key[0] != key[2] and check[0] != check[2] and key[0] != key[3]
    # the key is sum(b[j] * base**j) + length * step modulo 2**64 (the check: modulo 2**32)
    expected = (
        sum(b * pow(build._KEY_BASE, j, 1 << 64) for j, b in enumerate(b"the dog"))
        + 7 * build._KEY_STEP
    ) % (1 << 64)
    assert int(key[0]) % (1 << 64) == expected
    expected = (
        sum(b * pow(build._CHECK_BASE, j, 1 << 32) for j, b in enumerate(b"the dog"))
        + 7 * build._CHECK_STEP
    ) % (1 << 32)
    assert int(check[0]) % (1 << 32) == expected


def test_the_hash_table_numbers_keys_once_across_growth(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(build, "_MIN_SLOT_BITS", 3)  # grows many times
    rng = np.random.default_rng(5)
    pool = rng.integers(-(2**63), 2**63 - 1, size=3000, dtype=np.int64)
    pool[:40] = pool[0] + np.arange(40) * 7  # near keys share first slots
    table, seen = build._Table("phrases"), {}
    for _ in range(12):
        keys = rng.choice(pool, size=700)
        before = len(table)
        numbers, new = table.number(keys, (keys * 3).astype(np.int32))
        for k, n in zip(keys.tolist(), numbers.tolist()):
            assert seen.setdefault(k, n) == n  # one number per key, kept across calls
        assert numbers[new].tolist() == list(range(before, len(table)))
        assert len(set(keys[new].tolist())) == len(new) == len(table) - before
    assert sorted(seen.values()) == list(range(len(seen))) == list(range(len(table)))


@pytest.mark.parametrize("count", [2, 5 * build._FEW])  # probed one by one; vectorised
def test_a_key_with_another_check_is_an_error_not_a_merge(count: int) -> None:
    table = build._Table("phrases")
    keys = np.arange(count, dtype=np.int64) * 7919
    table.number(keys, np.ones(count, dtype=np.int32))
    checks = np.ones(count, dtype=np.int32)
    checks[-1] = 2
    with pytest.raises(MetricError, match="two paraphrase-table phrases share a 64-bit key"):
        table.number(keys, checks)


@pytest.mark.parametrize("block", [16, 1 << 20])
@pytest.mark.parametrize(
    "text",
    [
        b"0.5\na dog\nthe dog\n0.5\na cat\nthe cat\n",
        # only two references in a row differ (one run of equal keys), all else is one phrase
        b"0.5\na dog\na dog\n0.5\na cat\na dog\n",
    ],
)
def test_colliding_phrase_keys_stop_the_build(
    tmp_path: Path, monkeypatch, block: int, text: bytes
) -> None:  # type: ignore[no-untyped-def]
    table = tmp_path / "paraphrase-en.gz"
    table.write_bytes(gzip.compress(text))
    monkeypatch.setattr(build, "BLOCK", block)
    of = build._Keys.of

    def colliding(self, starts, ends):  # type: ignore[no-untyped-def]
        key, check = of(self, starts, ends)
        key[ends - starts > 3] = 0  # the phrases' keys equal (not the words'): checks differ
        return key, check

    monkeypatch.setattr(build._Keys, "of", colliding)
    with pytest.raises(MetricError, match="share a 64-bit key; please report this"):
        build.build_paraphrase_arrays(table, _resources._lines, _normal)


@pytest.mark.parametrize("block", [5, 64, 1 << 20])
def test_bytes_that_are_not_utf8_are_read_as_the_replacement_character(
    tmp_path: Path, monkeypatch, block: int
) -> None:  # type: ignore[no-untyped-def]
    raw = (
        b"0.5\ncaf\xe9 noir\nblack coffee\n"  # Latin-1 e-acute: not UTF-8
        b"0.5\ncaf\xff noir\ncaf\xc3\xa9 noir\n"  # another bad byte: the same phrase when read
        b"0.5\nplain\ncaf\xe9 noir\n"
    )
    table = tmp_path / "paraphrase-en.gz"
    table.write_bytes(gzip.compress(raw))
    monkeypatch.setattr(build, "BLOCK", block)
    assert _arrays(table) == _reference_paraphrase_arrays(raw.decode("utf-8", "replace"))
    vocab, rows, refs, pars = _arrays(table)
    assert refs == [0, 0, 1] and vocab[0] == "caf\ufffd"


@pytest.mark.parametrize("block", [9, 1 << 20])
def test_plain_and_irregular_blocks_side_by_side(tmp_path: Path, monkeypatch, block: int) -> None:  # type: ignore[no-untyped-def]
    """Plain blocks take the vectorised path as they are; the others are normalised first (tabs,
    runs of spaces, spaces at the ends, \\r line ends, a form feed, a vertical tab kept)."""
    text = (
        "0.1\nthe dog\na dog\n"
        "0.2\n the  dog \na\tdog\r\n"
        "0.3\nx\x0by\nthe dog\r"
        "0.4\n\nempty\n"
        "0.5\na\x0cdog\nthe dog\n"
        "0.6\nthe dog\nlast"
    )
    table = tmp_path / "paraphrase-en.gz"
    table.write_bytes(gzip.compress(text.encode("utf-8")))
    monkeypatch.setattr(build, "BLOCK", block)
    assert _arrays(table) == _reference_paraphrase_arrays(text)
    vocab, rows, refs, pars = _arrays(table)
    assert refs == [0, 0, 1, 2, 3, 0] and "x\x0by" in vocab
