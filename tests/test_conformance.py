"""The conformance kit over every registered component, parametrised from the registry: a new
plugin is covered without editing this file. Components that cannot run offline with their
defaults are listed, with the reason, in NEEDS_USER_FILES (the one place)."""

from __future__ import annotations

import pytest
from capmetrics.components.base import KINDS
from capmetrics.registry import get_registry
from capmetrics.testing import parametrize_with_checks, registered_specs

#: Components the kit cannot build from their defaults on this machine, and where they are tested.
NEEDS_USER_FILES = {
    "spice": (
        "each new caption starts CoreNLP (about a minute); "
        "tests/plugins/test_spice.py checks 40 items against the jar"
    ),
    "nneval": "scores with 7 feature metrics (about a minute here); tests/plugins/nneval/ cover it",
    "clip": "needs a CLIP model folder (tests/plugins/test_bow_clip.py builds a tiny one)",
    "elmo": "needs ELMo options/weights files (tests/plugins/test_embedders.py builds a tiny one)",
    "fasttext": "needs a fastText file (tests/plugins/test_embedders.py trains one on Flickr8k)",
    "word2vec": "needs a word2vec file (tests/plugins/test_embedders.py trains one on Flickr8k)",
    "prob-file": "needs a probabilities file (tests/plugins/test_pregen_sources.py)",
    "torch-model": "needs the user's torch caption model (tests/plugins/test_pregen_sources.py)",
    "hf-causal-lm": "needs a Hugging Face causal LM (tests/plugins/test_pregen_sources.py, slow)",
    **{
        name: (
            "needs a CLIP checkpoint and images "
            "(tests/plugins/test_clip_score.py builds a tiny CLIP)"
        )
        for name in ("clip-score", "ref-clip-score", "pac-score", "ref-pac-score", "clip-model")
    },
}


def kit_specs() -> list[str]:
    return [s for s in registered_specs(KINDS) if s.split("(")[0] not in NEEDS_USER_FILES]


#: Components that parse with SPICE's CoreNLP: the kit's 1,000-token caption makes the parsing JVM
#: run out of memory, which capture reports as a MetricError (the check's accepted outcome). The
#: parser starts a JVM again for what a dead one left (RETRIES), so that caption would cost three
#: out-of-memory runs (~45 s on 2 cores); here one shows the outcome. tests/plugins/test_spice.py
#: checks the retries themselves ("the parser failed 3 times").
PARSES_WITH_CORENLP = {"capture"}


@parametrize_with_checks(kit_specs())
def test_registered_component(component, check, monkeypatch):
    if component.split("(")[0] in PARSES_WITH_CORENLP:
        from capmetrics.plugins.spice import _parse

        monkeypatch.setattr(_parse, "RETRIES", 0)
    check(component)


def test_every_excluded_component_exists():
    """The exclusion list names only registered components (no stale entries)."""
    names = {e.name for e in get_registry().components()}
    assert set(NEEDS_USER_FILES) <= names


def test_kit_covers_every_metric():
    covered = {s.split("(")[0] for s in kit_specs()}
    for kind in ("distance", "statistic"):
        for entry in get_registry().components(kind):
            assert entry.name in covered or entry.name in NEEDS_USER_FILES, entry.name
    assert {"bleu-4", "cider-d", "meteor", "trm", "mmd", "embedding-cosine", "wmd"} <= covered


@pytest.mark.parametrize("spec", ['nneval(model="/nonexistent/model")'])
def test_user_file_metrics_fail_with_a_named_error(spec):
    """Without their files these metrics refuse with a capmetrics error, not a traceback."""
    import capmetrics
    from capmetrics import CapmetricsError
    from capmetrics.testing import default_dataset

    with pytest.raises(CapmetricsError) as info:
        capmetrics.score(default_dataset(2), [spec])
    assert "internal error" not in str(info.value)
