"""Each plugin that names a user file by its SHA-256 gives, through the shared digest
(capmetrics.io.digests), the very string it gave with its own hashing: checked against
hashlib over the bytes written here."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from capmetrics.io import digests
from capmetrics.plugins.bertscore import _encoder, _weights
from capmetrics.plugins.clip_score._checkpoints import file_checksum
from capmetrics.plugins.detailed import chair
from capmetrics.plugins.meteor import _compiled
from capmetrics.plugins.nneval import model_files
from capmetrics.plugins.spice import _parse, _server
from capmetrics.plugins.tokenizers import cjk


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture(params=["memo", "off"])
def files(request, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder of files; digests with the memo (RACY_NS 0: remembered at once) and without."""
    monkeypatch.setenv("CAPMETRICS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(digests, "RACY_NS", 0)
    monkeypatch.setattr(digests, "_loaded", (None, {}))
    if request.param == "off":
        monkeypatch.setenv(digests.ENABLE_ENV, "0")
    folder = tmp_path / "files"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.txt").write_bytes(b"alpha\n")
    (folder / "sub" / "b.bin").write_bytes(bytes(range(256)) * 9)
    return folder


def test_single_file_digests(files: Path) -> None:
    a = files / "a.txt"
    for _ in range(2):  # the second time from the memo
        assert chair._sha256(a) == sha(b"alpha\n")[:16]
        assert cjk.file_digest(str(a)) == sha(b"alpha\n")[:16]
        assert _weights.file_digest(str(a)) == "sha256:" + sha(b"alpha\n")[:16]
        assert _compiled._sha256(a) == sha(b"alpha\n")
        assert model_files.file_digest(a) == sha(b"alpha\n")
        assert file_checksum([a]) == "sha256:" + sha(b"alpha\n")


def test_several_file_digests(files: Path) -> None:
    a, b = files / "a.txt", files / "sub" / "b.bin"
    data = bytes(range(256)) * 9
    for _ in range(2):
        assert file_checksum([a, b], files) == "sha256:" + sha(
            b"a.txt" + b"alpha\n" + b"sub/b.bin" + data
        )
        assert model_files.file_digest(files) == sha(b"a.txt\0alpha\nsub/b.bin\0" + data)
        assert (
            _encoder.vocab_digest(str(files), ["sub/b.bin", "none.json", "a.txt"])
            == sha(b"sub/b.bin\0" + data + b"a.txt\0alpha\n")[:32]
        )


def test_nneval_model_digest(files: Path) -> None:
    (files / model_files.MODEL_JSON).write_bytes(b'{"m": 1}')
    assert model_files.model_digest(files) == sha(b'{"m": 1}')[:16]  # no weights file: b""
    (files / model_files.WEIGHTS).write_bytes(b"PK-weights")
    expected = sha(b'{"m": 1}PK-weights')[:16]
    assert model_files.model_digest(files / model_files.MODEL_JSON) == expected
    assert model_files.model_digest(files) == expected


def test_spice_server_version(files: Path) -> None:
    classes = sorted(_parse.helper_dir().glob("*.class"))
    assert classes  # the helper ships compiled
    expected = sha(b"".join(p.name.encode() + b"\0" + p.read_bytes() for p in classes))
    assert _server.server_version("4.5.1") == f"4.5.1:helper-{expected[:16]}"
