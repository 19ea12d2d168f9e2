"""Help texts as a terminal shows them: docstring paragraphs reflowed before typer renders them.

typer (rich markup mode) keeps a docstring's hard line breaks in the command listing of
``--help`` and in every paragraph after the first, so a help text wrapped at 100 columns in the
source prints broken mid-sentence at any other width. :func:`reflow_help` joins each paragraph's
lines into one, so that the terminal wraps it; what must keep its lines keeps them.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

#: A list item's first line: ``- x``, ``* x``, ``• x``, ``1. x``, ``1) x``.
_ITEM = re.compile(r"(?:[-*•]|\d+[.)])\s")
#: A reStructuredText inline literal, shown as the other help texts show code: ```x```.
_RST_LITERAL = re.compile(r"``(.+?)``")
#: Where a summary's first sentence may end: after a word that is not an abbreviation.
_ABBREVIATIONS = ("al", "e.g", "i.e", "cf", "eq", "vs", "etc", "fig", "no")


def _reflow_paragraph(paragraph: str) -> str:
    """One paragraph's lines joined; a list keeps one line per item, a literal block (``\\b``
    first, as click marks it, or an indented first line) stays as it is."""
    if paragraph.startswith("\b") or paragraph[:1].isspace():
        return paragraph
    lines = paragraph.split("\n")
    out: list[str] = []
    for line in lines:
        if out and not _ITEM.match(line):
            out[-1] += " " + line.strip()
        else:
            out.append(line.strip())
    return "\n".join(out)


def reflow_help(text: str | None) -> str | None:
    """``text`` (a command's or option's help) with each paragraph on one line and reST
    literals as ```x```; paragraphs stay separated by a blank line, anything after click's
    ``\\f`` marker (help hidden from the terminal) is kept as it is."""
    if not text:
        return text
    shown, mark, hidden = inspect.cleandoc(text).partition("\f")
    paragraphs = [p.strip("\n") for p in re.split(r"\n[ \t]*\n", shown)]
    flowed = "\n\n".join(_reflow_paragraph(p) for p in paragraphs if p.strip())
    return _RST_LITERAL.sub(r"`\1`", flowed) + shown[len(shown.rstrip()) :] + mark + hidden


def reflow_command_help(command: Any) -> None:
    """Reflow the help of ``command``, its parameters and its sub-commands, in place."""
    for sub in getattr(command, "commands", {}).values():
        reflow_command_help(sub)
    for attr in ("help", "short_help", "epilog"):
        if isinstance(getattr(command, attr, None), str):
            setattr(command, attr, reflow_help(getattr(command, attr)))
    for param in getattr(command, "params", []):
        if isinstance(getattr(param, "help", None), str):
            param.help = reflow_help(param.help)


def first_sentence(text: str) -> str:
    """The first sentence of a one-paragraph summary, ending with a full stop: it ends at the
    first ``. `` outside parentheses that follows a word other than an abbreviation (et al.,
    e.g., eq.) and precedes a capital letter."""
    depth = 0
    for i, char in enumerate(text):
        depth += (char in "([{") - (char in ")]}")
        if char != "." or depth > 0 or text[i + 1 : i + 2] != " ":
            continue
        following = text[i + 2 : i + 3]
        word = re.search(r"[\w.]*$", text[:i])
        if following.isupper() and (word is None or word.group(0).lower() not in _ABBREVIATIONS):
            return text[: i + 1]
    return text.rstrip(".") + "."
