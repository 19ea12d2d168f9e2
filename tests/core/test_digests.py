"""The digest memo (capmetrics.io.digests): a hit reads no byte, any write is seen (ctime), a
damaged memo heals, two writers never tear it, a read-only cache root works, and the model
folder digest is the one computed before the memo existed."""

from __future__ import annotations

import builtins
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from capmetrics.errors import MetricError
from capmetrics.io import digests
from capmetrics.io.models import file_digest, folder_digest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def memo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh cache root, an empty in-process view, and no racy window (files made by a test
    are seconds old at most; the window has its own test)."""
    monkeypatch.setenv("CAPMETRICS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(digests.ENABLE_ENV, raising=False)
    monkeypatch.setattr(digests, "RACY_NS", 0)
    monkeypatch.setattr(digests, "_loaded", (None, {}))
    return tmp_path / "cache" / "digests" / "sha256.json"


def entries(path: Path) -> dict[str, list]:
    data = json.loads(path.read_text())
    assert data["format"] == digests.FORMAT
    return data["entries"]


def forbid_reading(monkeypatch: pytest.MonkeyPatch, *paths: Path) -> list[str]:
    """Make opening any of ``paths`` (by any name) fail; returns the list of tries."""
    banned = {os.path.realpath(p) for p in paths}
    tries: list[str] = []
    real_os_open, real_open = os.open, builtins.open

    def checked(path, opener, *args, **kwargs):  # type: ignore[no-untyped-def]
        if isinstance(path, (str, os.PathLike)) and os.path.realpath(path) in banned:
            tries.append(os.fspath(path))
            raise AssertionError(f"{path} was opened")
        return opener(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", lambda p, *a, **k: checked(p, real_os_open, *a, **k))
    monkeypatch.setattr(builtins, "open", lambda p, *a, **k: checked(p, real_open, *a, **k))
    return tries


def test_a_hit_reads_no_byte_of_the_file(memo: Path, tmp_path: Path, monkeypatch) -> None:
    weights = tmp_path / "w.bin"
    weights.write_bytes(b"weights" * 1000)
    expected = hashlib.sha256(b"weights" * 1000).hexdigest()
    assert file_digest(weights) == expected
    assert len(entries(memo)) == 1
    monkeypatch.setattr(digests, "_loaded", (None, {}))  # as a new process: the memo on disk
    tries = forbid_reading(monkeypatch, weights)
    assert file_digest(weights) == expected
    assert file_digest(str(weights)) == expected
    assert tries == []
    monkeypatch.undo()  # the guard is active: a miss would have raised
    with pytest.raises(AssertionError, match="was opened"):
        forbid_reading(monkeypatch, weights)
        digests.sha256_file(weights)


def test_a_rewrite_with_the_old_mtime_is_seen_by_its_ctime(memo: Path, tmp_path: Path) -> None:
    file = tmp_path / "config.json"
    file.write_bytes(b'{"a": 1}')
    os.utime(file, ns=(1_000_000_000, 1_000_000_000))
    first = file_digest(file)
    assert first == hashlib.sha256(b'{"a": 1}').hexdigest() and len(entries(memo)) == 1
    before = os.stat(file)
    time.sleep(0.05)  # past the clock tick of the first change time
    file.write_bytes(b'{"a": 2}')  # same size
    os.utime(file, ns=(before.st_atime_ns, before.st_mtime_ns))  # the old mtime back
    after = os.stat(file)
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    assert after.st_ctime_ns != before.st_ctime_ns
    assert file_digest(file) == hashlib.sha256(b'{"a": 2}').hexdigest()


def test_a_file_changed_just_before_hashing_is_not_remembered(
    memo: Path, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setattr(digests, "RACY_NS", 2_000_000_000)
    file = tmp_path / "fresh.json"
    file.write_bytes(b"{}")  # its ctime is now: a write in the same tick could go unseen
    assert file_digest(file) == hashlib.sha256(b"{}").hexdigest()
    assert not memo.exists()


@pytest.mark.parametrize(
    "damage",
    [b"", b'{"format": "capmetrics-digests/1", "entries": {"k": ["x", 1]}}', b"\x00garbage{"],
)
def test_a_damaged_memo_is_rebuilt_with_one_warning(
    memo: Path, tmp_path: Path, capsys, damage: bytes
) -> None:
    memo.parent.mkdir(parents=True)
    memo.write_bytes(damage)
    file = tmp_path / "a.bin"
    file.write_bytes(b"abc")
    assert file_digest(file) == hashlib.sha256(b"abc").hexdigest()
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"capmetrics: warning: the digest memo {memo}")
    assert err[0].endswith("it is rebuilt (files are hashed again)")
    assert list(entries(memo).values())[0][0] == hashlib.sha256(b"abc").hexdigest()
    assert file_digest(file) == hashlib.sha256(b"abc").hexdigest()
    assert capsys.readouterr().err == ""


def test_a_memo_that_is_a_fifo_is_neither_read_nor_written(memo: Path, tmp_path: Path) -> None:
    memo.parent.mkdir(parents=True)
    os.mkfifo(memo)
    file = tmp_path / "a.bin"
    file.write_bytes(b"abc")
    assert file_digest(file) == hashlib.sha256(b"abc").hexdigest()  # returns: nothing blocked
    assert os.path.exists(memo) and not memo.is_file()


WRITER = """
import hashlib, sys
from pathlib import Path
from capmetrics.io import digests
digests.RACY_NS = 0
folder = Path(sys.argv[1])
for round in range(3):
    for file in sorted(folder.iterdir()):
        assert digests.file_digest(file) == hashlib.sha256(file.read_bytes()).hexdigest()
"""


def test_two_processes_writing_at_once_leave_a_whole_memo(memo: Path, tmp_path: Path) -> None:
    expected = {}
    for side in ("a", "b"):
        folder = tmp_path / side
        folder.mkdir()
        for i in range(40):
            data = f"{side}{i}".encode() * 100
            (folder / f"{i:02}.bin").write_bytes(data)
            expected[hashlib.sha256(data).hexdigest()] = data
    env = {**os.environ, "CAPMETRICS_CACHE_DIR": str(memo.parents[1])}
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(tmp_path / side)],
            env=env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for side in ("a", "b")
    ]
    for run in runs:
        out, err = run.communicate(timeout=120)
        assert run.returncode == 0, err.decode()
        assert b"warning" not in err  # no reader ever saw a torn memo
    found = entries(memo)
    assert found and all(digest in expected for digest, _ in found.values())
    assert [p.name for p in memo.parent.iterdir()] == ["sha256.json"]  # no temporary left


def test_a_read_only_cache_root_hashes_every_time(tmp_path: Path, monkeypatch) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")  # a cache root under a file can never be created
    monkeypatch.setenv("CAPMETRICS_CACHE_DIR", str(blocker / "cache"))
    monkeypatch.setattr(digests, "RACY_NS", 0)
    monkeypatch.setattr(digests, "_loaded", (None, {}))
    file = tmp_path / "a.bin"
    file.write_bytes(b"abc")
    for _ in range(2):
        assert file_digest(file) == hashlib.sha256(b"abc").hexdigest()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_a_read_only_memo_still_answers(memo: Path, tmp_path: Path, monkeypatch) -> None:
    file = tmp_path / "a.bin"
    file.write_bytes(b"abc")
    file_digest(file)
    os.chmod(memo.parent, 0o500)
    try:
        other = tmp_path / "b.bin"
        other.write_bytes(b"def")
        assert file_digest(other) == hashlib.sha256(b"def").hexdigest()  # not written: fine
        tries = forbid_reading(monkeypatch, file)
        assert file_digest(file) == hashlib.sha256(b"abc").hexdigest() and tries == []
    finally:
        os.chmod(memo.parent, 0o700)


def test_off_and_bounded(memo: Path, tmp_path: Path, monkeypatch) -> None:
    files = []
    for i in range(5):
        files.append(tmp_path / f"{i}.bin")
        files[-1].write_bytes(bytes([i]) * 10)
    monkeypatch.setenv(digests.ENABLE_ENV, "off")
    assert file_digest(files[0]) == hashlib.sha256(b"\0" * 10).hexdigest()
    assert not memo.exists()
    monkeypatch.delenv(digests.ENABLE_ENV)
    monkeypatch.setattr(digests, "MAX_ENTRIES", 3)
    for i, file in enumerate(files):
        monkeypatch.setattr(digests.time, "time", lambda i=i: 1_000_000.0 + i)
        file_digest(file)
    kept = sorted(digest for digest, _ in entries(memo).values())
    assert kept == sorted(hashlib.sha256(bytes([i]) * 10).hexdigest() for i in (2, 3, 4))


def test_a_fifo_is_refused_not_waited_on(memo: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "model.bin"
    os.mkfifo(fifo)
    with pytest.raises(MetricError, match=r"model.bin: is a FIFO \(named pipe\), not a regular"):
        file_digest(fifo)


def old_folder_digest(folder: Path) -> str:
    """folder_digest as it was before the memo (commit 8369ec4)."""
    sha = hashlib.sha256()
    suffixes = (".safetensors", ".bin", ".json")
    files = sorted(p for p in folder.rglob("*") if p.suffix in suffixes and p.is_file())
    for p in files:
        sha.update(p.relative_to(folder).as_posix().encode())
        with p.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                sha.update(block)
    return f"sha256:{sha.hexdigest()}"


def test_folder_digest_is_the_old_one_and_a_hit_reads_nothing(
    memo: Path, tmp_path: Path, monkeypatch
) -> None:
    folder = tmp_path / "model"
    (folder / "1_Pooling").mkdir(parents=True)
    (folder / "config.json").write_bytes(b'{"hidden": 4}')
    (folder / "model.safetensors").write_bytes(os.urandom(3 << 20))
    (folder / "1_Pooling" / "config.json").write_bytes(b"{}")
    (folder / "README.md").write_text("not part of the identity")
    by_hand = hashlib.sha256(
        b"1_Pooling/config.json{}config.json"
        + b'{"hidden": 4}'
        + b"model.safetensors"
        + (folder / "model.safetensors").read_bytes()
    ).hexdigest()
    assert old_folder_digest(folder) == f"sha256:{by_hand}"
    assert folder_digest(folder) == f"sha256:{by_hand}"
    monkeypatch.setattr(digests, "_loaded", (None, {}))
    tries = forbid_reading(monkeypatch, *[p for p in folder.rglob("*") if p.is_file()])
    assert folder_digest(folder) == f"sha256:{by_hand}" and tries == []
    monkeypatch.undo()
    monkeypatch.setenv("CAPMETRICS_CACHE_DIR", str(memo.parents[1]))
    monkeypatch.setattr(digests, "RACY_NS", 0)
    (folder / "1_Pooling" / "config.json").rename(folder / "1_Pooling" / "config2.json")
    assert folder_digest(folder) == old_folder_digest(folder) != f"sha256:{by_hand}"
