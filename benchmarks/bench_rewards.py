"""Training-loop rewards: CIDEr-D for a self-critical batch of 50 images x 5 sampled captions
against 5 references each, document frequencies fixed from the Flickr8k training captions
(6,000 images), on one core. capmetrics.integrations.rewards against pycocoevalcap's
``CiderScorer`` given the same fixed df (the ``ciderD`` of self-critical.pytorch-style
repositories is not on PyPI; its algorithm is CiderScorer's with a precomputed df), values
checked equal.

Also timed: token-id candidates (the model's padded ids with its vocabulary), the samples and
their 50 greedy baselines scored by two calls or by one ``self_critical`` call, and BLEU-4.
Target (issue 13): <= 5 ms per batch. Run: ``python benchmarks/bench_rewards.py [--repeat 50]``.

With ``--cider`` (a checkout of ruotianluo/cider at e9b736d, the commit self-critical.pytorch's
submodule pins), ``--self-critical`` (a checkout of self-critical.pytorch) and ``--six`` (a folder
with six.py), also times self-critical.pytorch's own ``get_self_critical_reward`` on its batch of
tests/data/cider_compat (50 images x 5 samples + 50 greedy, label ids, its prepro_ngrams df;
``--sc-df`` a full one made by experiments/make_cider_compat_fixtures.py --full-out) three ways in
one run: with the original ``CiderD``, with ``capmetrics.integrations.cider.CiderD`` swapped in (the
import swap: the rest of the function unchanged), and ``CiderDReward(keep_end=True).self_critical``
on the ids (``--rounds`` times, each round printing the step's CPU-time ratio). Target (issues
29, 40): equal within 1e-12, >= 20x faster per step in CPU time.
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict
from pathlib import Path

import capmetrics
import numpy as np
import threadpoolctl
from capmetrics.data.flickr8k import load_captions
from capmetrics.integrations.rewards import BleuReward, CiderDReward, decode, self_critical

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
    """A function scoring (samples, refs) with pycocoevalcap's CiderScorer and the df of
    ``train``."""
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


FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "data" / "cider_compat"


def self_critical_step(args: argparse.Namespace) -> float:
    """self-critical.pytorch's get_self_critical_reward: original CiderD, the compat CiderD
    swapped in, and CiderDReward(keep_end=True), on its Flickr8k batch, in this run."""
    import contextlib
    import gzip
    import json
    import os
    import shutil
    import sys
    import tempfile
    import types

    import torch
    from capmetrics.integrations.cider import CiderD as CompatCiderD

    sys.path[:0] = [str(args.six), str(args.cider), str(args.self_critical)]
    from captioning.utils import rewards  # type: ignore[import-not-found]
    from pyciderevalcap.ciderD.ciderD import CiderD  # type: ignore[import-not-found]

    batch = json.loads((FIXTURES / "batch.json").read_text())
    work = Path(tempfile.mkdtemp(prefix="bench-rewards-"))
    (work / "data").mkdir()
    if args.sc_df is not None:
        shutil.copy(args.sc_df, work / "data" / "sc.p")
    else:
        with (
            gzip.open(FIXTURES / f"{batch['df']}-idxs.p.gz") as f,
            open(work / "data" / "sc.p", "wb") as g,
        ):
            shutil.copyfileobj(f, g)
    gen, greedy = torch.tensor(batch["gen_result"]), torch.tensor(batch["greedy_res"])
    gts = [np.array(g) for g in batch["gts"]]
    opt = types.SimpleNamespace(cider_reward_weight=1.0, bleu_reward_weight=0.0)
    itow = {int(k): w for k, w in batch["ix_to_word"].items()}
    old_cwd = os.getcwd()
    os.chdir(work)
    try:
        original, swapped = CiderD(df="sc"), CompatCiderD(df="sc")
        reward = CiderDReward("sc", vocab=itow, end_id=0, keep_end=True)
        with contextlib.redirect_stdout(None):  # the function prints its mean CIDEr-D every call

            def step(scorer):  # type: ignore[no-untyped-def]
                rewards.CiderD_scorer = scorer
                return lambda: rewards.get_self_critical_reward(greedy, gts, gen, opt)[:, 0]

            repeat, first = max(3, args.repeat // 10), len(CPU)
            orig_best, orig_med, orig = timed(repeat, step(original))
            swap_best, swap_med, swap = timed(args.repeat, step(swapped))
            ids_best, ids_med, (adv, _, _) = timed(
                args.repeat, lambda: reward.self_critical(gen.numpy(), greedy.numpy(), gts)
            )
            # the scorers alone, on the gts/res that get_self_critical_reward builds
            refs = batch["gts_strings"]
            gts_ = {i: refs[i // 5] if i < 250 else refs[i - 250] for i in range(300)}
            res_ = [{"image_id": i, "caption": [c]} for i, c in enumerate(batch["res_strings"])]
            alone_orig, _, _ = timed(repeat, lambda: original.compute_score(gts_, res_))
            alone_swap, _, _ = timed(args.repeat, lambda: swapped.compute_score(gts_, res_))
            cpu = CPU[first:]
            del CPU[first:]
    finally:
        os.chdir(old_cwd)
        shutil.rmtree(work)
    df_images = "6,000" if args.sc_df is not None else "300"
    print(
        "\nself-critical.pytorch get_self_critical_reward, 50 images x 5 samples + 50 greedy "
        f"(label ids), prepro_ngrams df of {df_images} Flickr8k training images; one core"
    )
    print(
        f"original ruotianluo/cider CiderD      : best {orig_best * 1e3:7.2f} ms  median "
        f"{orig_med * 1e3:7.2f} ms"
    )
    print(
        f"import swap: capmetrics.integrations CiderD : best {swap_best * 1e3:7.2f} ms  median "
        f"{swap_med * 1e3:7.2f} ms  ({orig_best / swap_best:.0f}x, max abs difference "
        f"{np.abs(np.asarray(swap) - orig).max():.2g})"
    )
    print(
        f"CiderDReward(keep_end=True), numpy ids: best {ids_best * 1e3:7.2f} ms  median "
        f"{ids_med * 1e3:7.2f} ms  ({orig_best / ids_best:.0f}x, max abs difference "
        f"{np.abs(adv - orig).max():.2g})"
    )
    print(
        f"compute_score alone (same gts/res)    : original {alone_orig * 1e3:7.2f} ms, compat "
        f"{alone_swap * 1e3:6.2f} ms ({alone_orig / alone_swap:.0f}x)"
    )
    print(
        "best CPU times, ms: "
        + ", ".join(f"{t * 1e3:.2f}" for t in cpu)
        + " (the five rows above, in order)"
    )
    print(
        f"the step, best CPU time: original {cpu[0] * 1e3:.1f} ms, compat {cpu[1] * 1e3:.2f} ms: "
        f"{cpu[0] / cpu[1]:.1f}x; ids {cpu[0] / cpu[2]:.1f}x (load {os.getloadavg()[0]:.2f})"
    )
    print("target (issues 29, 40): within 1e-12, >= 20x per step in CPU time")
    assert np.abs(np.asarray(swap) - orig).max() < 1e-12 and np.abs(adv - orig).max() < 1e-12
    return cpu[0] / cpu[1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, default=DEFAULT)
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--cider", type=Path, help="ruotianluo/cider checkout (e9b736d)")
    parser.add_argument("--self-critical", type=Path, help="self-critical.pytorch checkout")
    parser.add_argument(
        "--six", type=Path, help="a folder with six.py (ruotianluo/cider imports it)"
    )
    parser.add_argument("--sc-df", type=Path, help="a prepro_ngrams -idxs.p of the same vocabulary")
    parser.add_argument("--only-self-critical", action="store_true")
    parser.add_argument("--rounds", type=int, default=1, help="times self-critical's step is timed")
    args = parser.parse_args()
    threadpoolctl.threadpool_limits(1)
    if args.cider is not None and args.self_critical is not None and args.six is not None:
        ratios = [self_critical_step(args) for _ in range(args.rounds)]
        print(
            "\nthe step's CPU-time ratio per round: "
            + ", ".join(f"{r:.1f}x" for r in ratios)
            + " (target >= 20x)"
        )
        if args.only_self_critical:
            return
    else:
        print(
            "(--cider, --self-critical and --six not given: self-critical.pytorch's step is not "
            "timed)"
        )
    _, by_image = load_captions(args.data)
    names = lambda f: [n.split(".")[0] for n in (args.data / f).read_text().split()]  # noqa: E731
    ptb = capmetrics.compose("ptb")
    train = [ptb.tokenize_joined(by_image[n]) for n in names("Flickr_8k.trainImages.txt")]
    test = [ptb.tokenize_joined(by_image[n]) for n in names("Flickr_8k.testImages.txt")[:50]]
    pool = [c for refs in train for c in refs]
    rng = np.random.default_rng(0)
    samples = [pool[k] for k in rng.integers(0, len(pool), 250)]
    vocab = ["<end>"] + sorted(
        {w for t in pool + [r for rs in test for r in rs] for w in t.split()}
    )
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
        args.repeat, lambda: self_critical(ids_reward(ids, test), ids_reward(greedy_ids, test))
    )
    sc_best, sc_med, (_, sc_samples, sc_greedy) = timed(
        args.repeat, lambda: ids_reward.self_critical(ids, greedy_ids, test)
    )
    assert np.array_equal(sc_samples, reward(samples, test)) and np.array_equal(
        sc_greedy, reward(greedy, test)
    )
    bleu = BleuReward(4)
    bleu_best, bleu_med, _ = timed(args.repeat, lambda: bleu(samples, test))
    coco = coco_fixed_df(train)
    refs = [test[i // 5] for i in range(250)]
    coco_best, coco_med, theirs = timed(max(3, args.repeat // 10), lambda: coco(samples, refs))
    diff = float(np.max(np.abs(np.asarray(ours) - np.asarray(theirs))))
    print(
        f"batch: 50 images x 5 samples, 5 references each; df from {len(train)} training images "
        f"(fit {fit_s:.2f} s once); one core"
    )
    print(
        f"pycocoevalcap CiderScorer (fixed df) : best {coco_best * 1e3:7.2f} ms  median "
        f"{coco_med * 1e3:7.2f} ms"
    )
    print(
        f"CiderDReward, strings               : best {ours_best * 1e3:7.2f} ms  median "
        f"{ours_med * 1e3:7.2f} ms  ({coco_best / ours_best:.0f}x)"
    )
    print(
        f"CiderDReward, token ids + vocab      : best {ids_best * 1e3:7.2f} ms  median "
        f"{ids_med * 1e3:7.2f} ms"
    )
    print(
        f"samples + greedy (ids), two calls    : best {two_best * 1e3:7.2f} ms  median "
        f"{two_med * 1e3:7.2f} ms"
    )
    print(
        f"CiderDReward.self_critical, one call : best {sc_best * 1e3:7.2f} ms  median "
        f"{sc_med * 1e3:7.2f} ms"
    )
    print(
        f"BleuReward(4), strings               : best {bleu_best * 1e3:7.2f} ms  median "
        f"{bleu_med * 1e3:7.2f} ms"
    )
    print(
        "best CPU times, ms: "
        + ", ".join(f"{t * 1e3:.2f}" for t in CPU[:5])
        + f"; CiderScorer {CPU[5] * 1e3:.1f}"
    )
    print(f"max abs difference vs CiderScorer: {diff:.2g}  (target: <= 5 ms per batch)")
    assert diff < 1e-12


if __name__ == "__main__":
    main()
