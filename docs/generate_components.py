"""Regenerate docs/components.md from the registry: ``python docs/generate_components.py``.

tests/test_docs.py fails when the committed page differs from what this prints."""

from __future__ import annotations

import sys
from pathlib import Path

from capmetrics.registry import get_registry, parameter_help

TITLES = {
    "distance": "Distances (classic and embedding metrics)",
    "embedder": "Embedders",
    "aggregator": "Aggregators",
    "statistic": "Multi-candidate statistics",
    "tokenizer": "Tokenizers",
    "learner": "Learners",
    "probability-source": "Probability sources (pre-gen)",
}
HEADER = """# Bundled components

Every component below is registered by a bundled plugin (an entry point of capmetrics itself) and
is usable by name in any spec. `capmetrics plugins` lists what is installed, third-party plugins
included. Parameters are the constructor parameters; those at their default are left out of
canonical specs. Metric notes: [metrics/](metrics/); the spec language: [usage/specs.md](usage/specs.md).
"""


def render() -> str:
    registry = get_registry()
    lines = [HEADER]
    for kind, title in TITLES.items():
        entries = [e for e in registry.components(kind) if e.plugin.distribution == "capmetrics"]
        if not entries:
            continue
        lines += [f"## {title}", "", "| name | what it is | parameters |", "| --- | --- | --- |"]
        for e in entries:
            name = f"`{e.name}`"
            if e.aliases:
                name += " (aliases: " + ", ".join(f"`{a}`" for a in e.aliases) + ")"
            params = parameter_help(e.cls).split(" accepts: ", 1)[1].replace("|", "\\|")
            lines.append(f"| {name} | {e.summary_markdown.replace('|', '/')} | {params} |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    target = Path(__file__).with_name("components.md")
    target.write_text(render(), encoding="utf-8")
    sys.stdout.write(f"wrote {target}\n")
