"""``capture``: CAPTURE (Dong et al. 2024) on given or CoreNLP scene graphs, offline.

Scores as CAPTURE's ``compute_f_score`` and ``compute_score`` do (see ``_capture``): each
candidate against each of its item's references, the candidate's value the mean over them. The
graphs are the item's own (``candidate_graph(s)``/``reference_graphs`` in FACTUAL's format, so
that FACTUAL parses give CAPTURE's numbers) or, for items without, SPICE's CoreNLP parse of each
sentence (cached); ``details["parser"]`` and the signature say which.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from capmetrics import Distance, Embedder, Scores
from capmetrics.errors import MetricError
from capmetrics.plugins.detailed import _capture
from capmetrics.plugins.detailed._graphs import Parsed, check_factual, from_tuples, merge
from capmetrics.plugins.detailed._wordnet import wordnet as load_wordnet
from capmetrics.plugins.embeddings.sentence import SentenceTransformerEmbedder

#: Which parser made the graphs, as the signature names it.
PARSERS = {
    "given": "given (FACTUAL format)",
    "corenlp": "corenlp-3.6.0 (spice-1.0 parser, per sentence)",
}
#: The default soft-matching embedder: all-MiniLM-L6-v2, bundled.
BERT = SentenceTransformerEmbedder()
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def sentences(text: str) -> list[str]:
    """A caption's sentences: split after ``.``, ``!`` or ``?`` followed by white space."""
    return [s for s in (p.strip() for p in _SENTENCE_END.split(text)) if s]


class Capture(Distance):
    """CAPTURE: object, attribute and relation F1 between scene graphs, weighted.

    Args:
        alpha, beta, gamma: weights of the object, attribute and relation F1 (``alpha + beta``
            must be 1, as CAPTURE asserts).
        synonym_matching: match what exact matching left through WordNet 3.0 synonyms.
        soft_matching: then match the rest by embedding cosine (``embedder``).
        stop_words: drop objects in CAPTURE's stop-word list ("background", "scene", ...).
        eps: added to every denominator, as CAPTURE's ``eps``.
        embedder: the text embedder of soft matching (default ``bert``: all-MiniLM-L6-v2, offline;
            CAPTURE uses all-mpnet-base-v2: ``bert(model=PATH)`` where you have it).
        graphs: ``auto`` (the items' graphs where every item carries them, else CoreNLP's),
            ``given`` (require them) or ``corenlp`` (parse the captions, ignoring given graphs).
        wordnet: folder of WordNet 3.0's files (default: ``$CAPMETRICS_WORDNET_DIR``, NLTK's
            data, then Debian's ``wordnet-base``).
        category: ``all`` (CAPTURE) or one category's value: ``object``, ``attribute``,
            ``relation``.
        part: with a category: ``f`` (F1), ``p`` (precision, the hallucination side) or ``r``
            (recall, the coverage side).
    """

    name = "capture"
    requires = ("detailed",)
    languages = ("en",)  # CoreNLP's English parse, WordNet synonyms, English stop words
    higher_is_better = True
    distance_offset = 1.0
    accepts_empty_candidates = True  # an empty graph: every precision, recall and F1 is 0
    needs_items = True
    path_params = ("wordnet",)

    def __init__(
        self,
        alpha: float = 0.5,
        beta: float = 0.5,
        gamma: float = 0.2,
        synonym_matching: bool = True,
        soft_matching: bool = True,
        stop_words: bool = True,
        eps: float = 1e-6,
        embedder: Embedder = BERT,
        graphs: Literal["auto", "given", "corenlp"] = "auto",
        wordnet: str | None = None,
        category: str = "all",
        part: Literal["f", "p", "r"] = "f",
    ) -> None:
        if alpha + beta != 1.0:
            raise MetricError(
                f"capture: alpha + beta must be 1 (CAPTURE asserts it), got {alpha} + {beta}"
            )
        if graphs not in ("auto", "given", "corenlp"):
            raise MetricError(f"capture: graphs must be auto, given or corenlp, got {graphs!r}")
        if category not in ("all", *_capture.CATEGORIES):
            raise MetricError(
                f"capture: unknown category {category!r}; one of all, object, attribute, relation"
            )
        if part not in ("f", "p", "r") or (category == "all" and part != "f"):
            raise MetricError(f"capture: part must be f, p or r (f for category=all), got {part!r}")
        self.alpha = alpha
        self.beta = beta
        self.gamma = gamma
        self.synonym_matching = synonym_matching
        self.soft_matching = soft_matching
        self.stop_words = stop_words
        self.eps = eps
        self.embedder = embedder
        self.graphs = graphs
        self.wordnet = wordnet
        self.category = category
        self.part = part

    def value_name(self) -> str:
        """The ``details`` entry that gives the values."""
        if self.category == "all":
            return "capture"
        return f"{self.category}_{ {'f': 'f1', 'p': 'precision', 'r': 'recall'}[self.part] }"

    def signature(self) -> dict[str, str]:
        if self.soft_matching:
            return super().signature()
        # without soft matching the embedder plays no part (and is not loaded to be named)
        return {"spec": self.portable_spec(), **self.signature_extra()}

    def signature_extra(self) -> dict[str, str]:
        # the parser of the last run's graphs (before a run: the graphs parameter)
        return {"parser": PARSERS.get(getattr(self, "_parser", ""), self.graphs), "wordnet": "3.0"}

    # -- scoring ---------------------------------------------------------------------------
    def score(self, candidates: Sequence[str], references: Sequence[Sequence[str]]) -> Scores:
        return self.score_items(candidates, references, [None] * len(candidates))

    def score_items(
        self, candidates: Sequence[str], references: Sequence[Sequence[str]], items: Sequence[Any]
    ) -> Scores:
        if len(candidates) != len(references) or len(items) != len(candidates):
            raise MetricError(
                f"capture: {len(candidates)} candidates, {len(references)} reference lists"
            )
        net = load_wordnet(self.wordnet)
        pairs = self._graph_pairs(candidates, references, items)
        parse = {}  # caption graphs merged once per distinct graph
        cands = [self._parsed(c, parse, net) for c, _ in pairs]
        refs = [[self._parsed(r, parse, net) for r in rs] for _, rs in pairs]
        synonym = _capture.word_synonyms(net.synonyms) if self.synonym_matching else None
        found = [[_capture.matches(c, r, synonym) for r in rs] for c, rs in zip(cands, refs)]
        vectors = self._vectors(found)
        rows = np.zeros((len(candidates), len(_capture.VALUES)))
        for i, per_ref in enumerate(found):
            if not per_ref:
                raise MetricError(f"capture: candidate {i} has no references")
            results = []
            for ms in per_ref:
                gains = [_capture.soft_gain(m, vectors) if vectors else (0.0, 0.0) for m in ms]
                results.append(
                    _capture.f_scores(ms, gains, self.alpha, self.beta, self.gamma, self.eps)
                )
            for k in range(len(_capture.VALUES)):
                rows[i, k] = sum(r[k] for r in results) / len(results)
        details: dict[str, Any] = {
            name: rows[:, k].copy() for k, name in enumerate(_capture.VALUES)
        }
        details["parser"] = PARSERS[self._parser]
        values = details[self.value_name()].copy()
        return Scores(values, float(values.mean()) if len(values) else float("nan"), details)

    def _graph_pairs(
        self, candidates: Sequence[str], references: Sequence[Sequence[str]], items: Sequence[Any]
    ) -> list[tuple[Any, list[Any]]]:
        """Per candidate: its graph and its references' graphs (given, or CoreNLP's tuples)."""
        carried = [
            it is not None and it.candidate_graphs is not None and it.reference_graphs is not None
            for it in items
        ]
        use_given = self.graphs == "given" or (self.graphs == "auto" and carried and all(carried))
        if self.graphs == "auto" and any(carried) and not all(carried):
            missing = sorted(
                {
                    items[i].id if items[i] is not None else i
                    for i, c in enumerate(carried)
                    if not c
                },
                key=str,
            )
            raise MetricError(
                f"capture: some items carry scene graphs and item(s) {missing[:10]} do not; give "
                "candidate_graph and reference_graphs for every item, or use "
                "capture(graphs=corenlp)"
            )
        if use_given:
            self._parser = "given"
            return self._given(candidates, items, carried)
        self._parser = "corenlp"
        parsed = corenlp_graphs([*candidates, *(r for rs in references for r in rs)])
        return [
            (("corenlp", parsed[c]), [("corenlp", parsed[r]) for r in rs])
            for c, rs in zip(candidates, references)
        ]

    def _given(
        self, candidates: Sequence[str], items: Sequence[Any], carried: list[bool]
    ) -> list[tuple[Any, list[Any]]]:
        if not all(carried):
            first = next(i for i, c in enumerate(carried) if not c)
            name = items[first].id if items[first] is not None else first
            raise MetricError(
                f"capture(graphs=given): item {name!r} carries no candidate_graph and "
                "reference_graphs"
            )
        out = []
        j = 0
        for i, item in enumerate(items):
            j = j + 1 if i and items[i - 1] is item else 0
            where = f"capture: item {item.id!r}"
            cand = (
                "given",
                id(item),
                "c",
                j,
                check_factual(item.candidate_graphs[j], f"{where}, candidate {j} graph"),
            )
            refs = [
                ("given", id(item), "r", k, check_factual(g, f"{where}, reference {k} graph"))
                for k, g in enumerate(item.reference_graphs)
            ]
            out.append((cand, refs))
        return out

    def _parsed(self, graph: Any, cache: dict[Any, Parsed], net: Any) -> Parsed:
        key = graph[:-1] if graph[0] == "given" else graph[1]
        found = cache.get(key)
        if found is None:
            graphs = graph[-1] if graph[0] == "given" else [from_tuples(t) for t in graph[1]]
            found = cache[key] = merge(graphs, net, self.stop_words)
        return found

    def _vectors(self, found: list[list[tuple[_capture.Match, ...]]]) -> Any:
        """Unit vectors of every phrase soft matching needs, embedded in one call."""
        if not self.soft_matching:
            return None
        phrases: dict[str, None] = {}
        for per_ref in found:
            for ms in per_ref:
                for m in ms:
                    if m.left_candidates and m.left_references:
                        phrases.update(dict.fromkeys(m.left_candidates))
                        phrases.update(dict.fromkeys(m.left_references))
        if not phrases:
            return None
        texts = sorted(phrases)  # the same batches whatever the items' order
        table = _capture.unit_rows(np.asarray(self.embedder.embed_texts(texts), dtype=np.float32))
        index = {t: k for k, t in enumerate(texts)}
        return lambda wanted: table[[index[t] for t in wanted]]


def corenlp_graphs(texts: Sequence[str]) -> dict[str, tuple[tuple[tuple[str, ...], ...], ...]]:
    """Each text's sentences parsed by SPICE's CoreNLP parser (tokenized as SPICE does, each
    distinct sentence parsed once, ever, through SPICE's parse cache): text -> per-sentence
    tuples."""
    from capmetrics.plugins.spice import Spice, parse_cache

    spice = Spice()
    distinct = list(dict.fromkeys(texts))
    split = {t: sentences(t) for t in distinct}
    flat = list(dict.fromkeys(s for t in distinct for s in split[t]))
    tokens = dict(zip(flat, spice.tokenizer.tokenize_joined(flat))) if flat else {}
    wanted = [x for x in dict.fromkeys(tokens.values()) if x.strip()]
    store = parse_cache() if spice.cache else None
    entries = store.get_many(wanted) if store is not None else {}
    todo = [x for x in wanted if x not in entries]
    if todo:
        entries = {**entries, **spice.parse_new(todo, store, todo, [()] * len(todo))}
    out = {}
    for t in distinct:
        out[t] = tuple(
            tuple(tuple(x) for x in entries[tokens[s]]["tuples"])
            for s in split[t]
            if tokens[s].strip()
        )
    return out
