"""WordNet synsets of a word as Meteor 1.5's ``SynonymDictionary`` gives them, for other metrics.

SPICE 1.0 takes its synonyms from the Meteor 1.5 jar (the same ``synonym/english.*`` files as
pycocoevalcap's ``meteor-1.5.jar``): a concept's synsets are ``getSynSets(word)`` together with
``getStemSynSets(word)`` (the synsets of its base forms: WordNet's exception list, else its suffix
rules). This reads them from the native METEOR's resources, built once per installed jar; only
the synonym tables (a second or two to build), never the paraphrase table, whose arrays are most
of METEOR's first use and which synsets do not need.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from capmetrics.plugins.meteor._lexicon import Lexicon
from capmetrics.plugins.meteor._resources import (
    CACHE_VERSION,
    Resources,
    _build_synonyms,
    _jar_text,
    _lines,
    cache_root,
    resource_key,
)
from capmetrics.plugins.meteor._tables import Ragged, StringIndex, cached_arrays
from capmetrics.plugins.meteor.jar import meteor_files


def synonym_resources() -> Resources:
    """METEOR's function words and synonym tables (the same cache folder as METEOR's), with an
    empty paraphrase table."""
    jar, table = meteor_files()
    meta = {"jar": str(jar), "table": str(table), "version": CACHE_VERSION}
    synonyms = cached_arrays(
        cache_root() / "meteor" / resource_key() / "synonyms", lambda: _build_synonyms(jar), meta
    )
    empty = {
        **StringIndex.build([]).arrays("vocab"),
        **Ragged.build([]).arrays("phrase_words"),
        **Ragged.build([]).arrays("para"),
        "phrase_keys": np.zeros(0, dtype=np.uint64),
        "phrase_order": np.zeros(0, dtype=np.int32),
        "max_len": np.zeros(1, dtype=np.int64),
    }
    return Resources(
        frozenset(_lines(_jar_text(jar, "function/english.words"))), {**synonyms, **empty}
    )


@lru_cache(maxsize=1)
def _english() -> Lexicon:
    return Lexicon(synonym_resources())


def word_synsets(word: str) -> frozenset[int]:
    """The synset numbers of ``word`` and of its WordNet base forms (Meteor's getSynSets ∪
    getStemSynSets)."""
    return _english().synsets(word)
