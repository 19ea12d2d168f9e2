"""Regenerate docs/usage/cli.md from the command definitions: ``python docs/generate_cli.py``.

tests/test_docs.py fails when the committed page differs from what this renders."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer
from capmetrics.cli import get_app

HEADER = """# Command line

`capmetrics` is a typer application. Errors print one message on stderr and exit non-zero
(2 for usage and spec errors, 1 for data and metric errors and outputs that cannot be written,
3 for a bug in capmetrics or a plugin, 128 + N after signal N: 130 Ctrl-C, 143 SIGTERM, 129
SIGHUP, each cleaned up as Ctrl-C is; what each command promises about its outputs:
[guarantees.md](guarantees.md)); `--debug` (or `CAPMETRICS_DEBUG=1`) shows the traceback instead; \
warnings are one line, `Warning: ...`. Plugins can add commands
through the `register_commands` hook. This page is generated from the commands themselves
(`python docs/generate_cli.py`).

What a run shows:

* **Progress** goes to stderr and counts work: items scored, sentences embedded (and what plugins
  report through `capmetrics.engine.progress.work`), with the rate and the time left; one bar per \
run,
  which names the running metric (k/N). Other libraries' bars (transformers' "Loading weights",
  tqdm) are silenced. When stderr is not a terminal nothing is printed, unless `--progress` asks
  for a line every 10 s; `--quiet` (or `--no-progress`) prints none anywhere.
* **The table** (`--format table`, the default on stdout) fits the terminal: metric and value
  first, each signature shortened to what tells the rows apart, the entries shared by every row
  on one line under it; `--signatures` lists the full signatures, which JSON and CSV always carry.
  Piped, the table is as wide as its content.
* `capmetrics plugins` marks the components that cannot run yet and the command that readies
  each (`pip install 'capmetrics[torch]'`, `capmetrics setup spice`); `capmetrics doctor`
  checks the whole installation in one table (versions, torch device, Java, the cache folder,
  extras, every `setup --check`); `capmetrics verify` checks its numbers: every bundled metric
  that runs on text scores the bundled sample, compared with the stored reference values.
  Readiness reads what a run reads: `plugins` looks up the modules of every extra a
  component's run needs (the components nested in it, its defaults, an NNEval model's
  features); `doctor` imports each extra's modules (a broken install is "missing", with
  `pip install --force-reinstall`); `setup meteor --check` parses every cache manifest and
  verifies every checksum, so "ready" means the run will not fail or rebuild.
* **Inputs are bounded.** Data, config and results files must be regular files (a FIFO or
  `/dev/zero` is refused by name before it is read) of at most 1 GiB (`--max-input-size 4G` or
  `$CAPMETRICS_MAX_INPUT_SIZE` raises it; a streamed JSONL file bounds each line); JSON and TOML
  nested past their parser's limit or holding an integer of more than 1000 digits are named
  errors ([formats.md](formats.md#limits)).
"""


def _param(p: Any) -> str:
    if p.param_type_name == "argument":
        return f"| `{p.name.upper()}` | argument{'' if p.required else ' (optional)'} | |"
    names = ", ".join(f"`{o}`" for o in (*p.opts, *p.secondary_opts))
    empty = p.default is None or p.default is False or p.default == () or callable(p.default)
    default = "" if empty else f"default `{p.default}`"
    text = (getattr(p, "help", "") or "").replace("|", "/").replace("\n", " ")
    return f"| {names} | {text} | {default} |"


def _command(path: str, cmd: Any, out: list[str]) -> None:
    if hasattr(cmd, "commands"):
        for name in sorted(cmd.commands):
            _command(f"{path} {name}", cmd.commands[name], out)
        return
    out += [f"## `{path}`", "", " ".join((cmd.help or "").split()), ""]
    params = [p for p in cmd.params if p.name != "help"]
    if params:
        out += [
            "| parameter | meaning | default |",
            "| --- | --- | --- |",
            *map(_param, params),
            "",
        ]


def render() -> str:
    root = typer.main.get_command(get_app())
    out = [
        HEADER,
        "Global options: " + ", ".join(f"`{o}`" for p in root.params for o in p.opts) + "",
        "",
    ]
    for name in sorted(root.commands):
        _command(f"capmetrics {name}", root.commands[name], out)
    return "\n".join(out)


if __name__ == "__main__":
    target = Path(__file__).parent / "usage" / "cli.md"
    target.write_text(render(), encoding="utf-8")
    sys.stdout.write(f"wrote {target}\n")
