"""SPICE: the missing-CoreNLP message (real: the jars are absent here), the command line and
classpath, parsing of the jar's JSON output, and registration."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from capmetrics.errors import MetricError
from capmetrics.plugins import spice
from capmetrics.plugins.spice import CORENLP_JARS, Spice, cache_dir, find_corenlp, parse_output
from capmetrics.plugins.tokenizers import PTBTokenizer

needs_pycocoevalcap = pytest.mark.skipif(
    not (Path(spice.__file__).exists() and __import__("importlib").util.find_spec("pycocoevalcap")),
    reason="needs pycocoevalcap",
)


def _corenlp_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "corenlp"
    folder.mkdir()
    for name in CORENLP_JARS:
        (folder / name).write_bytes(b"")
    return folder


@needs_pycocoevalcap
def test_missing_corenlp_says_what_to_download(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("CAPMETRICS_CORENLP_DIR", raising=False)
    if all((spice.spice_dir() / "lib" / name).is_file() for name in CORENLP_JARS):
        pytest.skip("CoreNLP 3.6.0 is installed next to the SPICE jar")
    with pytest.raises(MetricError) as info:
        Spice().score(["a dog"], [["a dog runs"]])
    message = str(info.value)
    assert "stanford-corenlp-full-2015-12-09.zip" in message and "nlp.stanford.edu" in message
    assert (
        "stanford-corenlp-3.6.0.jar" in message and "stanford-corenlp-3.6.0-models.jar" in message
    )
    assert "CAPMETRICS_CORENLP_DIR" in message and "corenlp=" in message


@needs_pycocoevalcap
def test_corenlp_location_order(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    folder = _corenlp_folder(tmp_path)
    assert find_corenlp(str(folder)) == [folder / name for name in CORENLP_JARS]
    monkeypatch.setenv("CAPMETRICS_CORENLP_DIR", str(folder))
    assert find_corenlp(None)[0].parent == folder
    with pytest.raises(MetricError, match=str(tmp_path / "elsewhere")):
        find_corenlp(str(tmp_path / "elsewhere"))


@needs_pycocoevalcap
def test_command_line_and_classpath(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    folder = _corenlp_folder(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    java = shutil.which("java") or "/usr/bin/java"
    monkeypatch.setattr(spice, "find_java", lambda path=None: java)
    cmd = Spice(corenlp=str(folder)).command("/tmp/x/in.json", "/tmp/x/out.json")
    assert cmd[0] == java and "-Xmx8G" in cmd and "-Duser.language=en" in cmd and "-jar" not in cmd
    cp = cmd[cmd.index("-cp") + 1].split(os.pathsep)
    lib = spice.spice_dir() / "lib"
    assert cp[:3] == [
        str(spice.spice_dir() / "spice-1.0.jar"),
        *(str(folder / n) for n in CORENLP_JARS),
    ]
    assert set(cp[3:]) == {str(p) for p in lib.glob("*.jar")} and str(lib / "Meteor-1.5.jar") in cp
    assert cmd[cmd.index("-cp") + 2 :] == [
        "edu.anu.spice.SpiceScorer",
        "/tmp/x/in.json",
        "-cache",
        str(tmp_path / "cache" / "capmetrics" / "spice"),
        "-out",
        "/tmp/x/out.json",
        "-subset",
        "-silent",
    ]
    assert not str(cache_dir()).startswith(str(spice.spice_dir().parent))


def test_cache_dir_default(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert cache_dir() == Path.home() / ".cache" / "capmetrics" / "spice"


def _entry(image_id: int, f_all: object, f_object: object) -> dict:
    stats = lambda f: {
        "pr": 0.5,
        "re": 0.5,
        "f": f,
        "fn": 1.0,
        "numImages": 1.0,
        "fp": 1.0,
        "tp": 1.0,
    }
    return {
        "image_id": image_id,
        "scores": {
            "All": stats(f_all),
            "Relation": stats("NaN"),
            "Cardinality": stats(None),
            "Attribute": stats(0.0),
            "Color": stats(0.0),
            "Object": stats(f_object),
            "Size": stats(0.0),
        },
        "test_tuples": [{"tuple": ["dog"], "truth_value": True}],
        "ref_tuples": [
            {"tuple": ["dog"], "truth_value": True},
            {"tuple": ["dog", "run"], "truth_value": False},
        ],
    }


def test_parse_output() -> None:
    # the jar's output format (SPICE README), items out of order as they may come back
    text = json.dumps([_entry(1, 0.25, 1.0), _entry(0, 0.5, 0.4), _entry(2, 0.0, 0.0)])
    scores = parse_output(json.loads(text), 3)
    np.testing.assert_array_equal(scores.values, [0.5, 0.25, 0.0])
    assert scores.corpus == pytest.approx(0.25)
    cats = scores.details["categories"]
    assert next(iter(cats)) == "All" and set(cats) == {
        "All",
        "Relation",
        "Cardinality",
        "Attribute",
        "Color",
        "Object",
        "Size",
    }
    np.testing.assert_array_equal(cats["Object"], [0.4, 1.0, 0.0])
    assert np.isnan(cats["Relation"]).all() and np.isnan(cats["Cardinality"]).all()


def test_parse_output_nan_and_missing() -> None:
    scores = parse_output([_entry(0, "NaN", 0.0), _entry(1, 1.0, 1.0)], 2)
    assert np.isnan(scores.values[0]) and np.isnan(scores.corpus)  # as coco-caption's np.mean
    with pytest.raises(MetricError, match=r"no scores for item\(s\) \[1\]"):
        parse_output([_entry(0, 1.0, 1.0)], 2)


def test_parameters_and_registration() -> None:
    s = Spice()
    assert isinstance(s.tokenizer, PTBTokenizer) and s.spec == "spice" and s.distance_offset == 1.0
    names: list[str] = []
    spice.register_distances(lambda cls, aliases=(): names.append(cls.name))
    assert names == ["spice"]
    from capmetrics.registry import compose

    assert isinstance(compose("spice"), Spice)


def test_bad_input() -> None:
    with pytest.raises(MetricError, match="2 candidates but 1"):
        Spice().score(["a", "b"], [["a"]])
    with pytest.raises(MetricError, match=r"item\(s\) \[0\]"):
        Spice().score(["a"], [[]])
