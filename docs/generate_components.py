"""Regenerate docs/components.md from the registry: ``python docs/generate_components.py``.

tests/test_docs.py fails when the committed page differs from what this prints."""

from __future__ import annotations

import sys
from pathlib import Path

from capmetrics.registry import METRIC_KINDS, get_registry, parameter_help

TITLES = {
    "distance": "Distances (classic and embedding metrics)",
    "embedder": "Embedders",
    "aggregator": "Aggregators",
    "statistic": "Multi-candidate statistics",
    "tokenizer": "Tokenizers",
    "learner": "Learners",
    "probability-source": "Probability sources (pre-gen)",
    "image-text-model": "Image–text models (for clip-score and kin)",
    "image-text-metric": "Image–text metrics (captions scored with their images)",
}
HEADER = """# Bundled components

Every component below is registered by a bundled plugin (an entry point of capmetrics itself) and
is usable by name in any spec. `capmetrics plugins` lists what is installed, third-party plugins
included. Parameters are the constructor parameters; those at their default are left out of
canonical specs. Metric notes: [metrics/](metrics/); the spec language: \
[usage/specs.md](usage/specs.md).
"""


#: pycocoevalcap's result keys, which name these components (spellings compare case- and
#: ``_``/``-``-insensitively, so ``Bleu_4`` is ``bleu-4``).
COCO_NAMES = {
    "bleu-1": "Bleu_1",
    "bleu-2": "Bleu_2",
    "bleu-3": "Bleu_3",
    "bleu-4": "Bleu_4",
    "meteor": "METEOR",
    "rouge-l": "ROUGE_L",
    "cider-d": "CIDEr",
    "spice": "SPICE",
}

#: Each metric's range as capmetrics (and coco-caption) reports it, and the scale papers print.
SCALES = {
    "bleu-1": ("0 – 1", "× 100"),
    "bleu-2": ("0 – 1", "× 100"),
    "bleu-3": ("0 – 1", "× 100"),
    "bleu-4": ("0 – 1", "× 100"),
    "meteor": ("0 – 1", "× 100"),
    "meteor-jar": ("0 – 1", "× 100"),
    "rouge-l": ("0 – 1", "× 100"),
    "cider-d": ("0 – 10 (× 10 built in; captions score about 0 – 2)", "× 100"),
    "cider-original": ("0 – 10 (× 10 built in)", "× 100"),
    "spice": ("0 – 1", "× 100"),
    "wmd": ("0 – 1 (exp(−d/σ))", "× 100"),
    "wembsim": ("−1 – 1 (cosine)", "× 1"),
    "embedding-cosine": ("−1 – 1 (cosine)", "× 1"),
    "bertscore": ("−1 – 1 (≈ 0.8 – 1 for captions; rescaled with `baseline`)", "× 100"),
    "nneval": ("0 – 1 (a probability)", "× 1"),
    "clip-score": ("0 – 2.5 (w · max(cos, 0), w = 2.5)", "× 100"),
    "ref-clip-score": ("0 – 2.5", "× 100"),
    "pac-score": ("0 – 2 (w = 2)", "× 100"),
    "ref-pac-score": ("0 – 2", "× 100"),
    "trm": ("0 – 4/3 (Q: 0 when candidates and references are alike), with a p-value", "× 1"),
    "mmd": ("≥ 0, with a p-value", "× 1"),
    "frechet": ("≥ 0, with a p-value", "× 1"),
    "mauve": ("0 – 1", "× 100"),
    "over-candidates": ("the wrapped distance's", "the wrapped distance's"),
    "capture": ("0 – 1", "× 100"),
    "chair": ("0 – 1 (lower is better)", "× 100"),
}

NAMES_HEADER = """## Metric names and scales

Every name in a row gives the same metric (names compare case-insensitively, `_` as `-`), so
pycocoevalcap's result keys work as they are: `-m CIDEr`, `results["Bleu_4"]`. As in
coco-caption and caption papers, **`cider` and `CIDEr` are CIDEr-D**; the original CIDEr of
Vedantam et al. is `cider-original`. Values are on coco-caption's scale (BLEU 0.362); papers print
most of them × 100 (a BLEU-4 of 0.362 is printed 36.2, a CIDEr-D of 1.201 as 120.1).

| metric | also named | range (as capmetrics reports it) | scale in papers |
| --- | --- | --- | --- |"""


def names_and_scales(registry) -> list[str]:  # type: ignore[no-untyped-def]
    """The table of every metric's names (aliases, pycocoevalcap's key), range and paper scale."""
    lines = [NAMES_HEADER]
    for kind in METRIC_KINDS:
        for e in registry.components(kind):
            if e.plugin.distribution != "capmetrics":
                continue
            names = [f"`{a}`" for a in e.aliases] + (
                [f"`{COCO_NAMES[e.name]}`"] if e.name in COCO_NAMES else []
            )
            value_range, paper = SCALES.get(e.name, ("see its page", ""))
            lines.append(
                f"| `{e.name}` | {', '.join(names) or '–'} | {value_range} | {paper or '–'} |"
            )
    lines.append("")
    return lines


def render() -> str:
    registry = get_registry()
    lines = [HEADER, *names_and_scales(registry)]
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
