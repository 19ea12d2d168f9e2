"""``capture`` against CAPTURE's own capture.py (fixtures:
experiments/capture_reference_fixtures.py) and by hand; graphs given on the items, and SPICE's
CoreNLP parse where it is set up."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import capmetrics
import numpy as np
import pytest
from capmetrics import Embedder
from capmetrics.data.loaders import load_dataset
from capmetrics.errors import CapmetricsError, DataError, MetricError

pytest.importorskip("nltk")
from capmetrics.plugins.detailed import _wordnet
from capmetrics.plugins.detailed._capture import VALUES
from capmetrics.plugins.detailed.capture import Capture, sentences

try:
    _wordnet.find_wordnet()
except MetricError as err:  # pragma: no cover - CI installs wordnet-base
    pytest.skip(f"no WordNet 3.0: {err}", allow_module_level=True)

DATA = Path(__file__).resolve().parents[1] / "data" / "capture"
FIXTURE = json.loads((DATA / "reference_scores.json").read_text())
TOLERANCE = {
    "exact": 1e-9,
    "exact_no_stop_words": 1e-9,
    "synonyms": 1e-6,
    "synonyms_soft": 1e-6,
    "soft_weights": 1e-6,
}


class Bigram(Embedder):
    """The fixtures' stand-in for CAPTURE's phrase encoder: hashed character-bigram counts."""

    name = "test-bigram"

    def embed_texts(self, texts):  # type: ignore[no-untyped-def]
        out = np.zeros((len(texts), 64), dtype=np.float32)
        for i, text in enumerate(texts):
            padded = f" {text} "
            for a, b in itertools.pairwise(padded):
                out[i, (ord(a) * 31 + ord(b)) % 64] += 1.0
        return out


@pytest.fixture(scope="module")
def dataset():  # type: ignore[no-untyped-def]
    return load_dataset(DATA / "items.jsonl")


def _score(component: Capture, ds):  # type: ignore[no-untyped-def]
    cands, refs, _ = ds.flat_pairs()
    return component.score_items(cands, refs, ds.flat_items())


@pytest.mark.parametrize("config", list(FIXTURE["configs"]))
def test_given_graphs_equal_capture_py(dataset, config) -> None:  # type: ignore[no-untyped-def]
    """Per item: CAPTURE and its nine category values as capture.py gives them (every hash seed
    it was run under: where its greedy matching follows set order, any of them)."""
    cfg = FIXTURE["configs"][config]
    scores = _score(Capture(**cfg["params"], embedder=Bigram()), dataset)
    mine = np.stack([scores.details[v] for v in VALUES], axis=1)
    assert scores.details["parser"].startswith("given")
    for i, item in enumerate(dataset.items):
        runs = cfg["items"][item.id]
        assert (
            min(np.max(np.abs(mine[i] - np.array(r["values"]))) for r in runs) <= TOLERANCE[config]
        ), item.id
        assert max(abs(scores.values[i] - r["score"]) for r in runs) <= TOLERANCE[config], item.id
    assert scores.corpus == pytest.approx(
        np.mean([r[0]["score"] for r in cfg["items"].values()]), abs=1e-6
    )


def test_the_fixture_exercises_each_stage() -> None:
    """Synonym matching, stop words and soft matching each change values on the fixture."""
    items = FIXTURE["configs"]

    def differ(a: str, b: str) -> int:
        return sum(
            items[a]["items"][k][0]["score"] != items[b]["items"][k][0]["score"]
            for k in items[a]["items"]
        )

    assert differ("exact", "synonyms") >= 20
    assert differ("exact", "exact_no_stop_words") >= 10
    assert differ("synonyms", "synonyms_soft") >= 20


def test_by_hand_exact_matching() -> None:
    """Objects {dog, cat} against {dog}: P = 1/(2+eps), R = 1/(1+eps); no attributes or
    relations."""
    eps = 1e-6
    item = capmetrics.data.Item(
        "x",
        ("r",),
        ("c",),
        candidate_graphs=(
            {
                "entities": [
                    {"head": "dogs", "attributes": ["brown"]},
                    {"head": "cat", "attributes": []},
                ],
                "relations": [{"subject": 0, "relation": "near", "object": 1}],
            },
        ),
        reference_graphs=({"entities": [{"head": "dog", "attributes": []}], "relations": []},),
    )
    s = Capture(synonym_matching=False, soft_matching=False).score_items(["c"], [["r"]], [item])
    p, r = 1 / (2 + eps), 1 / (1 + eps)
    f = 2 * p * r / (p + r + eps)
    assert s.details["object_precision"][0] == p and s.details["object_recall"][0] == r
    assert s.details["attribute_precision"][0] == 0.0 and s.details["relation_recall"][0] == 0.0
    assert s.values[0] == pytest.approx((0.5 * f) / 1.2, abs=1e-15)


def test_synonyms_and_substrings_match() -> None:
    """car ~ automobile (WordNet), tower ~ clock tower (substring); relations need all three."""

    def graph(*heads: str, rel: str | None = None) -> dict:
        relations = [{"subject": 0, "relation": rel, "object": 1}] if rel else []
        return {"entities": [{"head": h, "attributes": []} for h in heads], "relations": relations}

    item = capmetrics.data.Item(
        "x",
        ("r",),
        ("c",),
        candidate_graphs=(graph("automobile", "tower", rel="near"),),
        reference_graphs=(graph("car", "clock tower", rel="close"),),
    )
    on = Capture(soft_matching=False).score_items(["c"], [["r"]], [item])
    off = Capture(soft_matching=False, synonym_matching=False).score_items(["c"], [["r"]], [item])
    assert on.details["object_recall"][0] == pytest.approx(2 / (2 + 1e-6), abs=1e-15)
    assert off.details["object_recall"][0] == 0.0
    assert on.details["relation_recall"][0] == pytest.approx(
        1 / (1 + 1e-6), abs=1e-15
    )  # near ~ close (WordNet)


def test_sub_metrics_and_signature(dataset) -> None:  # type: ignore[no-untyped-def]
    results = capmetrics.score(
        dataset,
        [
            "capture(soft_matching=false)",
            "capture(soft_matching=false, category=object, part=p)",
            "capture(soft_matching=false, category=relation, part=r)",
        ],
    )
    full = results["capture(soft_matching=false)"]
    assert (
        full.signature["parser"] == "given (FACTUAL format)" and full.signature["wordnet"] == "3.0"
    )
    np.testing.assert_array_equal(
        results["capture(soft_matching=false, category=object, part=p)"].item_values,
        full.details["object_precision"],
    )
    np.testing.assert_array_equal(
        results["capture(soft_matching=false, category=relation, part=r)"].item_values,
        full.details["relation_recall"],
    )
    expected = [FIXTURE["configs"]["synonyms"]["items"][i][0]["score"] for i in full.item_ids]
    np.testing.assert_allclose(full.item_values, expected, rtol=0, atol=1e-12)


def test_parameters_are_checked() -> None:
    with pytest.raises(MetricError, match="alpha \\+ beta must be 1"):
        Capture(alpha=0.6, beta=0.6)
    with pytest.raises(MetricError, match="unknown category 'objects'"):
        Capture(category="objects")
    with pytest.raises(MetricError, match="f for category=all"):
        Capture(part="p")
    assert (
        capmetrics.compose("capture(category=attribute, part=r)").value_name() == "attribute_recall"
    )


def test_bad_graphs_name_the_item(tmp_path) -> None:  # type: ignore[no-untyped-def]
    bad = {
        "entities": [{"head": "dog"}],
        "relations": [{"subject": 0, "relation": "on", "object": 3}],
    }
    item = capmetrics.data.Item(
        "img-7",
        ("r",),
        ("c",),
        candidate_graphs=(bad,),
        reference_graphs=({"entities": [], "relations": []},),
    )
    with pytest.raises(
        MetricError,
        match=r"item 'img-7', candidate 0 graph: relation 0: 'object' must be an entity",
    ):
        Capture(soft_matching=False).score_items(["c"], [["r"]], [item])
    path = tmp_path / "g.jsonl"
    path.write_text(
        json.dumps(
            {
                "id": 1,
                "candidates": ["c"],
                "references": ["a", "b"],
                "candidate_graph": bad,
                "reference_graphs": [bad],
            }
        )
        + "\n"
    )
    with pytest.raises(
        DataError,
        match="'reference_graphs' must be a list of one scene graph per reference \\(2\\)",
    ):
        load_dataset(path)


def test_items_with_and_without_graphs_are_refused(dataset) -> None:  # type: ignore[no-untyped-def]
    mixed = capmetrics.data.Dataset(
        [*dataset.items[:2], capmetrics.data.Item("plain", ("a dog",), ("a cat",))]
    )
    with pytest.raises(CapmetricsError, match=r"item\(s\) \['plain'\] do not"):
        capmetrics.score(mixed, ["capture(soft_matching=false)"])
    with pytest.raises(MetricError, match="item 'plain' carries no candidate_graph"):
        Capture(graphs="given").score_items(["a cat"], [["a dog"]], [mixed.items[2]])


def test_sentences() -> None:
    assert sentences("A dog. It runs!  Is it fast? yes") == [
        "A dog.",
        "It runs!",
        "Is it fast?",
        "yes",
    ]
    assert sentences("   ") == []


def _corenlp_ready() -> bool:
    try:
        from capmetrics.plugins.spice import Spice

        Spice().check_resources()
        return True
    except CapmetricsError:
        return False


@pytest.mark.java
@pytest.mark.skipif(
    not _corenlp_ready(), reason="needs `capmetrics setup spice` (CoreNLP 3.6.0) and Java"
)
def test_corenlp_graphs_sentence_by_sentence() -> None:
    """Without given graphs each sentence is parsed by SPICE's parser; by hand: candidate objects
    {street, car, man, building, shirt}, reference {car, street}."""
    cand = (
        "A red car is parked on the busy street. Two men in white shirts walk past a tall building!"
    )
    c = Capture(soft_matching=False)
    s = c.score([cand], [["a car on a street"]])
    assert s.details["parser"].startswith("corenlp") and c.signature()["parser"].startswith(
        "corenlp"
    )
    assert s.details["object_precision"][0] == pytest.approx(2 / (5 + 1e-6), abs=1e-12)
    assert s.details["object_recall"][0] == pytest.approx(2 / (2 + 1e-6), abs=1e-12)


def test_meta_reads_the_detailcaps_layout_and_reports_length_bias(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """DetailCaps records (caption, GT_Caption_* references, a human score) load as judgments;
    meta reports Kendall tau-b of each metric with caption length, and of the ratings."""
    from capmetrics.analysis.meta import agreement, candidate_lengths, metric_scores
    from capmetrics.data.judgments import load_judgments
    from scipy.stats import kendalltau

    refs = {
        "GT_Caption_GPT4O": (
            "A man rides a red bicycle down a busy city street past tall buildings."
        ),
        "GT_Caption_GPT4V": "A cyclist on a red bike in a city street with cars and buildings.",
    }
    captions = [
        "A man rides a bike.",
        "A man rides a red bicycle on a street.",
        "A man rides a red bicycle down a busy street with cars, people, dogs, trees "
        "and many shops.",
        "A dog.",
        "A cyclist in a city street with tall buildings and cars.",
    ]
    lines = [
        json.dumps({"id": k, "image": "img", "caption": c, "human_score": s, **refs})
        for k, (c, s) in enumerate(zip(captions, [2, 4, 3, 0, 5]))
    ]
    path = tmp_path / "detailcaps.jsonl"
    path.write_text("\n".join(lines) + "\n")
    judgments = load_judgments(path)
    assert judgments.dataset.items[0].references == (
        refs["GT_Caption_GPT4O"],
        refs["GT_Caption_GPT4V"],
    )
    result = agreement("bleu-1", judgments, n_boot=0, ceiling=False)
    lengths = candidate_lengths(judgments.dataset)
    assert lengths.tolist() == [len(c.split()) for c in captions]
    scores = metric_scores("bleu-1", judgments.dataset)
    assert result.length_tau_b == pytest.approx(kendalltau(scores, lengths).statistic, abs=1e-12)
    assert result.human_length_tau_b == pytest.approx(
        kendalltau([2, 4, 3, 0, 5], lengths).statistic, abs=1e-12
    )
    assert result.as_dict()["length_tau_b"] == result.length_tau_b


def test_each_candidate_reads_its_own_graph(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``candidate_graphs`` gives one graph per candidate; each scores as if it were alone."""
    rows = [json.loads(line) for line in (DATA / "items.jsonl").read_text().splitlines()[:2]]
    both = {
        **rows[0],
        "candidates": ["first", "second"],
        "candidate_graphs": [rows[0]["candidate_graph"], rows[1]["candidate_graph"]],
    }
    del both["candidate_graph"]
    alone = {
        **rows[0],
        "id": "alone",
        "candidates": ["second"],
        "candidate_graph": rows[1]["candidate_graph"],
    }
    path = tmp_path / "two.jsonl"
    path.write_text(json.dumps(both) + "\n" + json.dumps(alone) + "\n")
    spec = "capture(soft_matching=false)"
    result = capmetrics.score(str(path), [spec])[spec]
    first = FIXTURE["configs"]["synonyms"]["items"][rows[0]["id"]][0]["score"]
    assert result.candidate_values[0][0] == pytest.approx(first, abs=1e-12)
    assert (
        result.candidate_values[0][1]
        == result.candidate_values[1][0]
        != result.candidate_values[0][0]
    )
