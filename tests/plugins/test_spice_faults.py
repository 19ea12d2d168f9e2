"""SPICE under faults (issue 26): a parse cache that is truncated, corrupt, foreign or unusable
heals or is skipped, never blocks a run; cache files are owner-only from the start; a stale
address file whose port an impostor holds gives the right values and a one-line warning, sends
it nothing and poisons no cache; a verified server's malformed answers are never stored; the real
server bounds and times out unauthenticated clients while serving others; a killed or terminated
run leaves no JVM and no temporary folder."""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from capmetrics.plugins import spice
from capmetrics.plugins.spice import _parse, _resources, _server
from capmetrics.plugins.spice._parse_cache import APPLICATION_ID, ParseCache

from tests.plugins.spice_servers import FakeServer, Impostor, words
from tests.plugins.test_spice import FIXTURE, _fake_parser, needs_spice

ENTRY = {"tuples": [["dog"], ["dog", "brown"]], "synsets": {"dog": [1, 2], "brown": [3]}}


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    try:  # the installed CoreNLP stays found in the empty cache
        monkeypatch.setenv("CAPMETRICS_CORENLP_DIR", str(_resources.find_corenlp()[0].parent))
    except Exception:
        pass
    from capmetrics.io.cache import cache_root

    meteor = cache_root() / "meteor"
    (tmp_path / "cache").mkdir()
    if (
        meteor.is_dir()
    ):  # METEOR's synonym tables (SPICE's synsets) stay built: this is about SPICE's cache
        (tmp_path / "cache" / "meteor").symlink_to(meteor)
    monkeypatch.setenv("CAPMETRICS_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "spice"


def _filled(path: Path, n: int = 3000) -> ParseCache:
    store = ParseCache(path, "v1")
    store.put_many({f"caption number {i} of a brown dog": ENTRY for i in range(n)})
    return store


def _healed(store: ParseCache, capsys) -> str:  # type: ignore[no-untyped-def]
    """Asserts that a lookup found nothing, moved the file aside with one warning line, and that
    the new cache works; returns the warning."""
    assert store.get_many(["caption number 1 of a brown dog"]) == {}
    warning = capsys.readouterr().err
    assert warning.count("\n") == 1 and warning.startswith(
        "capmetrics: warning: spice: the parse cache"
    )
    assert "moved it to parses.sqlite.corrupt-" in warning
    assert len(list(store.path.parent.glob("parses.sqlite.corrupt-*"))) == 1
    store.put_many({"a dog": ENTRY})
    assert store.get_many(["a dog"]) == {"a dog": ENTRY}
    assert capsys.readouterr().err == ""
    return warning


def test_the_spice_cache_folder_follows_capmetrics_cache_dir(cache_dir, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    assert _resources.cache_root() == cache_dir == spice.parse_cache().path.parent
    assert _server.info_path() == cache_dir / "parser-server.json"
    monkeypatch.delenv("CAPMETRICS_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", "/xdg")
    assert _resources.cache_root() == Path("/xdg/capmetrics/spice")


def test_a_truncated_cache_is_moved_aside_and_rebuilt(cache_dir, capsys) -> None:  # type: ignore[no-untyped-def]
    path = cache_dir / "parses.sqlite"
    _filled(path)
    assert path.stat().st_size > 200_000
    os.truncate(path, 110_000)  # truncate -s 110000
    assert "truncated" in _healed(ParseCache(path, "v1"), capsys)


def test_a_cache_with_a_damaged_page_heals_on_the_query_that_meets_it(cache_dir, capsys) -> None:  # type: ignore[no-untyped-def]
    path = cache_dir / "parses.sqlite"
    _filled(path)
    with open(path, "r+b") as handle:  # overwrite every page after the first few (header intact)
        handle.seek(4096 * 3)
        handle.write(b"\xff" * (path.stat().st_size - 4096 * 3))
    store = ParseCache(path, "v1")
    assert store.get_many([f"caption number {i} of a brown dog" for i in range(3000)]) == {}
    warning = capsys.readouterr().err
    assert warning.count("\n") == 1 and "malformed" in warning
    store.put_many({"a dog": ENTRY})
    assert store.get_many(["a dog"]) == {"a dog": ENTRY}


@pytest.mark.parametrize("content", ["text", "foreign", "other id"])
def test_a_file_that_is_not_a_parse_cache_is_moved_aside(cache_dir, capsys, content) -> None:  # type: ignore[no-untyped-def]
    path = cache_dir / "parses.sqlite"
    cache_dir.mkdir(parents=True)
    if content == "text":
        path.write_text("not a database at all\n" * 1000)
    else:
        with sqlite3.connect(path) as db:  # another program's database (or another id) at that name
            db.execute(
                "CREATE TABLE notes (x TEXT)"
                if content == "foreign"
                else (
                    "CREATE TABLE parses (key TEXT PRIMARY KEY, value BLOB NOT NULL, "
                    "sha256 TEXT NOT NULL)"
                )
            )
            if content == "other id":
                db.execute("PRAGMA application_id = 7")
    warning = _healed(ParseCache(path, "v1"), capsys)
    assert (
        ("not a database" in warning)
        if content == "text"
        else ("another program's database" in warning)
    )


def test_a_cache_made_before_the_application_id_is_kept(cache_dir, capsys) -> None:  # type: ignore[no-untyped-def]
    path = cache_dir / "parses.sqlite"
    _filled(path, 10)
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA application_id = 0")
    assert (
        len(
            ParseCache(path, "v1").get_many(
                [f"caption number {i} of a brown dog" for i in range(10)]
            )
        )
        == 10
    )
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    assert capsys.readouterr().err == ""


def test_an_unusable_cache_never_blocks_a_run(cache_dir, capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    (cache_dir / "parses.sqlite").mkdir(parents=True)  # a folder where the file should be
    monkeypatch.setattr(
        spice, "_synsets_of", lambda parse: {k: [] for k in spice.synset_keys(parse)}
    )
    sent = _fake_parser(cache_dir, monkeypatch)
    scores = spice.Spice(server=False).score(["a dog"], [["a dog runs"]])
    np.testing.assert_allclose(scores.values, [0.8])
    assert sent == [["a dog", "a dog runs"]]
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot be used" in err and "parses without it" in err


def test_cache_files_are_owner_only_from_the_start(cache_dir) -> None:  # type: ignore[no-untyped-def]
    old = os.umask(0)
    try:
        _filled(cache_dir / "parses.sqlite", 5)
    finally:
        os.umask(old)
    assert (cache_dir / "parses.sqlite").stat().st_mode & 0o777 == 0o600
    assert cache_dir.stat().st_mode & 0o777 == 0o700
    (cache_dir / "parses.sqlite").chmod(0o644)  # an older cache made wider is narrowed
    cache_dir.chmod(0o755)
    ParseCache(cache_dir / "parses.sqlite", "v1").get_many(["x"])
    assert (cache_dir / "parses.sqlite").stat().st_mode & 0o777 == 0o600
    assert cache_dir.stat().st_mode & 0o777 == 0o700


def test_an_impostor_on_a_stale_port_gets_nothing_and_poisons_nothing(
    cache_dir, capsys, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(
        spice, "_synsets_of", lambda parse: {k: [] for k in spice.synset_keys(parse)}
    )
    sent = _fake_parser(cache_dir, monkeypatch)
    version = _server.server_version(spice.PARSER_VERSION)
    cands, refs = ["a dog", "a cat"], [["a dog runs"], ["a cat"]]
    truth = spice.Spice(cache=False, server=False).score(cands, refs)
    impostor = Impostor(version)
    info = {"port": impostor.port, "token": "the real token", "pid": 1, "version": version}
    cache_dir.mkdir(parents=True)
    _server.info_path().write_text(json.dumps(info))
    capsys.readouterr()
    scores = spice.Spice().score(cands, refs)
    assert scores.values.tobytes() == truth.values.tobytes()  # not 1.0 from [["thing"]]
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "did not prove that it is the parser server" in err
    assert sent[-1] == ["a dog", "a cat", "a dog runs"]  # parsed by the run's own parser
    time.sleep(0.2)
    assert (
        impostor.received.startswith(b"HELLO ") and impostor.received.count(b"\n") == 1
    )  # only the nonce
    assert b"the real token" not in impostor.received and b"dog" not in impostor.received
    cached = spice.parse_cache().get_many(["a dog", "a cat", "a dog runs"])
    assert all(entry["tuples"] != [["thing"]] for entry in cached.values()) and len(cached) == 3
    assert not _server.stop()  # stop sends nothing either, and removes the stale file
    assert b"STOP" not in impostor.received and not _server.info_path().exists()


@pytest.mark.parametrize(
    "bad",
    [
        {"i": 5, "t": [["x"]]},  # not an index of the request
        {"i": 0, "t": [["a", "b", "c", "d"]]},  # a tuple of four
        {"i": 0, "t": [["x"]], "extra": 1},  # another shape
        {"i": True, "t": [["x"]]},  # not an int
        b'[["thing"]]',  # not an object
    ],
)
def test_a_verified_servers_malformed_answer_is_not_stored(
    cache_dir, capsys, monkeypatch, bad
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(
        spice, "_synsets_of", lambda parse: {k: [] for k in spice.synset_keys(parse)}
    )
    sent = _fake_parser(cache_dir, monkeypatch)
    version = _server.server_version(spice.PARSER_VERSION)
    cands, refs = ["a dog", "a cat"], [["a dog runs"], ["a cat"]]
    truth = spice.Spice(cache=False, server=False).score(cands, refs)
    server = FakeServer(version, answer=lambda texts: [words(texts)[0], bad, *words(texts)[1:]])
    server.register()
    capsys.readouterr()
    scores = spice.Spice().score(cands, refs)
    assert scores.values.tobytes() == truth.values.tobytes()
    assert sent[-1] == [
        "a cat",
        "a dog runs",
    ]  # the answers after the bad line are not trusted either
    assert "malformed after 1 of 3 captions" in capsys.readouterr().err


def test_a_verified_server_that_repeats_an_index_is_not_trusted(
    cache_dir, capsys, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(
        spice, "_synsets_of", lambda parse: {k: [] for k in spice.synset_keys(parse)}
    )
    sent = _fake_parser(cache_dir, monkeypatch)
    version = _server.server_version(spice.PARSER_VERSION)
    server = FakeServer(version, answer=lambda texts: [words(texts)[0], {"i": 0, "t": [["thing"]]}])
    server.register()
    spice.Spice().score(["a dog", "a cat"], [["a dog runs"], ["a cat"]])
    assert sent[-1] == ["a cat", "a dog runs"]
    assert spice.parse_cache().get_many(["a dog"])["a dog"]["tuples"] == [["a"], ["dog"]]


def _exchange(port: int, data: bytes, timeout: float = 15.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as conn:
        try:
            conn.sendall(data)
            return conn.recv(4096)
        except OSError:
            return b"<closed>"


@needs_spice
def test_the_real_server_bounds_unauthenticated_clients_and_serves_others(cache_dir) -> None:  # type: ignore[no-untyped-def]
    java, corenlp = _resources.find_java(), _resources.find_corenlp()
    version = _server.server_version(spice.PARSER_VERSION)
    old = os.umask(0)
    try:
        info = _server.start(java, corenlp, "2G", 1, version, idle=120)
    finally:
        os.umask(old)
    try:
        for path, mode in (
            (_server.info_path(), 0o600),
            (cache_dir / "parser-server.log", 0o600),
            (cache_dir, 0o700),
        ):
            assert path.stat().st_mode & 0o777 == mode, path
        idle = [socket.create_connection(("127.0.0.1", info.port)) for _ in range(3)]  # say nothing
        flood = socket.create_connection(("127.0.0.1", info.port))
        flood.settimeout(20)
        sent = 0
        try:
            while sent < 256 << 20:  # no newline, ever: the server drops it after 256 bytes
                flood.sendall(b"x" * (1 << 20))
                sent += 1 << 20
        except OSError:
            pass
        assert sent < 256 << 20
        started = time.monotonic()
        assert _server.ping(info, timeout=8.0)  # served while the idle ones wait
        parsed = _server.parse(info, ["a brown dog runs"], lambda chunk: None, 60)
        assert parsed == {"a brown dog runs": [["dog", "run"], ["dog", "brown"], ["dog"]]}
        assert time.monotonic() - started < 30  # not behind the 60 s of an idle client
        old_protocol = _exchange(info.port, f"{info.token}\nPING\n".encode())
        assert b"version" not in old_protocol  # the token line is not a HELLO: nothing answered
        wrong = _server.ServerInfo(info.port, "not the token", info.pid, info.version)
        with pytest.raises(
            _server.Impostor
        ):  # the client refuses a server that cannot prove the token
            _server.ping(wrong)
        for conn in idle:
            conn.settimeout(20)
            assert conn.recv(10) == b""  # dropped after the authentication time
            conn.close()
        connection, lines = _server._connect(info, f"PARSE {(64 << 20) + 1}", 5.0)
        with connection, lines:
            assert b"at most" in lines.readline()  # a request over the bound is refused, unread
        assert _server.ping(info)
    finally:
        assert _server.stop()


def _run_child(cache_dir: Path, tmp: Path, body: str) -> subprocess.Popen[bytes]:
    """A Python process parsing with the real helper in TMPDIR=tmp."""
    script = textwrap.dedent(f"""
        import signal, sys
        from capmetrics.plugins.spice import _parse, _resources
        java, corenlp = _resources.find_java(), _resources.find_corenlp()
        {body}
        _parse.parse_captions(["a dog"] * 1,
                              lambda t, i, o: _parse.parse_command(java, corenlp, "2G", t, i, o),
                              1, 600, lambda parsed: None)
    """)
    env = {**os.environ, "TMPDIR": str(tmp)}
    return subprocess.Popen([sys.executable, "-c", script], env=env, stderr=subprocess.PIPE)


def _jvms_in(tmp: Path) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and str(tmp) in (proc / "cmdline").read_bytes().decode(
                "utf-8", "replace"
            ):
                if (proc / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                    found.append(int(proc.name))
        except OSError:
            pass
    return [pid for pid in found if pid != os.getpid()]


def _wait_for(condition, seconds: float = 30.0) -> bool:  # type: ignore[no-untyped-def]
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


@needs_spice
@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
def test_a_terminated_or_killed_run_leaves_no_jvm(tmp_path, cache_dir, how) -> None:  # type: ignore[no-untyped-def]
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    # the CLI turns SIGTERM into the same exception as Ctrl-C
    handler = (
        "from capmetrics.runtime.interrupts import interrupt_on_signals; interrupt_on_signals()"
        if how == "SIGTERM"
        else ""
    )
    child = _run_child(cache_dir, tmp, handler)
    try:
        assert _wait_for(lambda: any(p != child.pid for p in _jvms_in(tmp))), "no JVM started"
        jvms = [p for p in _jvms_in(tmp) if p != child.pid]
        child.send_signal(getattr(signal, how))
        child.wait(30)
        assert _wait_for(lambda: not _jvms_in(tmp)), f"JVM(s) {jvms} outlived their parent"
        left = list(tmp.glob("capmetrics-spice-*"))
        if how == "SIGTERM":
            assert left == []  # removed on the way out
        else:  # nothing can run on SIGKILL; the next run removes the dead run's folder
            assert len(left) == 1
            _parse.remove_stale_folders(str(tmp))
            assert list(tmp.glob("capmetrics-spice-*")) == []
    finally:
        child.kill()
        child.wait()


@needs_spice
def test_an_impostor_on_a_stale_port_and_the_real_parser_give_the_jars_values(
    cache_dir, capsys
) -> None:  # type: ignore[no-untyped-def]
    fixture = json.loads(FIXTURE.read_text(encoding="utf-8"))["items"][:3]
    version = _server.server_version(spice.PARSER_VERSION)
    impostor = Impostor(version)
    cache_dir.mkdir(parents=True)
    _server.info_path().write_text(
        json.dumps({"port": impostor.port, "token": "t", "pid": 1, "version": version})
    )
    scores = spice.Spice().score(
        [it["candidate"] for it in fixture], [it["references"] for it in fixture]
    )
    np.testing.assert_allclose(
        scores.values, [it["scores"]["All"]["f"] for it in fixture], rtol=0, atol=1e-12
    )
    assert "did not prove that it is the parser server" in capsys.readouterr().err
    assert not any(b"young child" in impostor.received for _ in [0])


def test_spice_synsets_build_only_meteors_synonym_tables(cache_dir, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A cold SPICE run needs Meteor's synonym tables (seconds), not its paraphrase arrays (most
    of METEOR's first use), and they give the full lexicon's synsets."""
    import re

    from capmetrics.io.cache import cache_root
    from capmetrics.plugins.meteor import wordnet
    from capmetrics.plugins.meteor._lexicon import Lexicon
    from capmetrics.plugins.meteor._resources import load_resources

    from tests.conftest import FLICKR8K

    try:
        wordnet.meteor_files()
    except Exception as err:  # noqa: BLE001
        pytest.skip(f"no METEOR jar: {err}")
    (cache_root() / "meteor").unlink()  # empty: METEOR's tables are not built here
    wordnet._english.cache_clear()
    try:
        light = Lexicon(wordnet.synonym_resources())
        built = list((cache_root() / "meteor").glob("*/*"))
        assert [p.name for p in built] == ["synonyms"]
        assert (
            wordnet.word_synsets("dogs") == light.synsets("dogs") and len(light.synsets("dogs")) > 3
        )
        if not (FLICKR8K / "Flickr8k.token.txt").is_file():
            return
        words = sorted(
            set(re.findall("[a-z]+", (FLICKR8K / "Flickr8k.token.txt").read_text().lower()))
        )[::5]
        monkeypatch.delenv("CAPMETRICS_CACHE_DIR")  # the user's built tables, for the full lexicon
        full = Lexicon(load_resources())
        assert [w for w in words if full.synsets(w) != light.synsets(w)] == []
    finally:
        wordnet._english.cache_clear()


def test_jvms_and_heaps_are_chosen_from_the_work(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    monkeypatch.setattr(
        os, "sysconf", lambda name: 4096 if name == "SC_PAGE_SIZE" else (64 << 30) // 4096
    )
    assert [_parse.default_jobs(n) for n in (1, 300, 1690, 2000, 2001, 5000, 10**6)] == [
        1,
        1,
        1,
        1,
        2,
        3,
        8,
    ]
    monkeypatch.setattr(
        os, "sysconf", lambda name: 4096 if name == "SC_PAGE_SIZE" else (3 << 30) // 4096
    )
    assert _parse.default_jobs(10**6) == 2  # as memory allows
    cmd = _parse.parse_command("java", [], None, 2, Path("i"), Path("o"))
    assert "-Xmx1G" in cmd and "-XX:+UseSerialGC" in cmd and "-XX:+ExitOnOutOfMemoryError" in cmd
    assert "-XX:Tier4InvocationThreshold=50000" in cmd  # C2 only for the hottest methods
    assert _parse.PARENT_PIPE in cmd and "-Xmx3g" in _parse.parse_command(
        "java", [], "3g", 2, Path("i"), Path("o")
    )
    # a JVM that died (out of memory, say) is run again with the retry command (a larger heap)
    helper = tmp_path / "helper.py"
    helper.write_text(
        "import json, sys\ntexts = json.load(open(sys.argv[1]))\n"
        "if sys.argv[3] == 'small': sys.exit(3)\n"
        "open(sys.argv[2], 'w').write(''.join(json.dumps({'i': i, 't': [[t]]}) + '\\n' "
        "for i, t in enumerate(texts)))\n"
    )
    used: list[str] = []

    def command(heap: str):  # type: ignore[no-untyped-def]
        return lambda threads, i, o: (
            used.append(heap) or [sys.executable, str(helper), str(i), str(o), heap]
        )

    found = _parse.parse_captions(
        ["a", "b"], command("small"), 1, 60, lambda parsed: None, command("large")
    )
    assert found == {"a": [["a"]], "b": [["b"]]} and used == ["small", "large"]


@needs_spice
def test_sigterm_to_the_cli_while_spice_parses_leaves_no_jvm_and_no_folder(
    tmp_path, cache_dir
) -> None:  # type: ignore[no-untyped-def]
    """Issue 26 row 11, end to end: ``capmetrics score -m spice`` terminated while its JVM runs."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    data = tmp_path / "d.jsonl"
    data.write_text(
        json.dumps(
            {
                "id": "1",
                "references": ["a dog runs on the grass"],
                "candidates": ["a brown dog runs"],
            }
        )
        + "\n"
    )
    env = {**os.environ, "TMPDIR": str(tmp)}
    cli = Path(sys.executable).with_name("capmetrics")
    child = subprocess.Popen(
        [str(cli), "score", str(data), "-m", "spice"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        assert _wait_for(lambda: any(p != child.pid for p in _jvms_in(tmp)), 120), "no JVM started"
        child.send_signal(signal.SIGTERM)
        assert child.wait(60) == 128 + signal.SIGTERM
        assert _wait_for(lambda: not _jvms_in(tmp)), "a JVM outlived the CLI"
        assert list(tmp.glob("capmetrics-spice-*")) == []
    finally:
        child.kill()
        child.wait()


def test_server_commands_name_an_impostor_instead_of_failing(cache_dir) -> None:  # type: ignore[no-untyped-def]
    from capmetrics.plugins.spice._cli import server_app
    from typer.testing import CliRunner

    version = _server.server_version(spice.PARSER_VERSION)
    impostor = Impostor(version)
    cache_dir.mkdir(parents=True)
    _server.info_path().write_text(
        json.dumps({"port": impostor.port, "token": "t", "pid": 1, "version": version})
    )
    status = CliRunner().invoke(server_app, ["status"])
    assert status.exit_code == 1 and "did not prove that it is the parser server" in status.output
    stop = CliRunner().invoke(server_app, ["stop"])
    assert stop.exit_code == 0 and "no spice parser server was running" in stop.output
    assert not _server.info_path().exists() and b"STOP" not in impostor.received
