"""NNEval training data: human-versus-machine candidates from a captioned dataset, and cached
feature matrices.

Human candidates are held-out references, scored against (up to ``n_refs`` of) the image's
remaining references. Machine candidates come from a system's output when one is given. Without
one they are *impostors*: captions of other images, drawn at sampled ranks of TF-IDF cosine
similarity to the image's references among the ``impostor_pool`` closest. The default (pool 0 =
every caption of another image, uniform ranks) draws random captions of other images; hard
impostors (``impostor_pool=50``, or ``impostor_sampling="log-rank"``, which takes as many from
ranks 1-10 as from 10-100, 100-1,000, ...) are available but trained worse models on Flickr8k
(docs/metrics/nneval.md). Impostors are a proxy for machine output: fluent human text that is
wrong for the image, like the retrieved captions judged in Flickr8k-Expert/CF, but without the
disfluencies and repetitions of real systems. Each machine candidate is scored
against ``n_refs`` of the image's references chosen at random, as in the paper (4 of 5).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from capmetrics.data.model import Dataset, Item, Problem
from capmetrics.errors import DataError
from capmetrics.io.strict_json import parse_json, read_bytes, read_json
from scipy import sparse

HUMAN, MACHINE = 1, 0


@dataclass
class TrainingSet:
    """Candidates with their references and labels (1 = human-written, 0 = machine).

    ``images``: each candidate's image id (its item's); ``item_images``: each candidate's image
    (its item's path or loaded image, None where the item has none), for features that need
    images; an impostor keeps the image of the item it is scored for."""

    candidates: list[str]
    references: list[tuple[str, ...]]
    labels: np.ndarray
    images: list[str]
    item_images: list[Any] | None = None

    def __len__(self) -> int:
        return len(self.candidates)


def load_flickr8k_split(
    root: str | Path, split: str = "train", images: str | Path | None = None
) -> Dataset:
    """The images of a Flickr8k split (``train``, ``dev``, ``test``) with their 5 references;
    with ``images`` (the folder of Flickr8k's .jpg files) each item's image is its file there."""
    from capmetrics.data.flickr8k import load_captions, normalize_space

    names = {
        "train": "Flickr_8k.trainImages.txt",
        "dev": "Flickr_8k.devImages.txt",
        "test": "Flickr_8k.testImages.txt",
    }
    if split not in names:
        raise DataError(
            [Problem(str(root), None, f"unknown split {split!r}; use train, dev or test")]
        )
    path = Path(root) / names[split]
    if not path.is_file():
        raise DataError(
            [Problem(str(path), None, "file not found")], header="cannot load the Flickr8k split"
        )
    _, by_image = load_captions(root)
    names_in_split = [
        line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
    ]
    missing = [
        Problem(str(path), img, "image has no captions in Flickr8k.token.txt")
        for img in names_in_split
        if img.split(".")[0] not in by_image
    ]
    if missing:
        raise DataError(missing, header=f"cannot load {path}")
    folder = Path(images).expanduser() if images is not None else None
    items = [
        Item(
            img.split(".")[0],
            tuple(normalize_space(c) for c in by_image[img.split(".")[0]]),
            (),
            str(folder / img) if folder is not None else None,
        )
        for img in names_in_split
    ]
    return Dataset(items, str(path))


_WORD = re.compile(r"[a-z0-9]+")


def _tfidf(
    texts: Sequence[str], vocab: dict[str, int], idf: np.ndarray | None = None
) -> tuple[sparse.csr_matrix, np.ndarray]:
    rows, cols = [], []
    for i, text in enumerate(texts):
        for w in _WORD.findall(text.lower()):
            rows.append(i)
            cols.append(vocab.setdefault(w, len(vocab)))
    tf = sparse.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(texts), len(vocab)))
    tf.sum_duplicates()
    if idf is None:
        df = np.bincount(tf.indices, minlength=len(vocab))
        idf = np.log((1 + len(texts)) / (1 + df)) + 1
    m = tf @ sparse.diags(idf[: tf.shape[1]])
    norms = np.sqrt(np.asarray(m.multiply(m).sum(axis=1)).ravel())
    return sparse.csr_matrix(sparse.diags(1 / np.maximum(norms, 1e-12)) @ m), idf


def sample_ranks(n: int, pool: int, sampling: str, rng: np.random.Generator) -> np.ndarray:
    """``n`` distinct 0-based similarity ranks below ``pool``: ``log-rank`` draws them
    log-uniformly (as many from ranks 1-10 as from 10-100, 100-1000, ...), ``uniform`` uniformly."""
    if sampling == "uniform":
        return np.sort(rng.choice(pool, n, replace=False))
    if sampling != "log-rank":
        raise DataError(
            [Problem("impostors", None, f"unknown sampling {sampling!r}; use log-rank or uniform")]
        )
    ranks: set[int] = set()
    while len(ranks) < n:
        ranks.add(min(int(np.exp(rng.uniform(0, np.log(pool + 1)))), pool) - 1)
    return np.array(sorted(ranks))


def impostor_captions(
    dataset: Dataset, n: int, pool: int, sampling: str, rng: np.random.Generator, chunk: int = 512
) -> list[list[str]]:
    """For each image, ``n`` distinct captions of other images at sampled ranks of TF-IDF cosine
    similarity to its references (rank 1 = the closest), among the ``pool`` closest."""
    captions = list(dict.fromkeys(r for item in dataset for r in item.references))
    index = {c: i for i, c in enumerate(captions)}
    own_rows = np.repeat(np.arange(len(dataset)), [len(item.references) for item in dataset])
    own_cols = np.array([index[r] for item in dataset for r in item.references])
    vocab: dict[str, int] = {}
    cap_vecs, idf = _tfidf(captions, vocab)
    img_vecs, _ = _tfidf([" ".join(item.references) for item in dataset], vocab, idf)
    most = len(captions) - max(len(item.references) for item in dataset)
    pool = most if pool <= 0 else min(pool, most)
    if pool < n:
        raise DataError(
            [Problem(dataset.source, None, "too few images to draw impostor captions from")]
        )
    out = []
    for start in range(0, len(dataset), chunk):
        stop = min(start + chunk, len(dataset))
        sims = np.asarray(cap_vecs @ img_vecs[start:stop].toarray().T).T
        mine = (own_rows >= start) & (own_rows < stop)
        sims[own_rows[mine] - start, own_cols[mine]] = -np.inf
        for row in -sims:
            ranks = sample_ranks(n, pool, sampling, rng)
            out.append([captions[i] for i in np.argpartition(row, ranks)[ranks]])
    return out


def _refs(refs: Sequence[str], n: int, rng: np.random.Generator) -> tuple[str, ...]:
    if len(refs) <= n:
        return tuple(refs)
    return tuple(refs[i] for i in sorted(rng.choice(len(refs), n, replace=False)))


def build_training_set(
    dataset: Dataset,
    *,
    system_output: Mapping[str, Sequence[str]] | None = None,
    n_human: int = 3,
    n_machine: int = 3,
    n_refs: int = 4,
    impostor_pool: int = 0,
    impostor_sampling: str = "uniform",
    seed: int = 0,
) -> TrainingSet:
    """Human and machine candidates for every image of ``dataset`` (only its references are used).

    Args:
        dataset: images with at least two references each.
        system_output: image id -> machine captions; without it, hard impostors are drawn.
        n_human: held-out references per image used as human candidates.
        n_machine: impostors per image (ignored with ``system_output``).
        n_refs: references per candidate.
        impostor_pool: impostors are drawn from this many nearest captions of other images
            (0: all of them, i.e. random captions of other images).
        impostor_sampling: ``uniform`` (default) or ``log-rank`` ranks within the pool.
        seed: seeds every random choice.
    """
    short = [
        Problem(dataset.source, item.id, f"needs at least 2 references, has {len(item.references)}")
        for item in dataset
        if len(item.references) < 2
    ]
    ids = {str(item.id) for item in dataset}
    unknown = [
        Problem("system output", key, "unknown image id: not in the training dataset")
        for key in (system_output or {})
        if str(key) not in ids
    ]
    if short or unknown:
        raise DataError(short + unknown, header="cannot build the NNEval training set")
    rng = np.random.default_rng(seed)
    machine: list[list[str]]
    if system_output is not None:
        by_id = {str(k): list(v) for k, v in system_output.items()}
        machine = [by_id.get(str(item.id), []) for item in dataset]
    else:
        machine = impostor_captions(dataset, n_machine, impostor_pool, impostor_sampling, rng)
    cands, refs, labels, images, pictures = [], [], [], [], []
    for item, machine_caps in zip(dataset, machine):
        all_refs = list(item.references)
        for h in rng.choice(len(all_refs), min(n_human, len(all_refs)), replace=False):
            cands.append(all_refs[h])
            refs.append(_refs(all_refs[:h] + all_refs[h + 1 :], n_refs, rng))
            labels.append(HUMAN)
            images.append(str(item.id))
            pictures.append(item.image)
        for caption in machine_caps:
            cands.append(caption)
            refs.append(_refs(all_refs, n_refs, rng))
            labels.append(MACHINE)
            images.append(str(item.id))
            pictures.append(item.image)
    return TrainingSet(cands, refs, np.array(labels, dtype=int), images, pictures)


def load_system_output(path: str | Path) -> dict[str, list[str]]:
    """Machine captions per image id from a JSON object ``{id: [captions]}``, a COCO results list
    ``[{"image_id", "caption"}]``, or JSONL lines ``{"id", "candidates"}``."""
    path = Path(path)
    problems: list[Problem] = []
    out: dict[str, list[str]] = {}

    def add(key: Any, captions: Any, line: int | None = None) -> None:
        if isinstance(captions, str):
            captions = [captions]
        if not isinstance(captions, list) or not all(
            isinstance(c, str) and c.strip() for c in captions
        ):
            problems.append(Problem(str(path), key, "captions must be non-empty strings", line))
            return
        out.setdefault(str(key), []).extend(captions)

    try:
        if path.suffix == ".jsonl":
            for line, text in enumerate(
                read_bytes(path, "a system output file").decode("utf-8").splitlines(), 1
            ):
                if text.strip():
                    record = parse_json(text, str(path), line)
                    add(record.get("id"), record.get("candidates", record.get("caption")), line)
        else:
            data = read_json(path, "a system output file")
            if isinstance(data, dict):
                for key, captions in data.items():
                    add(key, captions)
            elif isinstance(data, list):
                for record in data:
                    add(
                        record.get("image_id") if isinstance(record, dict) else None,
                        record.get("caption") if isinstance(record, dict) else record,
                    )
            else:
                problems.append(Problem(str(path), None, "expected a JSON object or list"))
    except DataError as err:  # not a regular file, over the size limit, bad or hostile JSON
        problems.extend(err.problems)
    except (OSError, UnicodeDecodeError, AttributeError) as err:
        problems.append(Problem(str(path), None, f"cannot read: {err}"))
    if problems:
        raise DataError(problems, header=f"cannot load system output from {path}")
    return out
