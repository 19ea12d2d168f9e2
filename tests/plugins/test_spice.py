"""SPICE: the jar's command lines on Java 17, the per-caption parse cache, the sharded parser (a
killed JVM retried, a failing caption named, an interrupted run leaving no JVM), only new
captions parsed, the parser server (a stand-in: answered, dropped, another version, stale),
output parsing, registration, and (when ``capmetrics setup spice`` has run) 40 Flickr8k-Expert
items + 2 edge cases, parsed cold, against pycocoevalcap's own flow with the original jar
(tests/data/spice/expert40.json), then warm without a JVM; the helper's quick start against the
jar's own start; the real parser server."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from capmetrics.errors import MetricError
from capmetrics.plugins import spice
from capmetrics.plugins.spice import _jar, _parse, _resources
from capmetrics.plugins.spice._graph import CATEGORIES, FIELDS
from capmetrics.plugins.spice._jar import details_arrays, scores_by_id, to_row
from capmetrics.plugins.spice._parse_cache import ParseCache
from capmetrics.plugins.tokenizers import PTBTokenizer

from tests.plugins.spice_servers import FakeServer, words

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "spice" / "expert40.json"


def _ready() -> str | None:
    try:
        problems = _resources.check()
    except MetricError as err:
        return str(err)
    return "; ".join(map(str, problems)) or None


needs_spice = pytest.mark.skipif(_ready() is not None, reason=f"SPICE is not set up: {_ready()}")


@pytest.fixture
def java17(monkeypatch):  # type: ignore[no-untyped-def]
    java = shutil.which("java") or "/usr/bin/java"
    monkeypatch.setattr(_resources, "java_version", lambda path: "17.0.15")
    return java


def test_command_line_runs_on_java_17(tmp_path, monkeypatch, java17) -> None:  # type: ignore[no-untyped-def]
    if shutil.which("java") is None or not __import__("importlib").util.find_spec("pycocoevalcap"):
        pytest.skip("needs java and pycocoevalcap")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    js = tmp_path / "cache" / "capmetrics" / "spice" / "js"
    js.mkdir(parents=True)
    (js / "rhino.jar").write_bytes(b"")
    corenlp = [tmp_path / name for name in _resources.CORENLP_JARS]
    cmd = _jar.command(java17, corenlp, "8G", "/tmp/x/in.json", "/tmp/x/out.json")
    assert cmd[:2] == [java17, "-Xmx8G"] and "-jar" not in cmd and "-Duser.language=en" in cmd
    assert [c for c in cmd if c.startswith("--add-opens")] == [
        f"--add-opens=java.base/{p}=ALL-UNNAMED"
        for p in (
            "java.lang",
            "java.util",
            "java.math",
            "java.util.concurrent",
            "java.net",
            "java.text",
            "java.io",
        )
    ]
    cp = cmd[cmd.index("-cp") + 1].split(os.pathsep)
    lib = _resources.spice_dir() / "lib"
    assert cp[:3] == [str(_resources.spice_dir() / "spice-1.0.jar"), *map(str, corenlp)]
    assert set(cp[3:-1]) == {str(p) for p in lib.glob("*.jar")} and cp[-1] == str(js / "rhino.jar")
    assert cmd[cmd.index("-cp") + 2 :] == [
        "edu.anu.spice.SpiceScorer",
        "/tmp/x/in.json",
        "-cache",
        str(tmp_path / "cache" / "capmetrics" / "spice" / "parses"),
        "-out",
        "/tmp/x/out.json",
        "-subset",
        "-silent",
    ]


def test_java_8_needs_no_opens_nor_js_engine(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(_resources, "java_version", lambda path: "1.8.0_392")
    monkeypatch.setattr(_resources, "find_js_engine", list)
    assert _resources.java_options("java") == [] and _resources.runtime_jars("java") == []
    assert [_resources.java_major(v) for v in ("1.8.0_392", "11", "17.0.15", "25.0.2")] == [
        8,
        11,
        17,
        25,
    ]


def test_missing_js_engine_is_one_line_with_the_fix(monkeypatch, java17) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(_resources, "find_js_engine", list)
    with pytest.raises(MetricError) as info:
        _resources.runtime_jars(java17)
    message = str(info.value)
    assert "\n" not in message and "JavaScript engine" in message and "17.0.15" in message
    assert "apt-get install librhino-java" in message and "capmetrics setup spice --js" in message


def test_missing_corenlp_names_folders_and_setup_command(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("CAPMETRICS_CORENLP_DIR", raising=False)
    monkeypatch.setattr(_resources, "spice_dir", lambda: tmp_path / "pycocoevalcap")
    with pytest.raises(MetricError) as info:
        spice.Spice().command("in.json", "out.json")
    message = str(info.value)
    assert (
        "\n" not in message
        and "CoreNLP 3.6.0" in message
        and "fix: run `capmetrics setup spice`" in message
    )
    assert (
        str(tmp_path / "capmetrics" / "spice" / "corenlp" / "stanford-corenlp-3.6.0.jar") in message
    )


def test_corenlp_location_order_and_size_check(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(_resources, "CORENLP_JARS", {"a.jar": (3, "x"), "b.jar": (1, "y")})
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "a.jar").write_bytes(b"abc")
    (folder / "b.jar").write_bytes(b"b")
    assert _resources.find_corenlp(str(folder)) == [folder / "a.jar", folder / "b.jar"]
    monkeypatch.setenv("CAPMETRICS_CORENLP_DIR", str(folder))
    assert _resources.corenlp_folders(None)[:2] == [folder, _resources.corenlp_home()]
    (folder / "a.jar").write_bytes(b"ab")  # truncated
    with pytest.raises(MetricError, match="has 2 bytes, not 3"):
        _resources.find_corenlp(str(folder))


def test_cache_dirs_default_outside_site_packages(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert _resources.cache_root() == Path.home() / ".cache" / "capmetrics" / "spice"
    assert _jar.parse_cache_dir() == _resources.cache_root() / "parses"


def _scores(f_all: object, f_object: object = 0.5) -> dict:
    stats = lambda f: {"pr": 0.5, "re": 0.5, "f": f, "fn": 1, "numImages": 1, "fp": 1, "tp": 1}
    cats = {c: stats(0.0) for c in CATEGORIES}
    cats.update(All=stats(f_all), Object=stats(f_object), Size=stats(None))
    return cats


def test_output_parsing_and_details() -> None:
    # the jar's output format, items out of order as they may come back
    results = [
        {"image_id": 1, "scores": _scores(0.25, 1.0)},
        {"image_id": 0, "scores": _scores(0.5, 0.4)},
    ]
    per_item = scores_by_id(results, 2)
    details = details_arrays(np.stack([to_row(s) for s in per_item]))
    assert list(details) == list(CATEGORIES) and all(
        list(d) == list(FIELDS) for d in details.values()
    )
    np.testing.assert_array_equal(details["All"]["f"], [0.5, 0.25])
    np.testing.assert_array_equal(details["Object"]["f"], [0.4, 1.0])
    assert np.isnan(details["Size"]["f"]).all() and (details["Size"]["tp"] == 1).all()
    with pytest.raises(MetricError, match=r"no scores for item\(s\) \[2\]"):
        scores_by_id(results, 3)


def test_parse_cache_round_trip_and_corrupt_rows(tmp_path) -> None:  # type: ignore[no-untyped-def]
    store = ParseCache(tmp_path / "p.sqlite", "v1")
    entries = {
        "a dog": {"tuples": [["dog"]], "synsets": {"dog": [1, 2]}},
        "a red car": {"tuples": [["car", "red"], ["car"]], "synsets": {"car": [3], "red": []}},
        "": {"tuples": [], "synsets": {}},
    }
    store.put_many(entries)
    assert store.get_many(["absent", "a dog", "a red car", ""]) == entries
    assert (
        ParseCache(tmp_path / "p.sqlite", "v2").get_many(["a dog"]) == {}
    )  # another parser version
    assert store.get_many(["a dog "]) == {}  # the exact text is the key
    with sqlite3.connect(tmp_path / "p.sqlite") as db:  # change one byte behind the cache's back
        value = next(v for (v,) in db.execute("SELECT value FROM parses") if b"dog" in v)
        db.execute(
            "UPDATE parses SET value = ? WHERE value = ?", (value.replace(b"dog", b"cat"), value)
        )
    assert sorted(store.get_many(entries)) == ["", "a red car"]  # the corrupt entry is not used ...
    with sqlite3.connect(tmp_path / "p.sqlite") as db:  # ... and was deleted, to be parsed again
        assert db.execute("SELECT count(*) FROM parses").fetchone()[0] == 2
    with pytest.raises(
        ValueError, match="the cache entry of 'x' is not tuples of 1-3 words and synsets"
    ):
        store.put_many({"x": {"tuples": [["a", "b", "c", "d"]], "synsets": {}}})


def _fake_parser(tmp_path: Path, monkeypatch) -> list[list[str]]:  # type: ignore[no-untyped-def]
    """Stands in for the jar's parser: every word of a caption is an object."""
    sent: list[list[str]] = []

    def fake(texts, command_for, jobs, timeout, store, retry_command_for=None, stop=None):  # type: ignore[no-untyped-def]
        sent.append(list(texts))
        parsed = {t: [[w] for w in t.split()] for t in texts}
        store(parsed)
        return parsed

    monkeypatch.setattr(spice, "parse_captions", fake)
    monkeypatch.setattr(spice, "find_java", lambda java=None: "java")
    monkeypatch.setattr(spice, "find_corenlp", lambda corenlp=None: [])
    return sent


def test_only_new_captions_are_parsed(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(
        spice, "_synsets_of", lambda parse: {k: [] for k in spice.synset_keys(parse)}
    )
    sent = _fake_parser(tmp_path, monkeypatch)
    metric = spice.Spice()
    first = metric.score(["A dog.", "a cat", "A dog."], [["a dog runs"], ["a cat"], ["a dog runs"]])
    assert sent == [["a dog", "a cat", "a dog runs"]]  # tokenized, each distinct caption once
    np.testing.assert_allclose(
        first.values, [0.8, 1.0, 0.8]
    )  # {a, dog} vs {a, dog, runs}: P 1, R 2/3
    second = metric.score(["a dog", "a bird"], [["a cat"], ["a dog runs"]])
    assert sent[1] == ["a bird"]  # known captions in new combinations are not parsed again
    np.testing.assert_allclose(second.values, [0.5, 0.4])
    assert second.corpus == pytest.approx(0.45)
    metric.score(["a cat"], [["a dog runs", "a bird"]])
    assert len(sent) == 2  # all cached: no parser run
    spice.Spice(cache=False).score(["a cat"], [["a dog"]])
    assert sent[2] == ["a cat", "a dog"]


def _fake_helper(tmp_path: Path, body: str) -> str:
    script = tmp_path / "helper.py"
    script.write_text(
        "import json, os, sys\n"
        "texts = json.load(open(sys.argv[1]))\n"
        "out = open(sys.argv[2], 'w')\n" + body + "\n"
    )
    return str(script)


def test_a_killed_parser_is_retried_and_no_caption_is_missing(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import sys

    runs = tmp_path / "runs"
    # Each run writes the first two captions it was given, then (first two runs) dies as if killed
    # mid-line, else finishes; two JVMs side by side.
    helper = _fake_helper(
        tmp_path,
        f"""
open({str(runs)!r}, 'a').write('x')
for i, t in enumerate(texts):
    if i == 2 and len(open({str(runs)!r}).read()) <= 2:
        out.write('{{"i": 2, "t": [[');
        out.flush()
        os.kill(os.getpid(), 9)
    out.write(json.dumps({{"i": i, "t": [[w] for w in t.split()]}}) + "\\n")
""",
    )
    texts = [f"caption {n}" for n in range(7)]
    stored: list[dict] = []
    found = _parse.parse_captions(
        texts, lambda threads, i, o: [sys.executable, helper, str(i), str(o)], 2, 60, stored.append
    )
    assert found == {t: [[w] for w in t.split()] for t in texts}
    assert sorted(t for part in stored for t in part) == sorted(
        texts
    )  # stored as each shard came back
    assert runs.read_text() == "xxxx"  # two shards, each killed once and run again on what was left


def test_an_interrupted_run_leaves_no_parser_running(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import signal
    import sys
    import time

    pids = tmp_path / "pids"
    helper = _fake_helper(
        tmp_path,
        f"open({str(pids)!r}, 'a').write(str(os.getpid()) + '\\n')\nimport time; time.sleep(60)",
    )

    def interrupt(signum, frame):  # type: ignore[no-untyped-def]
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 1.5)
    started = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            _parse.parse_captions(
                ["a", "b"],
                lambda threads, i, o: [sys.executable, helper, str(i), str(o)],
                2,
                60,
                lambda parsed: None,
            )
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert time.monotonic() - started < 30
    running = [int(p) for p in pids.read_text().split()]
    assert len(running) == 2
    for pid in running:  # both parsers were killed and reaped
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_a_parser_that_keeps_failing_names_the_caption_and_item(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import sys

    helper = _fake_helper(tmp_path, "sys.stderr.write('Exception: cannot parse\\n'); sys.exit(1)")
    monkeypatch.setattr(
        spice,
        "parse_command",
        lambda java, corenlp, memory, threads, i, o: [sys.executable, helper, str(i), str(o)],
    )
    monkeypatch.setattr(spice, "find_java", lambda java=None: "java")
    monkeypatch.setattr(spice, "find_corenlp", lambda corenlp=None: [])
    with pytest.raises(MetricError) as info:
        spice.Spice(cache=False, jobs=1).score(["a dog", "a cat"], [["a cat"], ["a cat"]])
    message = str(info.value)
    assert (
        "\n" not in message and "the parser failed 3 times" in message and "exit code 1" in message
    )
    assert "first caption not parsed: 'a dog'" in message and "Exception: cannot parse" in message
    assert message.endswith("(in item(s) [0, 1])")


def test_parameters_and_registration() -> None:
    s = spice.Spice()
    assert isinstance(s.tokenizer, PTBTokenizer) and s.spec == "spice" and s.distance_offset == 1.0
    names: list[str] = []
    spice.register_distances(lambda cls, aliases=(): names.append(cls.name))
    assert names == ["spice"]
    from capmetrics.registry import compose

    assert isinstance(compose("spice"), spice.Spice)
    assert compose("spice(category=Object, part=r)").category == "object"
    with pytest.raises(
        MetricError, match="unknown category 'objects'; one of all, object, attribute"
    ):
        spice.Spice(category="objects")
    with pytest.raises(MetricError, match="part must be f, p or r, got 'x'"):
        spice.Spice(part="x")  # type: ignore[arg-type]
    with pytest.raises(
        MetricError, match="spice: memory must be a JVM heap size such as 2G or 512m, got '8 GB'"
    ):
        spice.Spice(memory="8 GB")
    assert spice.Spice(memory="512m").memory == "512m"


def test_server_start_refuses_bad_threads_and_memory_before_starting_java(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from capmetrics.plugins.spice import _cli, _server
    from typer.testing import CliRunner

    monkeypatch.setattr(_server, "start", lambda *a, **k: pytest.fail("a server was started"))
    for args, message in (
        (["--threads", "0"], "--threads must be at least 1, got 0"),
        (
            ["--memory", "lots"],
            "spice-server: memory must be a JVM heap size such as 2G or 512m, got 'lots'",
        ),
    ):
        run = CliRunner().invoke(_cli.server_app, ["start", *args])
        assert run.exit_code != 0 and message in run.output, run.output


def test_bad_input() -> None:
    with pytest.raises(MetricError, match="2 candidates but 1"):
        spice.Spice().score(["a", "b"], [["a"]])
    with pytest.raises(MetricError, match=r"item\(s\) \[0\]"):
        spice.Spice().score(["a"], [[]])


@needs_spice
def test_expert40_equals_pycocoevalcap_and_warm_run_starts_no_jvm(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    fixture = json.loads(FIXTURE.read_text(encoding="utf-8"))
    corenlp = str(_resources.find_corenlp()[0].parent)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # a cold cache
    cands = [it["candidate"] for it in fixture["items"]]
    refs = [it["references"] for it in fixture["items"]]
    ours = spice.Spice(corenlp=corenlp).score(cands, refs)
    for category in CATEGORIES:
        for field in FIELDS:
            expected = [
                float("nan")
                if it["scores"][category][field] is None
                else it["scores"][category][field]
                for it in fixture["items"]
            ]
            np.testing.assert_allclose(
                ours.details[category][field],
                expected,
                rtol=0,
                atol=1e-12,
                err_msg=f"{category}.{field}",
            )
    np.testing.assert_allclose(ours.values, ours.details["All"]["f"], rtol=0, atol=0)
    assert ours.corpus == pytest.approx(fixture["average"], abs=1e-12)
    assert ours.values[-2:].tolist() == [0.0, 0.0]  # empty and punctuation-only candidates

    assert ours.details["ties"].tolist() == [0] * len(cands)

    def no_java(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("the warm run started a JVM")

    monkeypatch.setattr(spice, "parse_captions", no_java)
    warm = spice.Spice(corenlp=corenlp).score(cands, refs)
    np.testing.assert_array_equal(warm.values, ours.values)
    # category and part pick one category's precision, recall or F (NaN where it has no tuples)
    for category, part, field in (
        ("object", "p", "pr"),
        ("relation", "r", "re"),
        ("size", "f", "f"),
        ("all", "p", "pr"),
    ):
        other = spice.Spice(corenlp=corenlp, category=category, part=part).score(cands, refs)
        expected = np.array(
            [
                np.nan
                if it["scores"][category.capitalize()][field] is None
                else it["scores"][category.capitalize()][field]
                for it in fixture["items"]
            ],
            dtype=float,
        )
        np.testing.assert_allclose(
            other.values, expected, rtol=0, atol=1e-12, err_msg=f"{category}.{part}"
        )
        known = expected[~np.isnan(expected)]
        assert (
            other.corpus == pytest.approx(known.mean(), abs=1e-12)
            if known.size
            else np.isnan(other.corpus)
        )


def test_no_parse_cache_where_lmdbjni_has_no_native_library(monkeypatch, java17) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(_jar.platform, "machine", lambda: "arm64")
    monkeypatch.setattr(_resources, "find_js_engine", lambda: [Path("/js.jar")])
    monkeypatch.setattr(_jar, "classpath", lambda corenlp, extra: "cp")
    cmd = _jar.command(java17, [], "8G", "in.json", "out.json")
    assert "-cache" not in cmd and cmd[-5:] == ["in.json", "-out", "out.json", "-subset", "-silent"]


def _fake_java(tmp_path: Path, body: str) -> str:
    script = tmp_path / "java"
    script.write_text("#!/bin/sh\n" + body + "\n")
    script.chmod(0o755)
    return str(script)


def test_jvm_killed_mid_run_is_retried_and_failures_named(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    counter = tmp_path / "runs"
    # first run: killed by SIGKILL; second: writes the output file (argument 2 after in.json)
    java = _fake_java(
        tmp_path,
        f"echo x >> {counter}; [ $(wc -l < {counter}) -ge 2 ] || kill -9 $$; "
        'echo \'[{"image_id": 0, "scores": {}}]\' > "$4"',
    )
    cmd_for = lambda i, o: [java, i, "-cache", o, o]
    assert _jar.run_jar(cmd_for, [{"image_id": 0, "test": "a", "refs": ["b"]}], 30) == [
        {"image_id": 0, "scores": {}}
    ]
    assert counter.read_text().count("x") == 2
    failing = _fake_java(tmp_path, 'echo "Exception in thread main: boom" >&2; exit 1')
    with pytest.raises(
        MetricError, match=r"exit code 1, 1 items, 1 attempt\(s\)\): Exception in thread main: boom"
    ):
        _jar.run_jar(lambda i, o: [failing], [{"image_id": 0, "test": "a", "refs": ["b"]}], 30)


def test_check_names_each_missing_resource(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(
        _resources, "find_java", lambda java=None: (_ for _ in ()).throw(MetricError("no java"))
    )
    assert [p.what for p in _resources.check(corenlp=str(tmp_path))][
        -1
    ] == "spice needs a Java runtime (8 or newer)"
    monkeypatch.setattr(_resources, "find_java", lambda java=None: "/usr/bin/java")
    monkeypatch.setattr(_resources, "java_version", lambda path: "21.0.1")
    monkeypatch.setattr(_resources, "find_js_engine", list)
    assert not any(
        "JavaScript" in p.what for p in _resources.check(corenlp=str(tmp_path))
    )  # spice needs none
    last = _resources.check(corenlp=str(tmp_path), original_jar=True)[-1]
    assert "JavaScript engine" in last.what and "librhino-java" in last.fix
    monkeypatch.setattr(_resources, "java_version", lambda path: "11.0.2")
    assert not any(
        "JavaScript" in p.what for p in _resources.check(corenlp=str(tmp_path), original_jar=True)
    )


def test_drop_in_sees_spice_without_a_javascript_engine(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from capmetrics.integrations import pycocoevalcap as compat

    monkeypatch.setattr(_resources, "find_js_engine", list)
    monkeypatch.setattr(spice, "spice_dir", lambda: tmp_path)
    monkeypatch.setattr(spice, "find_java", lambda java=None: "java")
    monkeypatch.setattr(spice, "find_corenlp", lambda corenlp=None: [])
    assert compat.spice_available()

    def missing(corenlp=None):  # type: ignore[no-untyped-def]
        raise MetricError("spice needs Stanford CoreNLP 3.6.0")

    monkeypatch.setattr(spice, "find_corenlp", missing)
    assert not compat.spice_available()


#: Captions with what CoreNLP's NER tags (names, places, dates, times, numbers, money, ordinals)
#: and what SPICE's patterns look at (pronouns, plurals, quantities, possessives, passives).
NER_CAPTIONS = [
    "john and mary walk their two dogs in new york city on a sunny monday morning .",
    "a man in a red shirt is holding 3 balloons at 5 pm on july 4th , 2010 .",
    "the first of three boys jumps while his friend watches him .",
    "a woman who is wearing a $ 20 hat sits on a bench in central park .",
    "several people are being pulled by a boat on lake tahoe .",
    "a dog named max is catching a frisbee thrown by its owner .",
    "two young girls are playing with dozens of toys in the 1990s .",
    "it is raining and they are standing under an umbrella near the eiffel tower .",
]


def _parse_ner_captions(jar_start: bool) -> dict:
    java, corenlp = _resources.find_java(), _resources.find_corenlp()
    return _parse.parse_captions(
        NER_CAPTIONS,
        lambda threads, i, o: _parse.parse_command(java, corenlp, "3G", threads, i, o, jar_start),
        1,
        600,
        lambda parsed: None,
    )


@pytest.fixture(scope="module")
def quick_tuples() -> dict:
    """NER_CAPTIONS parsed by the helper's quick start on one JVM (~9 s), shared by the tests
    that compare other starts with it."""
    return _parse_ner_captions(jar_start=False)


@needs_spice
def test_the_helpers_quick_start_gives_the_jars_tuples(quick_tuples: dict) -> None:
    """The helper's start (no NER, no synonym tables) against the jar's own start, on one JVM
    each."""
    quick, jar = quick_tuples, _parse_ner_captions(jar_start=True)
    assert set(quick) == set(NER_CAPTIONS)
    for caption in NER_CAPTIONS:
        assert quick[caption] == jar[caption], caption
    assert ["max", "frisbee", "catch"] in jar[NER_CAPTIONS[5]]  # real tuples, not empty lists


def test_a_running_server_parses_and_the_run_parses_what_it_did_not(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from capmetrics.plugins.spice import _server

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(
        spice, "_synsets_of", lambda parse: {k: [] for k in spice.synset_keys(parse)}
    )
    sent = _fake_parser(tmp_path, monkeypatch)
    version = _server.server_version(spice.PARSER_VERSION)
    cands, refs = ["a dog", "a cat", "a bird"], [["a dog runs"], ["a cat"], ["a bird flies"]]
    alone = spice.Spice(cache=False, server=False).score(cands, refs)
    assert len(sent) == 1

    whole = FakeServer(version)
    whole.register()
    assert _server.running(version) is not None
    served = spice.Spice(cache=False).score(cands, refs)
    assert whole.requests == [sent[0]] and len(sent) == 1  # the server parsed everything: no JVM
    assert served.values.tobytes() == alone.values.tobytes()

    part = FakeServer(
        version, answer=lambda texts: words(texts)[:2], done=False
    )  # drops the connection
    part.register()
    dropped = spice.Spice(cache=False).score(cands, refs)
    assert sent[1] == sent[0][2:]  # the run's own JVM parsed the rest
    assert dropped.values.tobytes() == alone.values.tobytes()

    other = FakeServer("another capmetrics")  # a server of another parser version is not used
    other.register()
    spice.Spice(cache=False).score(cands, refs)
    assert other.requests == [] and len(sent) == 3
    whole.register()
    spice.Spice(cache=False, server=False).score(cands, refs)
    assert len(whole.requests) == 1 and len(sent) == 4
    _server.info_path().write_text(
        json.dumps({"port": 1, "token": "x", "pid": 1, "version": version})
    )
    spice.Spice(cache=False).score(cands, refs)  # a stale address: the run parses on its own
    assert len(sent) == 5
    assert not _server.stop() and not _server.info_path().exists()  # stop removes a stale file


@needs_spice
def test_the_parser_server_gives_the_helpers_tuples_and_stops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, quick_tuples: dict
) -> None:
    import time

    from capmetrics.plugins.spice import _server

    java, corenlp = _resources.find_java(), _resources.find_corenlp()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    version = _server.server_version(spice.PARSER_VERSION)
    info = _server.start(java, corenlp, "3G", 1, version, idle=120)
    try:
        assert _server.start(java, corenlp, "3G", 1, version).pid == info.pid  # the running one
        assert (_server.info_path().stat().st_mode & 0o077) == 0  # owner-only
        chunks: list[dict] = []
        served = _server.parse(info, NER_CAPTIONS, chunks.append, 300)
        assert served == quick_tuples and sum(map(len, chunks)) == len(NER_CAPTIONS)
    finally:
        assert _server.stop()

    def alive(pid: int) -> bool:  # an exited process not yet reaped by its parent (a zombie) is not
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"

    def gone(pid: int) -> bool:
        for _ in range(200):
            if not alive(pid):
                break
            time.sleep(0.1)
        return not alive(pid) and not _server.info_path().exists()

    assert gone(info.pid)
    idle = _server.start(
        java, corenlp, "3G", 1, version, idle=1
    )  # exits after 1 s without a client
    assert gone(idle.pid)


def test_parsing_reports_captions_parsed_as_they_come(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Progress counts captions parsed (issue 27), read from the parsers' output as it grows."""
    import sys

    from capmetrics.engine.progress import reporting

    helper = _fake_helper(
        tmp_path,
        """
import time
for i, t in enumerate(texts):
    out.write(json.dumps({"i": i, "t": [[w] for w in t.split()]}) + "\\n")
    out.flush()
    time.sleep(0.1)
""",
    )

    class Counter:
        def __init__(self) -> None:
            self.events: list[tuple] = []

        def start(self, total: int, unit: str) -> None:
            self.events.append(("start", total, unit))

        def advance(self, n: int) -> None:
            self.events.append(("advance", n))

        def end(self) -> None:
            self.events.append(("end",))

    texts = [f"caption {n}" for n in range(8)]
    counter = Counter()
    with reporting(counter):
        found = _parse.parse_captions(
            texts,
            lambda threads, i, o: [sys.executable, helper, str(i), str(o)],
            2,
            60,
            lambda parsed: None,
        )
    assert len(found) == 8
    assert counter.events[0] == ("start", 8, "captions parsed") and counter.events[-1] == ("end",)
    steps = [e[1] for e in counter.events if e[0] == "advance"]
    assert sum(steps) == 8 and len(steps) > 1  # several advances, not one at the end
