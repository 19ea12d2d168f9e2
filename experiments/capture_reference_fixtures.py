"""Make tests/data/capture/: items with FACTUAL-format scene graphs, and CAPTURE's own scores of
them.

CAPTURE's code is run, not copied: ``capture_metric/capture.py`` of the ``capture-metric`` 0.1.13
wheel on PyPI (identical to foundation-multimodal-models/CAPTURE's capture.py at 52eeb27) with
``factual_scene_graph`` from the ``FactualSceneGraph`` 0.7.3 wheel (for ``encode_phrases``); both
unpacked into folders given on the command line (``pip download --no-deps capture-metric==0.1.13
FactualSceneGraph==0.7.3`` and unzip). What is stubbed, and nothing else:

- the FACTUAL parser (a flan-T5 model): ``evaluator.parser.parse`` returns the item's graphs;
- NLTK's sentence splitter (punkt data, not installable offline): the parser stub ignores it;
- ``get_all_lemmatized_nouns`` (NLTK's POS tagger data, not installable offline): returns every
  lemmatized object head and its words, so CAPTURE's noun filter keeps every object (capmetrics
  does not apply that filter to given graphs: docs/metrics/detailed-captions.md);
- the soft-matching encoder (all-mpnet-base-v2 on ``cuda:0``): a deterministic character-bigram
  encoder with ``encode(texts, batch_size)``; the tests give capmetrics the same vectors.

WordNet is Debian's ``wordnet-base`` + ``wordnet-sense-index`` (WordNet 3.0) copied into a
temporary ``nltk_data/corpora/wordnet`` with the ``lexnames`` file NLTK wants. The parsed samples
go through CAPTURE's own ``sample_to_parse_results`` (merge, lemmatization, stop words) and
``compute_score``. CAPTURE's sets iterate in hash order, which decides its greedy synonym and
soft matching where several pairings are possible, so every configuration is run under several
``PYTHONHASHSEED`` values and all of their per-item values are stored.

    python experiments/capture_reference_fixtures.py --capture /tmp/cm --factual /tmp/fsg
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parents[1]
OUT = HERE / "tests" / "data" / "capture"
SEEDS = (0, 1, 2, 3, 4)
CONFIGS = {
    "exact": dict(synonym_matching=False, soft_matching=False, stop_words=True),
    "exact_no_stop_words": dict(synonym_matching=False, soft_matching=False, stop_words=False),
    "synonyms": dict(synonym_matching=True, soft_matching=False, stop_words=True),
    "synonyms_soft": dict(synonym_matching=True, soft_matching=True, stop_words=True),
    "soft_weights": dict(
        synonym_matching=False, soft_matching=True, stop_words=True, alpha=0.3, beta=0.7, gamma=0.5
    ),
}


def bigram_vectors(texts: list[str]) -> np.ndarray:
    """The test encoder: character-bigram counts hashed into 64 float32 dimensions."""
    out = np.zeros((len(texts), 64), dtype=np.float32)
    for i, text in enumerate(texts):
        padded = f" {text} "
        for a, b in zip(padded, padded[1:]):
            out[i, (ord(a) * 31 + ord(b)) % 64] += 1.0
    return out


OBJECTS = [
    "car",
    "cars",
    "automobile",
    "truck",
    "man",
    "men",
    "person",
    "woman",
    "dog",
    "puppy",
    "tree",
    "trees",
    "building",
    "buildings",
    "edifice",
    "sky",
    "street",
    "road",
    "clock tower",
    "traffic light",
    "bicycle",
    "bike",
    "background",
    "scene",
    "table",
    "chair",
    "Car",
    "people",
    "shirt",
    "glasses",
    "bus",
    "buses",
    "city life",
    "scar",
    "foreground",
]
ATTRIBUTES = [
    "red",
    "white",
    "green",
    "blue",
    "clear",
    "tall",
    "taller",
    "busy",
    "modern",
    "wooden",
    "large",
    "big",
    "small",
    "little",
    "bright",
    "dark",
    "full of people",
    "made of wood",
    "parked",
    "two",
]
RELATIONS = [
    "on",
    "in",
    "near",
    "next to",
    "under",
    "in front of",
    "stand under",
    "surrounded by",
    "walking on",
    "sitting on",
    "holding",
    "wear",
    "wearing",
    "beside",
    "above",
    "over",
]


def _graph(rng: random.Random, pool: list[str]) -> dict:
    heads = [rng.choice(pool) for _ in range(rng.randint(1, 5))]
    entities = [
        {
            "head": h,
            "quantity": rng.choice(["", "", "2"]),
            "attributes": rng.sample(ATTRIBUTES, rng.choice([0, 0, 1, 1, 2])),
        }
        for h in heads
    ]
    relations = [
        {
            "subject": rng.randrange(len(heads)),
            "relation": rng.choice(RELATIONS),
            "object": rng.randrange(len(heads)),
        }
        for _ in range(rng.choice([0, 1, 1, 2, 3]))
    ]
    return {"entities": entities, "relations": relations}


def _caption(graphs: list[dict]) -> str:
    parts = []
    for g in graphs:
        words = [" ".join([*e["attributes"], e["head"]]) for e in g["entities"]]
        parts.append("There is " + ", ".join(f"a {w}" for w in words) + ".")
    return " ".join(parts)


def make_items(n: int = 60, seed: int = 37) -> list[dict]:
    """Seeded items: a candidate and 1-3 references drawn from one scene's vocabulary, each
    graph one object or a list of sentence graphs; plus CAPTURE's README example, by hand."""
    rng = random.Random(seed)
    items = []
    for k in range(n):
        pool = rng.sample(OBJECTS, 8)

        def caption_graph() -> object:
            graphs = [_graph(rng, pool) for _ in range(rng.randint(1, 3))]
            return graphs if len(graphs) > 1 or rng.random() < 0.5 else graphs[0]

        cand = caption_graph()
        refs = [caption_graph() for _ in range(rng.randint(1, 3))]
        as_list = lambda g: g if isinstance(g, list) else [g]
        items.append(
            {
                "id": f"synthetic-{k}",
                "candidates": [_caption(as_list(cand))],
                "references": [_caption(as_list(r)) for r in refs],
                "candidate_graph": cand,
                "reference_graphs": refs,
            }
        )
    ref = {
        "entities": [
            {"head": "street", "quantity": "", "attributes": ["busy", "city"]},
            {"head": "cars", "quantity": "", "attributes": ["running"]},
            {"head": "car", "quantity": "", "attributes": ["red"]},
            {"head": "truck", "quantity": "", "attributes": ["white"]},
            {"head": "trees", "quantity": "", "attributes": ["green"]},
            {"head": "edifices", "quantity": "", "attributes": ["modern"]},
            {"head": "clock tower", "quantity": "", "attributes": []},
            {"head": "sky", "quantity": "", "attributes": ["blue", "clear"]},
            {"head": "foreground", "quantity": "", "attributes": []},
        ],
        "relations": [
            {"subject": 0, "relation": "surrounded by", "object": 4},
            {"subject": 1, "relation": "in", "object": 8},
            {"subject": 5, "relation": "stand under", "object": 7},
            {"subject": 6, "relation": "stand under", "object": 7},
        ],
    }
    cand = [
        {
            "entities": [
                {"head": "car", "quantity": "", "attributes": ["red"]},
                {"head": "truck", "quantity": "", "attributes": ["white"]},
                {"head": "automobiles", "quantity": "", "attributes": ["other"]},
                {"head": "road", "quantity": "", "attributes": ["city"]},
            ],
            "relations": [
                {"subject": 0, "relation": "running on", "object": 3},
                {"subject": 2, "relation": "running on", "object": 3},
            ],
        },
        {
            "entities": [
                {"head": "Pedestrians", "quantity": "", "attributes": []},
                {"head": "side", "quantity": "", "attributes": []},
            ],
            "relations": [{"subject": 0, "relation": "walking on", "object": 1}],
        },
        {
            "entities": [
                {"head": "buildings", "quantity": "", "attributes": ["tall"]},
                {"head": "sky", "quantity": "", "attributes": ["blue", "clear"]},
            ],
            "relations": [{"subject": 0, "relation": "under", "object": 1}],
        },
    ]
    items.append(
        {
            "id": "readme-example",
            "candidates": [
                "The image shows a red car, a white truck and other automobiles running on a city "
                "road. Pedestrians are walking on the side. Tall buildings can be seen under a "
                "clear blue sky."
            ],
            "references": [
                "The image depicts a busy city street with cars running in the foreground, "
                "including a red car and a white truck. ..."
            ]
            * 2,
            "candidate_graph": cand,
            "reference_graphs": [ref, ref],
        }
    )
    return items


def _wordnet_data(folder: Path) -> None:
    """Debian's WordNet 3.0 files as NLTK's ``corpora/wordnet`` (plus ``lexnames``)."""
    from capmetrics.plugins.detailed._wordnet import LEXNAMES

    target = folder / "corpora" / "wordnet"
    target.mkdir(parents=True)
    for f in Path("/usr/share/wordnet").iterdir():
        shutil.copyfile(f, target / f.name)
    (target / "lexnames").write_text(LEXNAMES)
    assert (target / "index.sense").is_file(), "apt-get install wordnet-sense-index"


def worker(capture_dir: str, factual_dir: str, items_file: str, out_file: str) -> None:
    """Run CAPTURE's scoring on every item and configuration (in this interpreter's hash seed)."""
    os.environ["RANK"] = "1"  # capture_metric/__init__ would otherwise download NLTK data
    sys.path[:0] = [capture_dir, factual_dir]
    import capture_metric.capture as cap

    items = [json.loads(line) for line in Path(items_file).read_text().splitlines() if line.strip()]
    graphs = {}
    for it in items:
        graphs[it["candidates"][0]] = it["candidate_graph"]
        for text, g in zip(it["references"], it["reference_graphs"]):
            graphs.setdefault(text, [])
            graphs[text] = g
    results: dict = {}

    class Parser:
        current = None

        def parse(self, sentences, **kwargs):
            g = self.current
            return g if isinstance(g, list) else [g]

    class Encoder:
        def encode(self, texts, batch_size=32):
            return bigram_vectors(list(texts))

    cap.sent_tokenize = lambda text: [text]
    for name, params in CONFIGS.items():
        soft = params.get("soft_matching", False)
        evaluator = cap.CAPTURE(**{**params, "soft_matching": False})
        evaluator.soft_matching = soft
        evaluator.text_encoder = Encoder()
        evaluator.parser = Parser()
        values: dict = {}
        for it in items:
            # the graphs of each text of this item (the same text may carry other graphs elsewhere)
            def parsed(text: str, graph: object, key: str) -> tuple:
                evaluator.parser.current = graph
                heads = [
                    e["head"]
                    for g in (graph if isinstance(graph, list) else [graph])
                    for e in g["entities"]
                ]
                nouns = set()
                for h in heads:
                    lemma = evaluator.text_processor.normalize_word(h, cap.wordnet.NOUN)
                    nouns.add(lemma)
                    nouns.update(lemma.split(" "))
                evaluator.get_all_lemmatized_nouns = lambda _text: list(nouns)
                return evaluator.sample_to_parse_results((key, text))

            cand = parsed(it["candidates"][0], it["candidate_graph"], it["id"])
            gts = [parsed(t, g, it["id"]) for t, g in zip(it["references"], it["reference_graphs"])]
            gt_parsed = {it["id"]: [g[1:] for g in gts]}
            cand_parsed = {it["id"]: [cand[1:]]}
            import contextlib
            import io

            with (
                contextlib.redirect_stdout(io.StringIO()),
                contextlib.redirect_stderr(io.StringIO()),
            ):
                rows = [
                    evaluator.compute_f_score(g, cand_parsed[it["id"]][0])
                    for g in gt_parsed[it["id"]]
                ]
                try:
                    _, scores = evaluator.compute_score(
                        {it["id"]: it["references"]},
                        {it["id"]: it["candidates"]},
                        prev_gt_parsed=gt_parsed,
                        prev_cand_parsed=cand_parsed,
                    )
                    via = "compute_score"
                except TypeError:
                    # numpy 2: soft matches are float32 scalars, and compute_score's rounded detail
                    # table (statistics.mean of float and float32) raises; its score is this mean
                    scores = [sum(r[0] for r in rows) / len(rows)]
                    via = "compute_f_score"
            per_category = [float(sum(float(r[k]) for r in rows) / len(rows)) for k in range(10)]
            values[it["id"]] = {"score": float(scores[0]), "values": per_category, "via": via}
        results[name] = values
    Path(out_file).write_text(json.dumps(results))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--capture", required=True, help="folder holding capture_metric/")
    parser.add_argument("--factual", required=True, help="folder holding factual_scene_graph/")
    parser.add_argument("--worker", nargs=2, metavar=("ITEMS", "OUT"))
    args = parser.parse_args()
    if args.worker:
        worker(args.capture, args.factual, *args.worker)
        return
    OUT.mkdir(parents=True, exist_ok=True)
    items = make_items()
    items_file = OUT / "items.jsonl"
    items_file.write_text("".join(json.dumps(it) + "\n" for it in items))
    runs: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        _wordnet_data(Path(tmp) / "nltk_data")
        for seed in SEEDS:
            out = Path(tmp) / f"seed{seed}.json"
            env = dict(os.environ, PYTHONHASHSEED=str(seed), NLTK_DATA=str(Path(tmp) / "nltk_data"))
            subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--capture",
                    args.capture,
                    "--factual",
                    args.factual,
                    "--worker",
                    str(items_file),
                    str(out),
                ],
                check=True,
                env=env,
            )
            runs[seed] = json.loads(out.read_text())
    import importlib.metadata as md

    fixture = {
        "reference": "capture-metric 0.1.13 capture.py (= CAPTURE git 52eeb27), "
        "FactualSceneGraph 0.7.3, "
        f"nltk {md.version('nltk')}, numpy {np.__version__}, WordNet 3.0 (Debian wordnet-base)",
        "seeds": list(SEEDS),
        "configs": {name: {"params": params, "items": {}} for name, params in CONFIGS.items()},
    }
    for name in CONFIGS:
        for it in items:
            fixture["configs"][name]["items"][it["id"]] = [runs[s][name][it["id"]] for s in SEEDS]
    (OUT / "reference_scores.json").write_text(json.dumps(fixture, indent=1) + "\n")
    varying = {
        name: sum(
            len({json.dumps(v) for v in per}) > 1
            for per in fixture["configs"][name]["items"].values()
        )
        for name in CONFIGS
    }
    print(f"{len(items)} items; items whose reference values depend on the hash seed: {varying}")


if __name__ == "__main__":
    main()
