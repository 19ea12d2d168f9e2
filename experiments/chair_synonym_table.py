"""Build plugins/detailed/chair_synonyms.txt: capmetrics' CHAIR synonym table, from COCO's 80
object categories and WordNet 3.0 (no other source).

For each category one WordNet noun synset stands for it (its name's first noun sense, or the
sense named in ``SENSES`` where that one is not the object). Its row is the category name, then
the lemma names (``_`` read as a space) of that synset and of its hyponyms down to ``DEPTH``
levels, keeping only words of one or two tokens whose own most frequent noun sense lies in the
category's synsets (so "ram", a sheep but first a memory, is left out), that are nouns only
("delicious", an apple but mostly an adjective, is left out) and that no earlier row took; COCO's
plural spellings are added where they differ. The table is written in chair.py's ``synonyms.txt``
format. ``python experiments/chair_synonym_table.py [--check]`` (``--check`` compares with the
shipped file instead of writing it; the tests run it).
"""

from __future__ import annotations

import sys
from pathlib import Path

TABLE = Path(__file__).resolve().parents[1] / "plugins" / "detailed" / "chair_synonyms.txt"
#: COCO 2014's 80 object categories, in category-id order.
COCO = [
    "person",
    "bicycle",
    "car",
    "motorcycle",
    "airplane",
    "bus",
    "train",
    "truck",
    "boat",
    "traffic_light",
    "fire_hydrant",
    "stop_sign",
    "parking_meter",
    "bench",
    "bird",
    "cat",
    "dog",
    "horse",
    "sheep",
    "cow",
    "elephant",
    "bear",
    "zebra",
    "giraffe",
    "backpack",
    "umbrella",
    "handbag",
    "tie",
    "suitcase",
    "frisbee",
    "skis",
    "snowboard",
    "sports_ball",
    "kite",
    "baseball_bat",
    "baseball_glove",
    "skateboard",
    "surfboard",
    "tennis_racket",
    "bottle",
    "wine_glass",
    "cup",
    "fork",
    "knife",
    "spoon",
    "bowl",
    "banana",
    "apple",
    "sandwich",
    "orange",
    "broccoli",
    "carrot",
    "hot_dog",
    "pizza",
    "donut",
    "cake",
    "chair",
    "couch",
    "potted_plant",
    "bed",
    "dining_table",
    "toilet",
    "tv",
    "laptop",
    "mouse",
    "remote",
    "keyboard",
    "cell_phone",
    "microwave",
    "oven",
    "toaster",
    "sink",
    "refrigerator",
    "book",
    "clock",
    "vase",
    "scissors",
    "teddy_bear",
    "hair_drier",
    "toothbrush",
]
#: Categories whose name's first noun sense is not the object (or that WordNet lacks).
SENSES = {
    "person": ["person.n.01"],
    "car": ["car.n.01"],
    "train": ["train.n.01"],
    "bus": ["bus.n.01"],
    "boat": ["boat.n.01"],
    "stop_sign": [],
    "fire_hydrant": ["fireplug.n.01"],
    "bench": ["bench.n.01"],
    "cow": ["cattle.n.01", "cow.n.02"],
    "bear": ["bear.n.01"],
    "tie": ["necktie.n.01"],
    "skis": ["ski.n.01"],
    "sports_ball": ["ball.n.01"],
    "kite": ["kite.n.03"],
    "baseball_bat": ["baseball_bat.n.01"],
    "baseball_glove": ["baseball_glove.n.01"],
    "tennis_racket": ["tennis_racket.n.01"],
    "cup": ["cup.n.01"],
    "orange": ["orange.n.01"],
    "hot_dog": ["hotdog.n.02"],
    "cake": ["cake.n.03"],
    "couch": ["sofa.n.01"],
    "potted_plant": ["pot_plant.n.01"],
    "dining_table": ["dining_table.n.01"],
    "tv": ["television_receiver.n.01"],
    "mouse": ["mouse.n.04"],
    "remote": ["remote_control.n.01"],
    "keyboard": ["keyboard.n.01"],
    "cell_phone": ["cellular_telephone.n.01"],
    "oven": ["oven.n.01"],
    "clock": ["clock.n.01"],
    "book": ["book.n.02", "book.n.01"],
    "hair_drier": ["hand_blower.n.01"],
    "teddy_bear": ["teddy.n.01"],
    "donut": ["doughnut.n.02"],
    "sink": ["sink.n.01"],
    "refrigerator": ["electric_refrigerator.n.01"],
    "bird": ["bird.n.01"],
    "cat": ["cat.n.01"],
    "dog": ["dog.n.01"],
    "horse": ["horse.n.01"],
    "laptop": ["laptop.n.01"],
    "bed": ["bed.n.01"],
    "chair": ["chair.n.01"],
    "plate": ["plate.n.04"],
    "bowl": ["bowl.n.03"],
    "knife": ["knife.n.01"],
    "fork": ["fork.n.01"],
    "spoon": ["spoon.n.01"],
    "bottle": ["bottle.n.01"],
    "apple": ["apple.n.01"],
    "banana": ["banana.n.02"],
}
#: COCO spellings and plurals worth a row entry that WordNet's lemma names miss.
EXTRA = {
    "airplane": ["plane", "air plane", "jet", "airliner"],
    "motorcycle": ["motor bike", "motor cycle"],
    "person": ["people", "man", "woman", "boy", "girl", "child", "kid", "guy", "player"],
    "tv": ["television", "tv"],
    "dining_table": ["table"],
    "cell_phone": ["phone", "cellphone", "mobile phone"],
    "hot_dog": ["hot dog", "hotdog"],
    "donut": ["doughnut"],
    "couch": ["sofa"],
    "skis": ["ski"],
    "laptop": ["laptop computer", "notebook computer"],
    "potted_plant": ["plant", "houseplant"],
    "wine_glass": ["wine glass"],
    "suitcase": ["suit case", "luggage"],
    "sports_ball": ["ball"],
    "bicycle": ["bike"],
    "traffic_light": ["traffic signal", "stop light", "stoplight"],
    "teddy_bear": ["teddy bear", "teddy"],
    "hair_drier": ["hair drier", "hair dryer", "hairdryer", "blow dryer"],
}
DEPTH = 2


def build() -> str:
    from capmetrics.plugins.detailed._wordnet import wordnet

    wn = wordnet().reader
    taken: set[str] = set()
    rows = []
    for category in COCO:
        name = category.replace("_", " ")
        senses = SENSES.get(category)
        synsets = (
            [wn.synset(s) for s in senses] if senses is not None else wn.synsets(category, "n")[:1]
        )
        closure = set(synsets)
        frontier = list(synsets)
        for _ in range(DEPTH):
            frontier = [h for s in frontier for h in s.hyponyms()]
            closure.update(frontier)
        words = [name]
        for s in [*synsets, *sorted(closure - set(synsets), key=lambda x: x.name())]:
            for lemma in s.lemma_names():
                word = lemma.replace("_", " ").lower()
                first = wn.synsets(lemma, "n")[:1]
                noun_only = all(x.pos() == "n" for x in wn.synsets(lemma))
                if (
                    len(word.split()) <= 2
                    and word.replace(" ", "").replace("-", "").isalpha()
                    and first
                    and first[0] in closure
                    and noun_only
                ):
                    words.append(word)
        words.extend(EXTRA.get(category, []))
        row = []
        for w in words:
            if w not in taken or w == name:
                row.append(w)
                taken.add(w)
        rows.append(", ".join(dict.fromkeys(row)))
    return "".join(r + "\n" for r in rows)


if __name__ == "__main__":
    text = build()
    if "--check" in sys.argv:
        sys.exit(0 if TABLE.read_text() == text else 1)
    TABLE.write_text(text)
    print(
        f"{len(text.splitlines())} rows, {sum(len(r.split(', ')) for r in text.splitlines())} "
        f"words -> {TABLE}"
    )
