"""SPICE on text that PTB tokenisation escapes or unescapes (issue 30): the jar's tokenizer
output and pycocoevalcap's SPICE values on 20 items full of ``&apos;``, ``&amp;``, ``&quot;``,
``-LRB-``, quotes, ``'s``, ``n't``, brackets, slashes and non-ASCII (tests/data/spice/escapes.json,
made by running the real jars: make_escapes.py) against capmetrics' whole path."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from capmetrics.plugins import spice
from capmetrics.plugins.spice import _resources
from capmetrics.plugins.spice._graph import CATEGORIES, FIELDS
from capmetrics.plugins.tokenizers import PTBTokenizer

from tests.plugins.test_spice import needs_spice

FIXTURE = json.loads(
    (Path(__file__).resolve().parents[1] / "data" / "spice" / "escapes.json").read_text("utf-8")
)


def test_ptb_tokenizer_gives_the_jars_tokens_on_escaped_text() -> None:
    texts = list(FIXTURE["tokenized"])
    assert PTBTokenizer().tokenize_joined(texts) == [FIXTURE["tokenized"][t] for t in texts]
    assert FIXTURE["tokenized"]["a black and white photo of a riding a horse &apos;s"].endswith(
        "horse 's"
    )


@needs_spice
def test_spice_on_escaped_text_equals_the_jar(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from capmetrics.io.cache import cache_root

    corenlp = str(_resources.find_corenlp()[0].parent)
    (tmp_path / "cache").mkdir()
    if (
        cache_root() / "meteor"
    ).is_dir():  # SPICE's parse cache cold, METEOR's synonym tables built
        (tmp_path / "cache" / "meteor").symlink_to(cache_root() / "meteor")
    monkeypatch.setenv("CAPMETRICS_CACHE_DIR", str(tmp_path / "cache"))
    items = FIXTURE["items"]
    ours = spice.Spice(corenlp=corenlp).score(
        [it["candidate"] for it in items], [it["references"] for it in items]
    )
    assert ours.values[0] == pytest.approx(
        1 / 9, abs=1e-12
    )  # the item: the jar's 1/9, not 2/19
    for category in CATEGORIES:
        for field in FIELDS:
            expected = [
                np.nan if it["scores"][category][field] is None else it["scores"][category][field]
                for it in items
            ]
            np.testing.assert_allclose(
                ours.details[category][field],
                expected,
                rtol=0,
                atol=1e-12,
                err_msg=f"{category}.{field}",
            )
    assert ours.corpus == pytest.approx(FIXTURE["average"], abs=1e-12)
