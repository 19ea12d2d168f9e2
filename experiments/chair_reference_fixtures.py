"""Make tests/data/chair/: COCO-style instances, captions and a synonym table, and chair.py's
CHAIR values on them.

chair.py (LisaAnne/Hallucination ``utils/chair.py`` at 6e4d33c, BSD-2-Clause) is run, not copied,
from the git mirror given on the command line. It is Python 2 and needs packages that cannot be
had here; what is adapted, and nothing else:

- its Python 2 ``print`` statements become calls (a regex on the source, at load time);
- ``from misc import *`` (which imports modules the CHAIR class does not use) gives ``os``;
- ``pattern.en.singularize`` (pattern 3.6 is not on the package index): NLTK's WordNet noun
  lemma over WordNet 3.0 (Debian's files), what capmetrics uses in its place;
- ``nltk.word_tokenize`` (its Punkt model is NLTK data, not installable offline): Punkt with
  default parameters, then NLTK's word tokenizer, as capmetrics does.

So the fixture checks chair.py's synonym table reading, two-word objects, special rules, ground
truth from instances and reference captions, and counting; the singular forms and sentence
splitting are by construction the same on both sides (docs/metrics/detailed-captions.md).

    python experiments/chair_reference_fixtures.py --repo /work/.mirror/LisaAnne+Hallucination/repo
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import types
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
OUT = HERE / "tests" / "data" / "chair"

#: A synonym table in chair.py's format, written for the tests (quirks included: a double space
#: after a comma, a word on two lines, two-word objects).
SYNONYMS = """person, girl, boy, man, woman, kid, child, people, rider, baby, player, guy, lady
bicycle, bike, bicycle, cycle
car, automobile, van, taxi, cab
motorcycle, scooter,  motor bike, motorbike
airplane, plane, air plane, jet, aircraft
train, locomotive
bird, pigeon, duck, seagull
cat, kitten
dog, puppy, pup
bear, teddy
toilet, urinal
chair, seat, stool
tie, necktie
wine glass, glass, goblet
hot dog, frankfurter, sausage
teddy bear
traffic light, traffic signal, stop light
dining table, table, desk
cup, mug, glass
"""

CATEGORIES = [
    "person",
    "bicycle",
    "car",
    "motorcycle",
    "airplane",
    "train",
    "bird",
    "cat",
    "dog",
    "bear",
    "toilet",
    "chair",
    "tie",
    "wine glass",
    "hot dog",
    "teddy bear",
    "traffic light",
    "dining table",
    "cup",
]

#: image id -> (annotated categories, reference captions, candidate caption)
IMAGES = {
    101: (
        ["person", "dog"],
        ["A man walks his dog in the park.", "A guy with a puppy on a leash."],
        "A man is walking two dogs in a park. A red car is parked nearby, and a bird sits on a "
        "bench.",
    ),
    102: (
        ["toilet"],
        ["A white toilet in a small bathroom."],
        "The image shows a bathroom with a toilet. The toilet seat is up, and there is a mug on "
        "the sink.",
    ),
    103: (
        ["hot dog", "person"],
        ["A boy eating a hot dog.", "Kid holding a hotdog."],
        "A child holds a hot dog with mustard. Behind him, people sit at tables with wine glasses "
        "and cups.",
    ),
    104: (
        ["airplane"],
        ["A passenger jet on the runway."],
        "A large passenger jet is taxiing on the runway. Several baby birds fly overhead near the "
        "traffic lights.",
    ),
    105: (
        ["bear", "person"],
        ["A baby bear next to a woman."],
        "A brown baby bear stands near a woman who wears a bow tie. A teddy bear lies on the "
        "chair.",
    ),
    106: (
        ["motorcycle", "person"],
        ["A man rides a motor bike down the street."],
        "A man rides a motor bike, followed by a scooter and two bicycles. No cats or dogs are "
        "visible.",
    ),
    107: (
        [],
        ["An empty road at night."],
        "An empty road at night with traffic signals glowing red.",
    ),
    108: (
        ["cat", "dining table"],
        ["A kitten sleeping on a desk."],
        "Two kittens sleep on a wooden desk next to a cup of coffee and a laptop.",
    ),
    109: (
        ["train", "person"],
        ["People waiting for a train.", "A locomotive arriving at a station."],
        "A passenger train arrives at the platform while riders wait. A pigeon walks between them.",
    ),
    110: (
        ["person", "tie"],
        ["A man in a suit and necktie."],
        "A gentleman in a dark suit wears a striped tie. He sits on a stool beside a dining table.",
    ),
    111: (["dog"], ["A dog lying on a couch."], ""),
    112: (
        ["car"],
        ["Cars driving on a highway."],
        "Several cars and a taxi drive on the highway; an adult dog watches from a van.",
    ),
}


def write_fixture() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "synonyms.txt").write_text(SYNONYMS)
    cat_id = {name: k + 1 for k, name in enumerate(CATEGORIES)}
    annotations = [
        {"id": n, "image_id": image, "category_id": cat_id[name], "bbox": [0, 0, 1, 1], "area": 1}
        for n, (image, name) in enumerate(
            ((i, c) for i, (cs, _, _) in IMAGES.items() for c in cs), start=1
        )
    ]
    instances = {
        "info": {},
        "licenses": [],
        "images": [{"id": i, "file_name": f"{i}.jpg"} for i in IMAGES],
        "categories": [{"id": cat_id[n], "name": n, "supercategory": ""} for n in CATEGORIES],
        "annotations": annotations,
    }
    (OUT / "instances.json").write_text(json.dumps(instances, indent=1) + "\n")
    (OUT / "items.jsonl").write_text(
        "".join(
            json.dumps({"id": i, "references": refs, "candidates": [cand]}) + "\n"
            for i, (_, refs, cand) in IMAGES.items()
        )
    )


def run_chair(repo: Path, nltk_data: Path, with_instances: bool) -> dict:
    """chair.py's compute_chair on the fixture (in a temporary folder laid out as it expects)."""
    os.environ["NLTK_DATA"] = str(nltk_data)
    import nltk
    from nltk.stem import WordNetLemmatizer
    from nltk.tokenize.destructive import NLTKWordTokenizer
    from nltk.tokenize.punkt import PunktSentenceTokenizer

    lemmatizer = WordNetLemmatizer()
    pattern = types.ModuleType("pattern")
    pattern_en = types.ModuleType("pattern.en")
    pattern_en.singularize = lambda w: lemmatizer.lemmatize(w, "n")  # type: ignore[attr-defined]
    sys.modules.update({"pattern": pattern, "pattern.en": pattern_en})
    punkt, words = PunktSentenceTokenizer(), NLTKWordTokenizer()
    nltk.word_tokenize = lambda text: [t for s in punkt.tokenize(text) for t in words.tokenize(s)]
    source = subprocess.run(
        ["git", "show", "HEAD:utils/chair.py"], cwd=repo, check=True, capture_output=True, text=True
    ).stdout
    source = re.sub(r"^(\s*)print (.+)$", r"\1print(\2)", source, flags=re.MULTILINE)
    source = source.replace("from misc import *", "import os")
    module = types.ModuleType("chair_py")
    exec(
        compile(source, "chair.py", "exec"), module.__dict__
    )  # the reference, run once to make fixtures

    instances = json.loads((OUT / "instances.json").read_text())
    if not with_instances:
        instances["annotations"] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "data").mkdir()
        (root / "data" / "synonyms.txt").write_text(SYNONYMS)
        ann = root / "annotations"
        ann.mkdir()
        empty = {**instances, "annotations": [], "images": []}
        (ann / "instances_val2014.json").write_text(json.dumps(instances))
        (ann / "instances_train2014.json").write_text(json.dumps(empty))
        caps = [
            {"image_id": i, "id": 1000 * i + k, "caption": r}
            for i, (_, refs, _) in IMAGES.items()
            for k, r in enumerate(refs)
        ]
        (ann / "captions_val2014.json").write_text(
            json.dumps({"info": {}, "licenses": [], "images": [], "annotations": caps})
        )
        (ann / "captions_train2014.json").write_text(
            json.dumps({"info": {}, "licenses": [], "images": [], "annotations": []})
        )
        zero = dict.fromkeys(
            ["Bleu_1", "Bleu_2", "Bleu_3", "Bleu_4", "METEOR", "CIDEr", "SPICE", "ROUGE_L"], 0.0
        )
        cap_file = root / "captions.json"
        cap_file.write_text(
            json.dumps(
                {
                    "overall": zero,
                    "imgToEval": {
                        str(i): {"image_id": i, "caption": cand, **zero}
                        for i, (_, _, cand) in IMAGES.items()
                    },
                }
            )
        )
        cwd = os.getcwd()
        os.chdir(root)
        try:
            evaluator = module.CHAIR(list(IMAGES), str(ann))
            evaluator.get_annotations()
            out = evaluator.compute_chair(str(cap_file))
        finally:
            os.chdir(cwd)
    return {
        "overall": {k: out["overall_metrics"][k] for k in ("CHAIRs", "CHAIRi")},
        "sentences": {
            str(s["image_id"]): {
                "CHAIRs": s["metrics"]["CHAIRs"],
                "CHAIRi": s["metrics"]["CHAIRi"],
                "hallucinated": s["mscoco_hallucinated_words"],
                "generated": s["mscoco_generated_words"],
                "gt": sorted(s["mscoco_gt_words"]),
                "hallucination_idxs": s["hallucination_idxs"],
            }
            for s in out["sentences"]
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--repo", required=True, type=Path, help="a checkout or mirror of LisaAnne/Hallucination"
    )
    args = parser.parse_args()
    write_fixture()
    from capmetrics.plugins.detailed._wordnet import LEXNAMES

    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / "corpora" / "wordnet"
        target.mkdir(parents=True)
        for f in Path("/usr/share/wordnet").iterdir():
            (target / f.name).write_bytes(f.read_bytes())
        (target / "lexnames").write_text(LEXNAMES)
        results = {
            "reference": (
                "LisaAnne/Hallucination utils/chair.py @6e4d33c (adapted as this script says)"
            ),
            "instances_and_captions": run_chair(args.repo, Path(tmp), True),
            "captions_only": run_chair(args.repo, Path(tmp), False),
        }
    (OUT / "reference.json").write_text(json.dumps(results, indent=1) + "\n")
    for key in ("instances_and_captions", "captions_only"):
        print(key, results[key]["overall"])


if __name__ == "__main__":
    main()
