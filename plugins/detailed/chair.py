"""``chair``: CHAIR_s and CHAIR_i (Rohrbach et al. 2018) as LisaAnne/Hallucination's chair.py
computes them, offline.

An image's objects are the COCO objects of its instance annotations (``instances``: a COCO
``instances_*.json``, the item id being the image id) together with those its reference captions
name, as chair.py's ``get_annotations`` takes both; without ``instances``, those the references
name. A candidate's mentioned objects come from ``_chair.mentions``; each mention whose object is
not among the image's is a hallucination. Per caption: CHAIR_s is 1 if it hallucinates at all,
CHAIR_i the hallucinated mentions over all mentions (0 without mentions); over the corpus, CHAIR_s
is the mean and CHAIR_i the hallucinated mentions over all mentions (chair.py's ratio of sums).
``details`` also hold capmetrics' own complement, ``coverage``: the share of the image's objects
a caption names (NaN for an image without objects).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import numpy as np
from capmetrics import Distance, Scores
from capmetrics.errors import MetricError
from capmetrics.io.digests import file_digest
from capmetrics.plugins.detailed import _chair
from capmetrics.plugins.detailed._wordnet import wordnet as load_wordnet

#: The bundled synonym table (chair.py's format), built from COCO's categories and WordNet 3.0
#: by ``experiments/chair_synonym_table.py``; docs/metrics/detailed-captions.md says how.
DEFAULT_SYNONYMS = Path(__file__).with_name("chair_synonyms.txt")
MEASURES = ("s", "i")


def _sha256(path: Path) -> str:
    return file_digest(path)[:16]


def read_instances(path: str) -> tuple[dict[str, str], dict[Any, list[str]], frozenset[Any] | None]:
    """A COCO instances file: category id -> name, image id -> category names of its
    annotations, and the image ids it lists (None without an ``images`` list); read once per
    version of the file (its path, size and modification time)."""
    return _read_instances(path, *_version(path))


def _version(path: str) -> tuple[int, int]:
    try:
        st = Path(path).expanduser().stat()
    except OSError:
        return (-1, -1)  # read_json names the problem
    return (st.st_size, st.st_mtime_ns)


@lru_cache(maxsize=4)
def _read_instances(
    path: str, size: int, mtime: int
) -> tuple[dict[str, str], dict[Any, list[str]], frozenset[Any] | None]:
    from capmetrics.io.strict_json import read_json

    # bounded as every JSON a user gives: regular file, size limit, nesting (one-line DataError)
    data = read_json(Path(path).expanduser(), "a COCO instances file")
    if (
        not isinstance(data, dict)
        or not isinstance(data.get("categories"), list)
        or not isinstance(data.get("annotations"), list)
    ):
        raise MetricError(
            f"chair: {path} is not a COCO instances file (needs 'categories' and 'annotations')"
        )
    names = {}
    for k, cat in enumerate(data["categories"]):
        if not isinstance(cat, dict) or "id" not in cat or not isinstance(cat.get("name"), str):
            raise MetricError(f"chair: {path}: category {k} needs an 'id' and a string 'name'")
        names[cat["id"]] = cat["name"]
    objects: dict[Any, list[str]] = {}
    for k, ann in enumerate(data["annotations"]):
        if (
            not isinstance(ann, dict)
            or ann.get("category_id") not in names
            or "image_id" not in ann
        ):
            raise MetricError(
                f"chair: {path}: annotation {k} needs an 'image_id' and a known 'category_id'"
            )
        objects.setdefault(ann["image_id"], []).append(names[ann["category_id"]])
    images = data.get("images")
    ids = (
        frozenset(img.get("id") for img in images if isinstance(img, dict))
        if isinstance(images, list)
        else None
    )
    return names, objects, ids


class Chair(Distance):
    """CHAIR: the COCO objects a caption names that are not in the image (lower is better).

    Args:
        instances: a COCO instances file (``instances_val2014.json``); the items' ids are its
            image ids. None: an image's objects are those its reference captions name.
        synonyms: a synonym table in chair.py's ``synonyms.txt`` format (its own file
            reproduces a paper's numbers); default: capmetrics' table from COCO and WordNet.
        measure: ``s`` (CHAIR_s) or ``i`` (CHAIR_i); ``details["coverage"]`` holds the share of
            the image's objects each caption names.
        wordnet: folder of WordNet 3.0's files (for singular forms); see ``capture``.
    """

    name = "chair"
    languages = ("en",)  # COCO's English object words and their English synonyms
    requires = ("detailed",)
    higher_is_better = False
    accepts_empty_candidates = True  # no mentions: CHAIR_s 0, CHAIR_i 0 (chair.py's values)
    needs_items = True
    path_params = ("instances", "synonyms", "wordnet")

    def __init__(
        self,
        instances: str | None = None,
        synonyms: str | None = None,
        measure: Literal["s", "i"] = "s",
        wordnet: str | None = None,
    ) -> None:
        if measure not in MEASURES:
            raise MetricError(f"chair: measure must be s or i, got {measure!r}")
        self.instances = instances
        self.synonyms = synonyms
        self.measure = measure
        self.wordnet = wordnet

    def signature_extra(self) -> dict[str, str]:
        table = Path(self.synonyms).expanduser() if self.synonyms else DEFAULT_SYNONYMS
        extra = {
            "objects": "instances+references" if self.instances else "references",
            "synonyms": ("capmetrics-coco-wordnet:" if not self.synonyms else "file:")
            + _sha256(table),
            "wordnet": "3.0",
            "tokenizer": "nltk-word-tokenize(untrained-punkt)",
        }
        if self.instances:
            extra["instances"] = _sha256(Path(self.instances).expanduser())
        return extra

    def vocabulary(self) -> _chair.Vocabulary:
        path = str(self.synonyms or DEFAULT_SYNONYMS)
        return _chair.read_vocabulary(path, *_version(path))

    def score(self, candidates: Sequence[str], references: Sequence[Sequence[str]]) -> Scores:
        if self.instances:
            raise MetricError("chair(instances=...) needs the items' image ids: score a dataset")
        return self.score_items(candidates, references, [None] * len(candidates))

    def score_items(
        self, candidates: Sequence[str], references: Sequence[Sequence[str]], items: Sequence[Any]
    ) -> Scores:
        vocabulary = self.vocabulary()
        net = load_wordnet(self.wordnet)
        singular = lambda w: net.lemmatize(w, "n")
        pairs = _chair.two_word_table()
        truth = self._image_objects(references, items, vocabulary, singular, pairs)
        n = len(candidates)
        hallucinated: list[list[list[str]]] = []
        covered: list[list[str]] = []
        named: list[list[str]] = []
        counts = np.zeros((n, 2), dtype=np.int64)  # mentions, hallucinated mentions
        coverage = np.full(n, np.nan)
        for i, caption in enumerate(candidates):
            m = _chair.mentions(caption, vocabulary, singular, pairs)
            gt = truth[i]
            wrong = [[w, o] for w, o in zip(m.words, m.objects) if o not in gt]
            hallucinated.append(wrong)
            covered.append(sorted(gt.intersection(m.objects)))
            named.append(list(m.objects))
            counts[i] = (len(m.words), len(wrong))
            if gt:
                coverage[i] = len(covered[-1]) / len(gt)
        chair_s = (counts[:, 1] > 0).astype(float)
        chair_i = np.where(counts[:, 0] > 0, counts[:, 1] / np.maximum(counts[:, 0], 1), 0.0)
        details: dict[str, Any] = {
            "chair_s": chair_s,
            "chair_i": chair_i,
            "coverage": coverage,
            "mentions": counts[:, 0],
            "hallucinations": counts[:, 1],
            "hallucinated": hallucinated,
            "covered": covered,
            "mentioned": named,
            "image_objects": [sorted(t) for t in truth],
        }
        if self.measure == "s":
            values, corpus = chair_s, float(chair_s.mean()) if n else float("nan")
        else:
            total = int(counts[:, 0].sum())
            values, corpus = chair_i, (int(counts[:, 1].sum()) / total if total else float("nan"))
        return Scores(values.copy(), corpus, details)

    def _image_objects(
        self,
        references: Sequence[Sequence[str]],
        items: Sequence[Any],
        vocabulary: _chair.Vocabulary,
        singular: Any,
        pairs: dict[str, str],
    ) -> list[set[str]]:
        """Per candidate: its image's objects (instances, then what its references name)."""
        by_refs: dict[tuple[str, ...], set[str]] = {}
        out = []
        annotated: dict[Any, list[str]] = {}
        ids = None
        if self.instances:
            _, annotated, ids = read_instances(str(self.instances))
            unknown = sorted(
                {str(it.id) for it in items if _image_key(it.id, annotated, ids) is None}, key=str
            )
            if unknown:
                raise MetricError(
                    f"chair: item id(s) {unknown[:10]} are not image ids of "
                    f"{Path(self.instances).name}"
                )
        for refs, item in zip(references, items):
            key = tuple(refs)
            if key not in by_refs:
                by_refs[key] = _chair.objects_of(refs, vocabulary, singular, pairs)
            objects = set(by_refs[key])
            if self.instances:
                for name in annotated.get(_image_key(item.id, annotated, ids), ()):
                    if name not in vocabulary.object_of:
                        raise MetricError(
                            f"chair: the COCO category {name!r} is not in the synonym table"
                        )
                    objects.add(vocabulary.object_of[name])
            out.append(objects)
        return out


def _image_key(item_id: Any, annotated: dict[Any, list[str]], ids: frozenset[Any] | None) -> Any:
    """The instances file's image id of an item (the same value, or the same digits)."""
    known = ids if ids is not None else annotated.keys()
    for key in (item_id, str(item_id), int(item_id) if str(item_id).isdigit() else None):
        if key is not None and key in known:
            return key
    return None if ids is not None else item_id
