"""Training-loop rewards: CIDEr-D for a self-critical batch of 50 images x 5 sampled captions
against 5 references each, document frequencies fixed from the Flickr8k training captions
(6,000 images), on one core. capmetrics.rewards against pycocoevalcap's ``CiderScorer`` given the
same fixed df (the ``ciderD`` of self-critical.pytorch-style repositories is not on PyPI; its
algorithm is CiderScorer's with a precomputed df), values checked equal.

Also timed: token-id candidates (the model's padded ids with its vocabulary), the samples and
their 50 greedy baselines scored by two calls or by one ``self_critical`` call, and BLEU-4.
Target (issue 13): <= 5 ms per batch. Run: ``python benchmarks/bench_rewards.py [--repeat 50]``.
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import threadpoolctl

import capmetrics
from capmetrics.data.flickr8k import load_captions
from capmetrics.rewards import BleuReward, CiderDReward, decode, self_critical

DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "data" / "flickr8k"


CPU: list[float] = []  # the best CPU time (time.process_time) of each timed line, in order


def timed(repeat: int, fn) -> tuple[float, float, object]:  # type: ignore[no-untyped-def]
    """(best, median) seconds over ``repeat`` calls, and the last result; the best CPU time
    (less affected by other processes than the wall clock) goes to ``CPU``."""
    times, cpu, result = [], [], None
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        result = fn()
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    CPU.append(min(cpu))
    return min(times), float(np.median(times)), result


def coco_fixed_df(train: list[list[str]]):  # type: ignore[no-untyped-def]
    """A function scoring (samples, refs) with pycocoevalcap's CiderScorer and the df of ``train``."""
    from pycocoevalcap.cider.cider_scorer import CiderScorer, cook_refs

    df: defaultdict = defaultdict(float)
    for image in train:
        for gram in {g for ref in cook_refs(image) for g in ref}:
            df[gram] += 1

    class Corpus(list):  # ln N with N = the training images, as ciderD does
        def __len__(self) -> int:
            return len(train)

    def score(samples: list[str], refs: list[list[str]]) -> np.ndarray:
        scorer = CiderScorer(n=4, sigma=6.0)
        for s, r in zip(samples, refs):
            scorer += (s, r)
        scorer.crefs, scorer.document_frequency = Corpus(scorer.crefs), df
        return np.asarray(scorer.compute_cider())

    return score


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, default=DEFAULT)
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()
    threadpoolctl.threadpool_limits(1)
    _, by_image = load_captions(args.data)
    names = lambda f: [n.split(".")[0] for n in (args.data / f).read_text().split()]  # noqa: E731
    ptb = capmetrics.compose("ptb")
    train = [ptb.tokenize_joined(by_image[n]) for n in names("Flickr_8k.trainImages.txt")]
    test = [ptb.tokenize_joined(by_image[n]) for n in names("Flickr_8k.testImages.txt")[:50]]
    pool = [c for refs in train for c in refs]
    rng = np.random.default_rng(0)
    samples = [pool[k] for k in rng.integers(0, len(pool), 250)]
    vocab = ["<end>"] + sorted({w for t in pool + [r for rs in test for r in rs] for w in t.split()})
    index = {w: i for i, w in enumerate(vocab)}
    ids = np.zeros((250, 20), dtype=np.int64)  # the sampled captions as a model's padded ids
    for n, t in enumerate(samples):
        words = [index[w] for w in t.split()][:19]
        ids[n, : len(words)] = words
    samples = decode(ids, vocab)  # (cut at 19 words, as the ids are)

    start = time.perf_counter()
    reward = CiderDReward.fit(train)
    fit_s = time.perf_counter() - start
    reward(samples, test)  # first call builds the df index
    ours_best, ours_med, ours = timed(args.repeat, lambda: reward(samples, test))
    ids_reward = CiderDReward.fit(train, vocab=vocab)
    ids_reward(ids, test)
    ids_best, ids_med, _ = timed(args.repeat, lambda: ids_reward(ids, test))
    greedy, greedy_ids = samples[::5], ids[::5]  # stand-ins for the 50 greedy captions
    two_best, two_med, _ = timed(
        args.repeat, lambda: self_critical(ids_reward(ids, test), ids_reward(greedy_ids, test)))
    sc_best, sc_med, (_, sc_samples, sc_greedy) = timed(
        args.repeat, lambda: ids_reward.self_critical(ids, greedy_ids, test))
    assert np.array_equal(sc_samples, reward(samples, test)) and np.array_equal(sc_greedy, reward(greedy, test))
    bleu = BleuReward(4)
    bleu_best, bleu_med, _ = timed(args.repeat, lambda: bleu(samples, test))
    coco = coco_fixed_df(train)
    refs = [test[i // 5] for i in range(250)]
    coco_best, coco_med, theirs = timed(max(3, args.repeat // 10), lambda: coco(samples, refs))
    diff = float(np.max(np.abs(np.asarray(ours) - np.asarray(theirs))))
    print(f"batch: 50 images x 5 samples, 5 references each; df from {len(train)} training images "
          f"(fit {fit_s:.2f} s once); one core")
    print(f"pycocoevalcap CiderScorer (fixed df) : best {coco_best * 1e3:7.2f} ms  median {coco_med * 1e3:7.2f} ms")
    print(f"CiderDReward, strings               : best {ours_best * 1e3:7.2f} ms  median {ours_med * 1e3:7.2f} ms  "
          f"({coco_best / ours_best:.0f}x)")
    print(f"CiderDReward, token ids + vocab      : best {ids_best * 1e3:7.2f} ms  median {ids_med * 1e3:7.2f} ms")
    print(f"samples + greedy (ids), two calls    : best {two_best * 1e3:7.2f} ms  median {two_med * 1e3:7.2f} ms")
    print(f"CiderDReward.self_critical, one call : best {sc_best * 1e3:7.2f} ms  median {sc_med * 1e3:7.2f} ms")
    print(f"BleuReward(4), strings               : best {bleu_best * 1e3:7.2f} ms  median {bleu_med * 1e3:7.2f} ms")
    print("best CPU times, ms: " + ", ".join(f"{t * 1e3:.2f}" for t in CPU[:5]) + f"; CiderScorer {CPU[5] * 1e3:.1f}")
    print(f"max abs difference vs CiderScorer: {diff:.2g}  (target: <= 5 ms per batch)")
    assert diff < 1e-12


if __name__ == "__main__":
    main()
