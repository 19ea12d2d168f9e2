"""benchmarks/bench_whole_table.py: the reference's SPICE runs from a private copy of
pycocoevalcap (the installed package is never changed) with the JVM options Java 17 needs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))


def _installed_spice() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("pycocoevalcap")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("pycocoevalcap is not installed")
    return Path(list(spec.submodule_search_locations)[0]) / "spice"


def _tree(folder: Path) -> list[tuple[str, bool]]:
    return sorted((str(p.relative_to(folder)), p.is_symlink()) for p in folder.rglob("*"))


def test_reference_package_is_a_private_copy(tmp_path: Path) -> None:
    import bench_whole_table as bench

    spice = _installed_spice()
    before = _tree(spice)
    folder = bench.reference_package(tmp_path)
    if folder is None:
        pytest.skip("no CoreNLP jars")
    assert _tree(spice) == before  # nothing linked into the installed package
    copy = tmp_path / "pycocoevalcap" / "spice"
    assert not (copy / "spice-1.0.jar").is_symlink()  # Java resolves Class-Path from here
    assert (copy / "lib" / "stanford-corenlp-3.6.0-models.jar").resolve().is_file()
    env = {**os.environ, "PYTHONPATH": str(folder)}
    where = subprocess.run(
        [
            sys.executable,
            "-c",
            "import pycocoevalcap.spice.spice as m, pycocoevalcap.bleu.bleu as"
            " b; print(m.__file__); print(b.__file__)",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert where[0] == str(copy / "spice.py")  # SPICE's cache and tmp/ go to the copy
    assert Path(where[1]).resolve() == (spice.parent / "bleu" / "bleu.py").resolve()


def test_java_tool_options_open_what_fst_needs(tmp_path: Path) -> None:
    import bench_whole_table as bench
    from capmetrics.plugins.spice._resources import java_major, java_version

    try:
        major = java_major(java_version("java"))
    except Exception:  # noqa: BLE001
        pytest.skip("no java")
    options = bench.java_tool_options(tmp_path).split()
    opens = [o for o in options if o.startswith("--add-opens=")]
    if major < 9:
        assert not opens
        return
    assert "--add-opens=java.base/java.math=ALL-UNNAMED" in opens and len(opens) == 7
    agents = [o for o in options if o.startswith("-javaagent:")]
    assert len(agents) == (1 if major >= 15 else 0)
    for agent in agents:
        assert Path(agent.partition(":")[2]).is_file()


def test_new_candidates_are_new_texts_for_the_same_images(tmp_path: Path) -> None:
    import json

    import bench_whole_table as bench

    if not (bench.FLICKR / "Flickr8k.token.txt").is_file():
        pytest.skip("no Flickr8k captions")
    annotations, results, n = bench.coco_files(tmp_path, 30)
    assert n == 150
    old = json.loads(results.read_text())
    new = json.loads((tmp_path / bench.NEW_RESULTS).read_text())
    assert [r["image_id"] for r in new] == [r["image_id"] for r in old] == list(range(30))
    refs = {a["caption"] for a in json.loads(annotations.read_text())["annotations"]}
    for before, after in zip(old, new):
        assert after["caption"] and after["caption"] != before["caption"]
        assert before["caption"].endswith(after["caption"])  # the caption less its first word
        assert after["caption"] not in refs
