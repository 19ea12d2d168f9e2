"""Readiness is true (issue 35's last row, issue 39's doctor and plugins rows), played as a user:

- in a base install (``pip install capmetrics``, no extras: simulated by a site folder holding
  only the base dependencies, seen by a fresh ``python -S``), ``capmetrics plugins`` says not
  ready, with the extra to install, for every component whose run needs one (nested and default
  components, an NNEval model's features included); ``capmetrics doctor`` prints each fix with
  its ``[extra]``; ``capmetrics score FILE`` is one line naming the extra;
- a broken optional dependency (its import raises) is "missing" in the doctor, not "ok";
- ``capmetrics setup meteor --check`` reads what a run reads: a corrupt manifest, an array that
  fails its checksum or a numba that does not import is "not ready", exit 1.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import SAMPLE

packaging = pytest.importorskip("packaging.requirements")


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@pytest.fixture(scope="module")
def base_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A site folder with capmetrics and its base dependencies only (links into this
    environment's site-packages): what ``pip install capmetrics`` gives."""
    keep: set[str] = set()
    todo = ["capmetrics"]
    while todo:
        name = todo.pop()
        if _normal(name) in keep:
            continue
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        keep.add(_normal(name))
        for text in dist.requires or []:
            req = packaging.Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    site = tmp_path_factory.mktemp("base-site")
    for dist in importlib.metadata.distributions():
        if _normal(dist.metadata["Name"] or "") not in keep:
            continue
        for entry in {
            f.parts[0]
            for f in dist.files or ()
            if f.parts and f.parts[0] not in ("..", "__pycache__")
        }:
            source = Path(dist.locate_file(entry))
            if source.exists() and not (site / entry).exists():
                (site / entry).symlink_to(source)
    return site


def run_base(
    site: Path, *args: object, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """``capmetrics ARGS`` in a base install: a fresh interpreter without this environment's
    site-packages (``-S``), with ``site`` added the way site-packages is."""
    code = (
        "import site, sys; site.addsitedir(sys.argv.pop(1)); sys.argv[0] = 'capmetrics'; "
        "from capmetrics.cli import run; run()"
    )
    environ = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "COLUMNS", "LINES")}
    return subprocess.run(
        [sys.executable, "-S", "-c", code, str(site), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**environ, **(env or {})},
    )


# -- a base install ----------------------------------------------------------------------------
def test_the_base_site_is_a_base_install(base_site: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-S",
            "-c",
            "import site, sys; site.addsitedir(sys.argv[1]); "
            "import capmetrics, importlib.util as u; "
            "print([m for m in ('numba', 'pycocoevalcap', 'torch', 'gensim') if u.find_spec(m)])",
            str(base_site),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", proc.stderr


@pytest.mark.parametrize(
    ("name", "extra"),
    [
        ("meteor", "coco"),
        ("meteor-jar", "coco"),
        ("ptb-jar", "coco"),
        ("nneval", "embeddings"),
        ("embedding-cosine", "torch"),
        ("mmd", "torch"),
        ("frechet", "torch"),
        ("wembsim", "embeddings"),
    ],
)
def test_plugins_in_a_base_install_say_which_extra(
    base_site: Path, name: str, extra: str, plugins_rows: dict
) -> None:
    rows = plugins_rows[name]
    assert rows and all(r["ready"] is False for r in rows), rows
    assert all(r["readied_by"] == f"pip install 'capmetrics[{extra}]'" for r in rows), rows


@pytest.fixture(scope="module")
def plugins_rows(base_site: Path) -> dict[str, list[dict]]:
    proc = run_base(base_site, "plugins", "--json")
    assert proc.returncode == 0, proc.stderr
    rows: dict[str, list[dict]] = {}
    for row in json.loads(proc.stdout):
        rows.setdefault(row["name"], []).append(row)
    return rows


def test_plugins_in_a_base_install_keep_the_base_metrics_ready(plugins_rows: dict) -> None:
    for name in ("bleu-4", "cider-d", "rouge-l", "ptb", "mean", "over-candidates"):
        assert all(r["ready"] is True for r in plugins_rows[name]), plugins_rows[name]


def test_doctor_in_a_base_install_prints_each_extra(base_site: Path) -> None:
    proc = run_base(base_site, "doctor", env={"COLUMNS": "250"})
    assert proc.returncode == 0, proc.stderr
    shown = proc.stdout
    for extra in ("coco", "torch", "embeddings", "clip"):
        assert f"pip install 'capmetrics[{extra}]'" in shown, shown
    assert "pip install 'capmetrics'" not in shown, shown  # the [extra] is never eaten as markup
    rows = {r["what"]: r for r in json.loads(run_base(base_site, "doctor", "--json").stdout)}
    assert rows["extra: coco"]["status"] == "missing"
    assert rows["setup meteor"]["status"] == "missing"
    assert "pip install 'capmetrics[coco]'" in rows["setup meteor"]["details"]


def test_score_in_a_base_install_is_one_line_naming_the_extra(base_site: Path) -> None:
    proc = run_base(base_site, "score", SAMPLE)
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert proc.stderr.strip().splitlines() == [
        "Error: meteor needs its jar from pycocoevalcap: pip install 'capmetrics[coco]'"
    ], proc.stderr
    proc = run_base(base_site, "score", SAMPLE, "-m", "embedding-cosine")
    assert proc.returncode == 1 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "pip install 'capmetrics[torch]'" in proc.stderr
    proc = run_base(base_site, "score", SAMPLE, "-m", "bleu-4", "--format", "json")
    assert proc.returncode == 0, proc.stderr


# -- a broken optional dependency --------------------------------------------------------------
@pytest.fixture
def broken_numba(tmp_path: Path) -> dict[str, str]:
    """An environment whose ``numba`` is installed (its metadata is there) but raises on import."""
    if importlib.util.find_spec("numba") is None:
        pytest.skip("numba is not installed")
    package = tmp_path / "shadow" / "numba"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("raise RuntimeError('a broken numba install')\n")
    return {"PYTHONPATH": str(tmp_path / "shadow")}


def test_doctor_reports_a_broken_dependency_as_missing(broken_numba: dict[str, str]) -> None:
    code = (
        "import json; from capmetrics.cli.doctor import extra_rows; "
        "print(json.dumps(extra_rows(['coco'])))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **broken_numba},
    )
    assert proc.returncode == 0, proc.stderr
    [(what, status, details)] = json.loads(proc.stdout)
    assert (what, status) == ("extra: coco", "missing")
    assert "numba does not import (RuntimeError: a broken numba install)" in details
    assert "pip install --force-reinstall 'capmetrics[coco]'" in details


def test_doctor_says_installed_when_the_imports_work() -> None:
    from capmetrics.cli.doctor import extra_rows

    if (
        importlib.util.find_spec("pycocoevalcap") is None
        or importlib.util.find_spec("numba") is None
    ):
        pytest.skip("the coco extra is not installed")
    assert extra_rows(["coco"]) == [("extra: coco", "ok", "installed (imports)")]


# -- setup meteor --check reads what a run reads -------------------------------------------------
@pytest.fixture
def meteor_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache root whose METEOR resource folder is intact (small arrays under the right names:
    ``--check`` verifies manifests and checksums, not the tables' contents)."""
    if importlib.util.find_spec("pycocoevalcap") is None:
        pytest.skip("pycocoevalcap is not installed")
    from capmetrics.plugins.meteor._resources import PARTS, resource_key
    from capmetrics.plugins.meteor._tables import write_folder

    root = tmp_path / "cache"
    monkeypatch.setenv("CAPMETRICS_CACHE_DIR", str(root))
    for part, names in PARTS.items():
        write_folder(
            root / "meteor" / resource_key() / part,
            {n: np.arange(4) for n in names},
            {"version": 1},
        )
    return root


def check_meteor(root: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "capmetrics.cli", "setup", "meteor", "--check"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "CAPMETRICS_CACHE_DIR": str(root), **(env or {})},
    )


def _manifest(root: Path, part: str = "synonyms") -> Path:
    return next((root / "meteor").glob(f"v*/{part}/manifest.json"))


def test_setup_check_is_ready_on_an_intact_cache(meteor_cache: Path) -> None:
    proc = check_meteor(meteor_cache)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "manifests and checksums verified" in proc.stdout and proc.stdout.strip().endswith(
        "meteor is ready"
    )


def test_setup_check_is_not_ready_with_a_hostile_manifest(meteor_cache: Path) -> None:
    _manifest(meteor_cache).write_text("[" * 100000)
    proc = check_meteor(meteor_cache)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert (
        "damaged" in proc.stdout
        and "nested too deeply" in proc.stdout
        and "meteor is not ready" in proc.stdout
    )
    assert _manifest(meteor_cache).read_text() == "[" * 100000  # --check changes nothing


def test_setup_check_is_not_ready_when_an_array_fails_its_checksum(meteor_cache: Path) -> None:
    array = next(_manifest(meteor_cache, "paraphrases").parent.glob("*.npy"))
    array.write_bytes(array.read_bytes()[:-1] + b"\x01")
    proc = check_meteor(meteor_cache)
    assert proc.returncode == 1 and "does not match its checksum" in proc.stdout, proc.stdout


def test_doctor_row_follows_the_check(meteor_cache: Path) -> None:
    from capmetrics.cli.doctor import setup_rows
    from capmetrics.plugins.meteor._cli import setup_meteor

    [(what, status, _)] = setup_rows({"meteor": setup_meteor})
    assert (what, status) == ("setup meteor", "ok")
    _manifest(meteor_cache).write_text("{not json")
    [(what, status, details)] = setup_rows({"meteor": setup_meteor})
    assert (
        status == "missing" and "damaged" in details and "run `capmetrics setup meteor`" in details
    )


def test_setup_check_is_not_ready_when_numba_does_not_import(
    meteor_cache: Path, broken_numba: dict
) -> None:
    """Without the compiled aligner a run imports numba: a numba that raises is not ready."""
    proc = check_meteor(meteor_cache, broken_numba)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "broken: numba does not import (RuntimeError: a broken numba install)" in proc.stdout
