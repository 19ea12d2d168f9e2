"""``chair`` against LisaAnne/Hallucination's chair.py (fixtures:
experiments/chair_reference_fixtures.py, which says how the Python 2 original was run) and by
hand."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import capmetrics
import numpy as np
import pytest
from capmetrics.errors import CapmetricsError, MetricError

pytest.importorskip("nltk")
from capmetrics.plugins.detailed import _wordnet
from capmetrics.plugins.detailed._chair import Vocabulary, mentions, two_word_table
from capmetrics.plugins.detailed.chair import DEFAULT_SYNONYMS, Chair

try:
    _wordnet.find_wordnet()
except MetricError as err:  # pragma: no cover - CI installs wordnet-base
    pytest.skip(f"no WordNet 3.0: {err}", allow_module_level=True)

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "chair"
REFERENCE = json.loads((DATA / "reference.json").read_text())
ITEMS = DATA / "items.jsonl"


@pytest.mark.filterwarnings("ignore:1 empty candidate")
@pytest.mark.parametrize("case", ["instances_and_captions", "captions_only"])
def test_equals_chair_py(case) -> None:  # type: ignore[no-untyped-def]
    expected = REFERENCE[case]
    instances = (
        f', instances="{DATA / "instances.json"}"' if case == "instances_and_captions" else ""
    )
    specs = [
        f'chair(synonyms="{DATA / "synonyms.txt"}"{instances})',
        f'chair(synonyms="{DATA / "synonyms.txt"}"{instances}, measure=i)',
    ]
    results = capmetrics.score(str(ITEMS), specs)
    s, i = results[specs[0]], results[specs[1]]
    assert s.corpus == expected["overall"]["CHAIRs"] and i.corpus == expected["overall"]["CHAIRi"]
    assert s.signature["objects"] == ("instances+references" if instances else "references")
    for k, item in enumerate(s.item_ids):
        ref = expected["sentences"][str(item)]
        assert s.item_values[k] == ref["CHAIRs"] and i.item_values[k] == ref["CHAIRi"], item
        assert s.details["hallucinated"][k] == [list(p) for p in ref["hallucinated"]], item
        assert s.details["mentioned"][k] == ref["generated"], item
        assert s.details["image_objects"][k] == ref["gt"], item
    assert (
        sum(len(h) for h in s.details["hallucinated"]) >= 10
    )  # the fixture hallucinates, in many ways


def test_two_word_objects_and_special_rules() -> None:
    vocab = Vocabulary.from_text(
        "person, man, baby\nbird\ntoilet\nchair, seat\ntie\nhot dog\nairplane, jet\n", "t"
    )
    net = _wordnet.wordnet()
    found = mentions(
        "A man holds two hot dogs. Baby birds sit on the toilet seat; "
        "a passenger jet wears a bow tie.",
        vocab,
        lambda w: net.lemmatize(w, "n"),
        two_word_table(),
    )
    assert found.objects == ("person", "hot dog", "bird", "toilet", "airplane", "tie")
    assert "seat" not in found.words  # a toilet's seat is not a chair


def test_by_hand_with_the_default_table() -> None:
    """Objects from the references (person, dog); the candidate names person, dog, hot dog and
    car."""
    chair = Chair(measure="i")
    s = chair.score(
        ["A man and his puppy share a hot dog next to a car."], [["A person with a dog.", "A man."]]
    )
    assert s.details["mentioned"][0] == ["person", "dog", "hot dog", "car"]
    assert s.details["hallucinated"][0] == [["hot dog", "hot dog"], ["car", "car"]]
    assert s.values[0] == 0.5 and s.corpus == 0.5 and s.details["chair_s"][0] == 1.0
    assert s.details["covered"][0] == ["dog", "person"] and s.details["coverage"][0] == 1.0


def test_default_table_is_built_from_coco_and_wordnet() -> None:
    rows = [line.split(", ") for line in DEFAULT_SYNONYMS.read_text().splitlines()]
    assert len(rows) == 80 and rows[0][0] == "person" and rows[-1][0] == "toothbrush"
    words = [w for row in rows for w in row[1:]]
    assert len(words) == len(set(words))  # a synonym names one object
    done = subprocess.run(
        [sys.executable, str(ROOT / "experiments" / "chair_synonym_table.py"), "--check"],
        check=False,
    )
    assert done.returncode == 0, (
        "plugins/detailed/chair_synonyms.txt differs from what the script builds"
    )


def test_errors_name_the_problem(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(MetricError, match="measure must be s or i"):
        Chair(measure="x")
    bad = tmp_path / "items.jsonl"
    bad.write_text(json.dumps({"id": 999, "references": ["a dog"], "candidates": ["a cat"]}) + "\n")
    with pytest.raises(
        CapmetricsError, match=r"item id\(s\) \['999'\] are not image ids of instances.json"
    ):
        capmetrics.score(str(bad), [f'chair(instances="{DATA / "instances.json"}")'])
    junk = tmp_path / "inst.json"
    junk.write_text('{"images": []}')
    with pytest.raises(CapmetricsError, match="is not a COCO instances file"):
        capmetrics.score(str(bad), [f'chair(instances="{junk}")'])
    with pytest.raises(MetricError, match="cannot read synonyms file"):
        Chair(synonyms=str(tmp_path / "missing.txt")).score(["a cat"], [["a dog"]])


def test_empty_caption_scores_zero() -> None:
    s = Chair().score(["", "a cat"], [["a dog"], ["a dog"]])
    np.testing.assert_array_equal(s.values, [0.0, 1.0])


def test_string_ids_find_integer_image_ids(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """An item id "101" is COCO image 101; the annotated dog then is no hallucination."""
    path = tmp_path / "items.jsonl"
    path.write_text(
        json.dumps({"id": "101", "references": ["A street."], "candidates": ["A dog."]}) + "\n"
    )
    spec = f'chair(instances="{DATA / "instances.json"}", synonyms="{DATA / "synonyms.txt"}")'
    result = capmetrics.score(str(path), [spec])[spec]
    assert result.details["image_objects"][0] == ["dog", "person"] and result.corpus == 0.0
