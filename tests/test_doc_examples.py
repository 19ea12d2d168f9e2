"""Every ``console`` and ``python`` block in README.md and docs/ runs as written on the bundled
sample.

Rules (also in docs/index.md, "Examples are tested"):
- A scratch folder stands in for the user's: ``results.jsonl``, ``samples.jsonl``, ``data.jsonl``,
  ``system_a.jsonl`` and ``system_b.jsonl`` are copies of the bundled sample, and
  ``../shared/data`` holds the real Flickr8k files.
- In a console block, each ``$ capmetrics ...`` line runs (continuation lines ending in ``\\``
  included) and must exit 0 without a traceback; other commands (``pip install``) are not run.
- The python blocks of one page run in order in one namespace, in the scratch folder.
- A block preceded by ``<!-- doc-test: skip: REASON -->`` is not run; the reason is listed here
  when the test runs with ``-rs``. A block preceded by ``<!-- doc-test: file: NAME -->`` (a TOML
  config, say) is written to the scratch folder as NAME before the page's examples run.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, SAMPLE, SHARED

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
#: A fenced block, at any indentation (inside a list item too), with its optional skip marker.
BLOCK = re.compile(
    r"(?:^[ \t]*<!-- doc-test: skip: (?P<skip>[^>]*?) -->\n)?"
    r"^(?P<indent>[ \t]*)```(?P<lang>console|python)[ \t]*\n(?P<body>.*?)^(?P=indent)```",
    re.MULTILINE | re.DOTALL,
)
FILE_BLOCK = re.compile(
    r"^[ \t]*<!-- doc-test: file: (?P<name>\S+) -->\n(?P<indent>[ \t]*)```\w*\n(?P<body>.*?)"
    r"^(?P=indent)```",
    re.MULTILINE | re.DOTALL,
)


def dedented(body: str, indent: str) -> str:
    """A block's text without the indentation of its fence (a block inside a list item)."""
    if not indent:
        return body
    return "".join(
        line[len(indent) :] if line.startswith(indent) else line.lstrip(" \t")
        for line in body.splitlines(keepends=True)
    )


SAMPLE_NAMES = ("results.jsonl", "samples.jsonl", "data.jsonl", "system_a.jsonl", "system_b.jsonl")


def blocks(page: Path) -> list[tuple[str, str, str | None, int]]:
    text = page.read_text(encoding="utf-8")
    return [
        (
            m["lang"],
            dedented(m["body"], m["indent"]),
            m["skip"],
            text.count("\n", 0, m.start("body")) + 1,
        )
        for m in BLOCK.finditer(text)
    ]


def commands(body: str) -> list[str]:
    """The ``$ capmetrics`` commands of a console block, continuation lines joined."""
    out, current = [], None
    for line in body.splitlines():
        if current is not None:
            current += " " + line.rstrip("\\").strip()
            if not line.endswith("\\"):
                out.append(current)
                current = None
        elif line.startswith("$ capmetrics"):
            if line.endswith("\\"):
                current = line[2:].rstrip("\\").strip()
            else:
                out.append(line[2:].split("  #")[0].strip())
    return out


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    """A user folder with the sample under the names the docs use, and ../shared beside it."""
    top = tmp_path_factory.mktemp("docs")
    (top / "shared").symlink_to(SHARED)
    folder = top / "work"
    folder.mkdir()
    for name in SAMPLE_NAMES:
        shutil.copy(SAMPLE, folder / name)
    return folder


def _cases() -> list:
    cases = []
    for page in PAGES:
        found = blocks(page)
        rel = page.relative_to(ROOT).as_posix()
        for lang, body, skip, line in found:
            if lang == "console" and not commands(body):
                continue
            marks = [pytest.mark.skip(reason=f"{rel}:{line}: {skip}")] if skip else []
            cases.append(pytest.param(page, lang, body, id=f"{rel}:{line}", marks=marks))
    return cases


_namespaces: dict[Path, dict] = {}


@pytest.mark.parametrize(("page", "lang", "body"), _cases())
def test_example_runs(page: Path, lang: str, body: str, scratch: Path, monkeypatch) -> None:
    monkeypatch.chdir(scratch)
    for m in FILE_BLOCK.finditer(page.read_text(encoding="utf-8")):
        (scratch / m["name"]).write_text(dedented(m["body"], m["indent"]), encoding="utf-8")
    if (
        lang == "python"
    ):  # the contrib example package importable, as in a checkout where it is developed
        monkeypatch.syspath_prepend(str(ROOT / "contrib" / "capmetrics-chrf" / "src"))
        namespace = _namespaces.setdefault(
            page, {"__name__": "__main__"}
        )  # as when saved as a script
        exec(compile(body, f"{page.name} example", "exec"), namespace)
        return
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    for command in commands(body):
        argv = [sys.executable, "-m", "capmetrics.cli", *shlex.split(command)[1:]]
        proc = subprocess.run(
            argv, cwd=scratch, env=env, capture_output=True, text=True, timeout=600
        )
        assert proc.returncode == 0, f"$ {command}\n{proc.stderr[-2000:]}"
        assert "Traceback" not in proc.stderr, proc.stderr


WORKER_EXAMPLES = [
    pytest.param(page, body, id=f"{page.relative_to(ROOT).as_posix()}:{line}")
    for page in PAGES
    for lang, body, skip, line in blocks(page)
    if lang == "python" and not skip and "Executor(" in body
]


@pytest.mark.parametrize(("page", "body"), WORKER_EXAMPLES)
def test_examples_that_start_workers_run_saved_as_scripts(
    page: Path, body: str, scratch: Path
) -> None:
    """Saved as a file and run with ``python script.py``, as a user would: worker processes
    import the script again, so it must guard its work with ``if __name__ == "__main__":``."""
    script = scratch / "example_script.py"
    script.write_text(body, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, str(script)], cwd=scratch, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]


def test_every_page_is_collected() -> None:
    """The pattern sees the blocks (a changed fence style would silently test nothing)."""
    readme = blocks(ROOT / "README.md")
    assert [lang for lang, *_ in readme] == ["console", "python"]
    assert commands(readme[0][1])[0].startswith("capmetrics score results.jsonl -m bleu-4")
