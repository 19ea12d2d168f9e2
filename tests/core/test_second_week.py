"""Issue 39 ("The second week"): each row of the issue's table that this file owns, played as a
user would: the CLI in a subprocess, a pseudo-terminal where the terminal matters, the Python
API as it is called in a notebook. (doctor/plugins readiness, the self-critical and torchmetrics
rows and COCOEvalCap without SPICE are tested next to their code.)"""

from __future__ import annotations

import fcntl
import json
import math
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

import capmetrics
import numpy as np
import pytest
from capmetrics.io.strict_json import dumps, loads_strict

from tests.conftest import SAMPLE
from tests.core.test_first_contact import CLI, run_cli

CANDIDATES = ["a dog runs on the grass", "a man rides a bike"]
REFERENCES = [
    ["a dog is running on the grass", "a brown dog runs"],
    ["a man is riding a bicycle", "a cyclist on a road"],
]


@pytest.fixture(scope="module")
def results() -> capmetrics.Results:
    return capmetrics.score(
        candidates=CANDIDATES, references=REFERENCES, metrics=["bleu-1", "cider-d"]
    )


# -- a MetricResult is its corpus value where a number is expected ------------------------------
def test_a_result_formats_rounds_compares_and_computes_as_its_corpus_value(results) -> None:
    r, b = results["CIDEr"], results["Bleu_1"]
    x, y = float(r.corpus), float(b.corpus)
    assert f"{r:.4f}" == f"{x:.4f}" and f"{r:>10.2e}" == f"{x:>10.2e}"
    assert round(r, 3) == round(x, 3) and round(r) == round(x) and isinstance(round(r), int)
    assert (
        (r > 0.5) == (x > 0.5) and (r <= x) and (r >= x) and not (r < x) and (0.5 < r) == (x > 0.5)
    )
    assert 2 * r == 2 * x and r * 2 == 2 * x and type(2 * r) is float
    assert (
        r + b == x + y and r - b == x - y and 1 - r == 1 - x and r / 2 == x / 2 and 1 / r == 1 / x
    )
    assert -r == -x and abs(r) == abs(x) and r**2 == x**2 and math.floor(r) == math.floor(x)
    assert sum(results.values()) == x + y and max(results.values()) is (r if x > y else b)
    assert sorted([r, b]) == sorted([r, b], key=float) and np.isclose(np.mean([r, b]), (x + y) / 2)
    assert math.log(r) == math.log(x) and np.float64(2) * r == 2 * x


def test_a_result_equals_and_hashes_as_its_corpus_value(results) -> None:
    r = results["cider-d"]
    x = float(r.corpus)
    assert r == x and x == r and r == np.float64(x) and r != x + 1
    assert hash(r) == hash(x) and {r: "a"}[x] == "a"  # equal objects hash alike
    again = capmetrics.score(candidates=CANDIDATES, references=REFERENCES, metrics=["cider-d"])[
        "cider-d"
    ]
    assert again == r and hash(again) == hash(r) and again is not r
    assert r != results["bleu-1"] and r != "cider-d" and len({r, again}) == 1
    assert f"{r}" == repr(r)  # no format spec: the repr, as before


# -- one-line errors that say what to do ----------------------------------------------------------
@pytest.mark.parametrize("name", ["bleu", "Bleu"])
def test_an_unknown_metric_close_to_one_is_one_line_naming_it(name: str) -> None:
    proc = run_cli("score", SAMPLE, "-m", name)
    assert proc.returncode == 2
    assert proc.stderr == (
        f"Error: unknown metric {name!r}; did you mean bleu-4? "
        "(`capmetrics plugins` lists them all)\n"
    )


def test_pycocoevalcaps_argument_order_gets_a_hint() -> None:
    gts = {"1": REFERENCES[0], "2": REFERENCES[1]}
    res = {"1": [CANDIDATES[0]], "2": [CANDIDATES[1]]}
    with pytest.raises(
        TypeError,
        match=r"takes the data first, then the metrics: "
        r"score\(candidates=res, references=gts",
    ):
        capmetrics.score(gts, res)
    assert float(
        capmetrics.score(candidates=res, references=gts, metrics="cider-d")["cider-d"]
    ) == float(
        capmetrics.score(candidates=CANDIDATES, references=REFERENCES, metrics="cider-d")["cider-d"]
    )


def test_a_string_of_candidates_is_refused_saying_what_to_give() -> None:
    with pytest.raises(
        TypeError,
        match=r"candidates must be a list .* got the string 'a dog': give "
        r"candidates=\['a dog'\]",
    ):
        capmetrics.score(candidates="a dog", references=[["a dog runs"]])


# -- results JSON: written by the json module -----------------------------------------------------
def test_results_json_is_the_json_of_the_results_dict(results, tmp_path: Path) -> None:
    text = results.to_json()
    assert loads_strict(text) == json.loads(dumps(results.to_json_dict()))
    assert '\n        {"id": 0, "value": ' in text  # one item a line
    results.write(tmp_path / "r.json")
    assert (tmp_path / "r.json").read_text(encoding="utf-8") == text


# -- clipscore's and pacscore's own files, a COCO results file alone -------------------------------
CLIP_DATA = Path(__file__).resolve().parents[1] / "data" / "clip"


@pytest.fixture(scope="module")
def clipscore_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """clipscore.py's inputs made from tests/data/clip: ``{image stem: caption}`` candidates (each
    item's first), ``{image stem: [refs]}`` references, and the tiny CLIP whose reference values
    (jmhessel/clipscore's own code) are in tests/data/clip/reference.json."""
    torch = pytest.importorskip("torch")
    from tests.data.clip.tiny_clip import tiny_clip_state_dict

    folder = tmp_path_factory.mktemp("clipscore")
    torch.save(
        {k: torch.from_numpy(v) for k, v in tiny_clip_state_dict(0).items()}, folder / "tiny.pt"
    )
    torch.save(
        {"state_dict": {k: torch.from_numpy(v) for k, v in tiny_clip_state_dict(1).items()}},
        folder / "tiny_pacs.pth",
    )  # PAC-S's checkpoint layout, the fixture's PAC weights
    items = [
        json.loads(line)
        for line in (CLIP_DATA / "items.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    (folder / "cands.json").write_text(
        json.dumps({Path(it["image"]).stem: it["candidates"][0] for it in items})
    )
    (folder / "refs.json").write_text(
        json.dumps({Path(it["image"]).stem: it["references"] for it in items})
    )
    (folder / "results.json").write_text(
        json.dumps(
            [{"image_id": Path(it["image"]).stem, "caption": it["candidates"][0]} for it in items]
        )
    )
    reference = json.loads((CLIP_DATA / "reference.json").read_text(encoding="utf-8"))
    # image stem -> {metric: the reference code's value of the item's first candidate}
    expected = {}
    for k, cand in enumerate(reference["candidates"]):
        if cand["index"] == 0:
            stem = Path(next(it["image"] for it in items if it["id"] == cand["item"])).stem
            expected[stem] = {
                **{m: reference["clipscore"][m][k] for m in ("clip-score", "ref-clip-score")},
                **{m: reference["pacscore"][m][k] for m in ("pac-score", "ref-pac-score")},
            }
    (folder / "expected.json").write_text(json.dumps(expected))
    return {"folder": folder, "model": folder / "tiny.pt", "pac": folder / "tiny_pacs.pth"}


def _values(path: Path) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for metric in json.loads(path.read_text(encoding="utf-8"))["metrics"]:
        for item in metric["items"]:
            out.setdefault(item["id"], {})[metric["spec"].split("(")[0]] = item["candidates"][0]
    return out


def test_clipscores_candidates_and_references_files_score_as_clipscore_does(
    clipscore_files,
) -> None:
    """The files clipscore.py and pacscore's compute_metrics read, as they are; every value equals
    the reference code's (tests/data/clip/reference.json)."""
    folder, model, pac = clipscore_files["folder"], clipscore_files["model"], clipscore_files["pac"]
    out = folder / "both.json"
    proc = run_cli(
        "score",
        "--results",
        folder / "cands.json",
        folder / "refs.json",
        "--images",
        CLIP_DATA / "images",
        "-m",
        f'clip-score(model="{model}")',
        "-m",
        f'ref-clip-score(model="{model}")',
        "-m",
        f'pac-score(model="{pac}")',
        "-m",
        f'ref-pac-score(model="{pac}")',
        "--out",
        out,
        "-q",
    )
    assert proc.returncode == 0, proc.stderr
    expected = json.loads((folder / "expected.json").read_text())
    got = _values(out)
    assert set(got) == set(expected) and len(got) == 11
    for stem, values in expected.items():
        for metric, value in values.items():
            assert got[stem][metric] == pytest.approx(value, abs=1e-6), (stem, metric)


def test_candidates_alone_score_with_reference_free_metrics_and_are_explained_otherwise(
    clipscore_files,
) -> None:
    folder, model = clipscore_files["folder"], clipscore_files["model"]
    expected = json.loads((folder / "expected.json").read_text())
    # a COCO results file here; clipscore's candidates file alone is scored through the API in
    # the next test (the CLI takes the same loader and the same reference-free decision)
    for name in ("results.json",):
        out = folder / f"alone-{name}"
        proc = run_cli(
            "score",
            folder / name,
            "--images",
            CLIP_DATA / "images",
            "-m",
            f'clip-score(model="{model}")',
            "--out",
            out,
            "-q",
        )
        assert proc.returncode == 0, proc.stderr
        got = _values(out)
        assert {k: v["clip-score"] for k, v in got.items()} == pytest.approx(
            {k: v["clip-score"] for k, v in expected.items()}, abs=1e-6
        )
    proc = run_cli("score", folder / "results.json")
    assert proc.returncode == 1
    assert (
        "a COCO results file (a list of {image_id, caption}): it holds candidates but no "
        "references; give the COCO annotations (references) first and this file as --results"
        in proc.stderr
    )
    assert "object without an id" not in proc.stderr
    proc = run_cli("score", folder / "cands.json")
    assert (
        proc.returncode == 1
        and "a candidates file ({image id: caption}, as clipscore and pacscore read)" in proc.stderr
        and f"capmetrics score refs.json --results {folder / 'cands.json'}" in proc.stderr
    )


def test_the_python_api_scores_candidates_alone_with_reference_free_metrics(
    clipscore_files,
) -> None:
    folder, model = clipscore_files["folder"], clipscore_files["model"]
    expected = json.loads((folder / "expected.json").read_text())
    spec = f'clip-score(model="{model}")'
    data = capmetrics.load_dataset(
        folder / "cands.json", images=CLIP_DATA / "images", require_references=False
    )
    got = capmetrics.score(data, spec)[spec]
    want = [expected[str(i.id)]["clip-score"] for i in data]
    assert list(got.item_values) == pytest.approx(want, abs=1e-6)
    # a path loads without references when every metric is reference-free: what is missing
    # then is the images (named), not the references
    with pytest.raises(capmetrics.errors.DataError, match="image"):
        capmetrics.score(str(folder / "cands.json"), spec)
    with pytest.raises(capmetrics.errors.DataError, match="reference"):
        capmetrics.score(str(folder / "cands.json"), [spec, "bleu-4"])


# -- validation when a metric is built, not when it runs -------------------------------------------
def test_meteor_modules_without_weights_fail_before_any_metric_runs() -> None:
    from capmetrics.errors import SpecError

    with pytest.raises(
        SpecError,
        match=r"give one weight per module: 2 modules, 4 weights \(the English weights "
        r"of these modules: weights=\[1.0, 0.6\]\)",
    ):
        capmetrics.compose("meteor(modules=[exact, stem])")
    assert capmetrics.compose("meteor(modules=[exact, stem], weights=[1.0, 0.6])").weights == [
        1.0,
        0.6,
    ]
    proc = run_cli("score", SAMPLE, "-m", "bleu-4", "-m", "meteor(modules=[exact, stem])")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("Error: meteor(): meteor: give one weight per module")


# -- every cache under the one root ---------------------------------------------------------------
@pytest.mark.parametrize("variable", ["CAPMETRICS_CACHE_DIR", "XDG_CACHE_HOME"])
def test_nneval_train_caches_features_under_the_cache_root(
    monkeypatch, tmp_path: Path, variable: str
) -> None:
    from capmetrics.cli import get_app
    from capmetrics.errors import SpecError
    from typer.testing import CliRunner

    seen: dict[str, object] = {}

    def compose(spec, kinds=None, **params):  # the learner as the command builds it; stop there
        seen.update(params)
        raise SpecError("stop")

    monkeypatch.delenv("CAPMETRICS_CACHE_DIR", raising=False)
    monkeypatch.setenv(variable, str(tmp_path / "root"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(sys.modules["capmetrics.registry.compose"], "compose", compose)
    result = CliRunner().invoke(get_app(), ["nneval", "train", str(tmp_path / "model")])
    assert result.exit_code == 2 and "stop" in result.output
    root = (
        tmp_path / "root"
        if variable == "CAPMETRICS_CACHE_DIR"
        else tmp_path / "root" / "capmetrics"
    )
    assert seen["cache_dir"] == str(root / "nneval")


# -- progress fed by every slow component; one console for bars and messages ---------------------
COLOR = re.compile(r"\x1b\[[0-9;]*m")


def run_on_terminal(
    *args: object, env: dict[str, str] | None = None, columns: int = 120, timeout: float = 900
) -> tuple[str, int]:
    """``capmetrics ARGS`` on a pseudo-terminal; the raw text it wrote (colours removed, cursor
    movements and line erasures kept: they tell a line of its own from one written onto a bar)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    environ = {
        k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "CAPMETRICS_QUIET")
    }
    environ.update({"TERM": "xterm-256color", **(env or {})})
    proc = subprocess.Popen(
        [*CLI, *map(str, args)],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=environ,
        close_fds=True,
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
    return COLOR.sub("", b"".join(chunks).decode("utf-8", "replace")), code


def shown(raw: str) -> list[str]:
    """What each bar redraw and each printed line showed (split at carriage returns, line feeds
    and line erasures)."""
    return [
        part for part in re.split(r"\r|\n|\x1b\[2K|\x1b\[\d*A|\x1b\[\?25[hl]", raw) if part.strip()
    ]


def counts(raw: str, unit: str) -> set[tuple[int, int]]:
    return {(int(a), int(b)) for a, b in re.findall(rf"(\d+)/(\d+) {unit}\b", raw)}


@pytest.mark.slow(
    full=True,
    reason=(
        "trains and scores NNEval with BERTScore features (~50 s); the bar's embedding units "
        "run in CI in test_first_contact.py (in_halving_batches)"
    ),
)
def test_bertscore_and_nneval_move_the_bar_while_they_embed_and_compute_features(
    tmp_path: Path,
) -> None:
    data = tmp_path / "six.jsonl"  # six items of the sample: 30 references, 30-odd candidates
    data.write_text(
        "".join(SAMPLE.read_text(encoding="utf-8").splitlines(keepends=True)[:6]), encoding="utf-8"
    )
    raw, code = run_on_terminal(
        "score",
        data,
        "-m",
        "bertscore",
        "-m",
        "nneval(model=flickr8k-embeddings)",
        env={"CAPMETRICS_CACHE_DIR": str(tmp_path / "cache")},
    )  # nothing embedded yet
    assert code == 0, raw[-3000:]
    sentences = counts(raw, "sentences")
    assert any(0 < done < total for done, total in sentences), sentences  # not 0 then done
    features = counts(raw, "features")
    assert {total for _, total in features} == {15}, features
    assert len({done for done, _ in features if 0 < done < 15}) >= 3, (
        features
    )  # the bar moves per feature
    assert "nneval(model=flickr8k-embeddings) (2/2)" in raw and "bertscore (1/2)" in raw


def test_a_warning_during_a_run_prints_above_the_bar_not_onto_it(clipscore_files) -> None:
    folder, model = clipscore_files["folder"], clipscore_files["model"]
    raw, code = run_on_terminal(
        "score",
        folder / "cands.json",
        "--images",
        CLIP_DATA / "images",
        "-m",
        f'clip-score(model="{model}")',
    )
    assert code == 0, raw[-3000:]
    lines = shown(raw)
    warned = [line for line in lines if "Warning:" in line]
    assert all(line.startswith("Warning: ") for line in warned), warned  # each on a line of its own
    assert any(line.startswith("Warning: clip-score: ") for line in warned), warned
    assert any(
        "clip-score" in line and "items" in line for line in lines
    )  # the bar was up meanwhile


def test_notices_and_warnings_go_through_the_live_bar_and_the_hook_is_restored(monkeypatch) -> None:
    import threading
    import warnings

    import rich.progress
    from capmetrics import notices, progress

    master, slave = pty.openpty()
    terminal = os.fdopen(slave, "w", encoding="utf-8")
    printed: list[str] = []
    bars: list[object] = []
    real_progress = rich.progress.Progress
    monkeypatch.setattr(
        rich.progress, "Progress", lambda *a, **k: bars.append(1) or real_progress(*a, **k)
    )
    monkeypatch.delenv("CAPMETRICS_QUIET", raising=False)
    monkeypatch.setattr(notices.sys, "stderr", terminal)  # the notice sees a terminal

    def default_hook(
        message, category, filename, lineno, file=None, line=None
    ):  # the stdlib's, not pytest's
        (file or sys.stderr).write(
            warnings.formatwarning(message, category, filename, lineno, line)
        )

    monkeypatch.setattr(warnings, "showwarning", default_hook)
    with progress.RunProgress(terminal, items=3) as run, progress.reporting(run):
        monkeypatch.setattr(
            run.bar.console,
            "print",
            lambda text, **kw: printed.append(text) if isinstance(text, str) else None,
        )
        assert progress.bar_is_live() and len(bars) == 1

        def first_use() -> None:  # a one-time step in another thread (a background preparation)
            with notices.one_time_step("building a cache", "a second", total=10) as advance:
                advance(10)

        worker = threading.Thread(target=first_use)
        worker.start()
        worker.join()
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.warn("a wembsim warning", UserWarning, stacklevel=1)
    assert len(bars) == 1  # no second bar beside the run's
    assert printed[0] == "capmetrics: building a cache (once; usually a second)..."
    assert printed[1].startswith("capmetrics: building a cache: done in ")
    assert any("UserWarning: a wembsim warning" in text for text in printed[2:])
    assert warnings.showwarning is default_hook and not progress.bar_is_live()  # restored
    terminal.close()
    os.close(master)


# -- issue 36: results lookups let real errors through; the CLI leaves typer as it found it ------
def test_looking_up_a_metric_lets_a_broken_component_raise(results, add_plugin) -> None:
    from capmetrics import hookimpl

    from tests.registry.test_registry import Overlap

    class Broken(Overlap):
        name = "broken-overlap"

        def __init__(self) -> None:
            raise RuntimeError("a bug in the plugin")

    class BrokenPlugin:
        @hookimpl
        def register_distances(self, register):  # type: ignore[no-untyped-def]
            register(Broken)

    add_plugin(BrokenPlugin(), "broken-test")
    assert (
        "no-such-metric" not in results and "bleu(" not in results
    )  # unknown or malformed: not found
    with pytest.raises(KeyError, match="no metric 'rouge-l' in these results"):
        results["rouge-l"]
    with pytest.raises(RuntimeError, match="a bug in the plugin"):  # not "not found"
        results["broken-overlap"]


def test_the_cli_leaves_a_hosts_typer_app_as_it_found_it() -> None:
    code = (
        "import typer\nfrom typer.testing import CliRunner\nimport capmetrics.cli\n"
        "capmetrics.cli.get_app()\n"
        "host = typer.Typer()\n@host.command()\ndef go(name: str = 'x', n: int = 1) -> None: pass\n"
        "print(CliRunner().invoke(host, ['--help'], env={'COLUMNS': '200'}).output)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "<str>" in proc.stdout and "<int>" in proc.stdout  # typer's own display, untouched
    ours = run_cli("score", "--help", env={"COLUMNS": "200"}).stdout
    assert "PATH" in ours and "INTEGER" in ours
    assert not re.search(r"<(bool|str|int|float|path|Path|list\[[^>]*\])>", ours)


# -- docs ------------------------------------------------------------------------------------------
def test_docs_blocks_inside_lists_are_collected_and_the_package_docstring_is_right() -> None:
    import doctest

    from tests.test_doc_examples import ROOT as DOCS_ROOT
    from tests.test_doc_examples import blocks

    index = blocks(DOCS_ROOT / "docs" / "index.md")  # "Getting started" is inside a list item
    assert [lang for lang, *_ in index[:2]] == ["python", "console"]
    assert index[0][1].startswith("import capmetrics\n")  # dedented: it runs as written
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    test = doctest.DocTestParser().get_doctest(capmetrics.__doc__, {}, "capmetrics", None, 0)
    runner.run(test)
    assert runner.summarize(verbose=False).failed == 0
    from pycocoevalcap.bleu.bleu import Bleu  # the reference: bleu-1 of the docstring's example

    value = Bleu(1).compute_score(
        {0: ["a dog is running on the grass", "a dog runs"]},
        {0: ["a dog runs on the grass"]},
        verbose=0,
    )[0][0]
    assert f"{value!r}" in capmetrics.__doc__
