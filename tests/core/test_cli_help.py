"""``--help`` reads as prose at any width: every command's help (plugins' commands included) is
rendered at 100 and 200 columns and no paragraph is broken where the terminal would not break it
(typer keeps a docstring's hard line breaks unless capmetrics.cli.helptext reflows them)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import typer
from capmetrics.cli import get_app
from capmetrics.cli.helptext import first_sentence, reflow_help
from typer.testing import CliRunner

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
WIDTHS = (100, 200)
LIST_ITEM = re.compile(r"([-*•]|\d+[.)])\s")


def _commands(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    yield path, command
    for name, sub in getattr(command, "commands", {}).items():
        yield from _commands(sub, (*path, name))


ROOT = typer.main.get_command(get_app())
PATHS = [path for path, _ in _commands(ROOT)]


def _help(path: tuple[str, ...], width: int) -> list[str]:
    """``capmetrics PATH --help`` at ``width`` columns, one string per line."""
    env = {"COLUMNS": str(width), "TERM": "dumb", "NO_COLOR": "1"}
    result = CliRunner().invoke(get_app(), [*path, "--help"], env=env)
    assert result.exit_code == 0, result.output
    return ANSI.sub("", result.output).splitlines()


def _hard_breaks(lines: list[str]) -> list[str]:
    """Places where a line ends although the next line's first word would have fit on it: a
    greedy wrap (rich's) never does that, so a line break the text itself carried did. Checked
    in the free text (the description under ``Usage:``) and in each table cell whose text goes
    on under it on the next row (the commands' and the options' help columns)."""
    found = []
    for a, b in zip(lines, lines[1:]):
        boxed = a.startswith("│") and a.rstrip().endswith("│") and b.startswith("│")
        if boxed:
            a, b = a.rstrip()[1:-1], b.rstrip()[1:-1]
            start = len(b) - len(b.lstrip())
            if "  " in b.strip() or a[start - 1 : start] != " " or a[start : start + 1] in " ":
                continue  # b is a row of cells (2 spaces apart or more), not a's going on
            if b.lstrip().startswith("["):  # typer's own notes: [default: ...], [required]
                continue
            room = len(a) - 1  # the cell ends one column of padding before the panel's border
        elif a.strip() and b.strip() and not a.lstrip().startswith("Usage:") and "│" not in a + b:
            room = len(a) - 1  # free text: one column of padding on either side
        else:
            continue
        if LIST_ITEM.match(b.strip()):
            continue  # a list keeps one line per item
        used = len(a.rstrip())
        word = b.split()[0]
        if used + 1 + len(word) <= room:
            found.append(f"{a.strip()!r} / {b.strip()!r}")
    return found


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("path", PATHS, ids=lambda p: " ".join(p) or "capmetrics")
def test_no_help_paragraph_is_broken_mid_sentence(path: tuple[str, ...], width: int) -> None:
    lines = _help(path, width)
    assert not _hard_breaks(lines), "\n".join([*_hard_breaks(lines), "", *lines])


@pytest.mark.parametrize(
    "path",
    [p for p, c in _commands(ROOT) if getattr(c, "commands", None)],
    ids=lambda p: " ".join(p) or "capmetrics",
)
def test_a_short_help_that_fits_the_listing_takes_one_row(path: tuple[str, ...]) -> None:
    lines = _help(path, 200)
    group = dict(_commands(ROOT))[path]
    for name, command in group.commands.items():
        short = " ".join((command.help or "").split("\n\n")[0].split())
        row = next(line for line in lines if line.startswith(f"│ {name} "))
        if len(short) < 200 - 30:  # the name column and the borders take under 30
            assert short in row, (name, row)


def test_the_reflow_keeps_paragraphs_lists_and_literal_blocks() -> None:
    text = """Do one thing, with a line
    broken in the source.

    Then a second paragraph, with ``--check``
    as code, and a list:
    - first item that goes
      on under it,
    - second item.

    \b
    kept   as
    it is
    \f
    hidden: for the Python docs"""
    assert reflow_help(text) == (
        "Do one thing, with a line broken in the source.\n\n"
        "Then a second paragraph, with `--check` as code, and a list:\n"
        "- first item that goes on under it,\n- second item.\n\n"
        "\b\nkept   as\nit is\n\f\nhidden: for the Python docs"
    )
    assert reflow_help(reflow_help(text)) == reflow_help(text)  # built once, but idempotent
    assert reflow_help(None) is None and reflow_help("") == ""


@pytest.mark.parametrize(
    ("summary", "first"),
    [
        (  # registry's cider-original: "et al." inside parentheses does not end it
            "The original CIDEr (Vedantam et al. 2015): mean over orders, × 10; no clipping. "
            "Same options as cider-d.",
            "The original CIDEr (Vedantam et al. 2015): mean over orders, × 10; no clipping.",
        ),
        (  # registry's trm: nor does "et al." before a parenthesis
            "Triangle-rank metric over a distance: Q of Chan et al. (eq. 4), exact, with a "
            "p-value.",
            "Triangle-rank metric over a distance: Q of Chan et al. (eq. 4), exact, with a "
            "p-value.",
        ),
        ("Arithmetic mean", "Arithmetic mean."),
        ("Sum of the values, e.g. Sum. Then more.", "Sum of the values, e.g. Sum."),
    ],
)
def test_the_plugins_table_summary_is_the_whole_first_sentence(summary: str, first: str) -> None:
    assert first_sentence(summary) == first


def test_a_plugins_command_with_paragraphs_and_a_list_reads_well_at_any_width() -> None:
    from capmetrics.cli import _Group

    app = typer.Typer(cls=_Group, add_completion=False)

    @app.command("go")
    def go(
        level: int = typer.Option(1, help="How far to go, from 1\nto 3, each level a\nstep."),
    ) -> None:
        """Go somewhere far away, with a docstring wrapped at a width that is not the
        terminal's.

        A second paragraph, wrapped too, that says what ``--level`` does and
        lists:
        - one thing that is long enough to go on to a second line in the
          source,
        - another thing."""

    @app.command("stay")
    def stay() -> None:
        """Stay."""

    for width in WIDTHS:
        env = {"COLUMNS": str(width), "TERM": "dumb", "NO_COLOR": "1"}
        for args in (["--help"], ["go", "--help"]):
            out = ANSI.sub("", CliRunner().invoke(app, args, env=env).output)
            lines = out.splitlines()
            assert not _hard_breaks(lines), "\n".join([*_hard_breaks(lines), *lines])
        text = " ".join(out.split())
        assert "A second paragraph, wrapped too, that says what `--level` does and lists:" in text
        assert "How far to go, from 1 to 3, each level a step." in text.replace("│ ", "")
        assert " - one thing" in out and " - another thing." in out  # one line each
    assert (
        "Go somewhere far away, with a docstring wrapped at a width that is not the terminal's."
        in CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"}).output
    )
