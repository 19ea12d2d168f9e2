"""WordNet synsets of a word as Meteor 1.5's ``SynonymDictionary`` gives them, for other metrics.

SPICE 1.0 takes its synonyms from the Meteor 1.5 jar (the same ``synonym/english.*`` files as
pycocoevalcap's ``meteor-1.5.jar``): a concept's synsets are ``getSynSets(word)`` together with
``getStemSynSets(word)`` (the synsets of its base forms: WordNet's exception list, else its suffix
rules). This reads them from the native METEOR's resources, built once per installed jar.
"""

from __future__ import annotations

from functools import lru_cache

from capmetrics.plugins.meteor._lexicon import Lexicon
from capmetrics.plugins.meteor._resources import load_resources


@lru_cache(maxsize=1)
def _english() -> Lexicon:
    return Lexicon(load_resources())


def word_synsets(word: str) -> frozenset[int]:
    """The synset numbers of ``word`` and of its WordNet base forms (Meteor's getSynSets ∪ getStemSynSets)."""
    return _english().synsets(word)
