"""pycocoevalcap's own SPICE flow, run with the original ``spice-1.0.jar`` on today's Java.

pycocoevalcap's ``Spice.compute_score`` is used unchanged, from a copy of its ``spice`` package in a
temporary folder (so its ``tmp/`` and ``cache/`` are not written into site-packages) whose ``lib/``
links pycocoevalcap's jars and the two CoreNLP 3.6.0 jars, as its ``get_stanford_models`` would
put them. Only its ``java -jar spice-1.0.jar`` call is adapted to Java 9+: the ``--add-opens`` the
jar needs and, on Java 15+, a JavaScript engine next to the jar on the class path (the jar's
manifest Class-Path still brings in ``lib/``). This module does not use capmetrics' SPICE code.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

OPENS = [
    f"--add-opens=java.base/{p}=ALL-UNNAMED"
    for p in (
        "java.lang",
        "java.util",
        "java.math",
        "java.util.concurrent",
        "java.net",
        "java.text",
        "java.io",
    )
]


def _package_copy(corenlp: Path, folder: Path) -> Path:
    spec = importlib.util.find_spec("pycocoevalcap")
    assert spec is not None and spec.submodule_search_locations
    source = Path(next(iter(spec.submodule_search_locations))) / "spice"
    target = folder / "coco_spice"
    (target / "lib").mkdir(parents=True)
    for name in ("__init__.py", "spice.py", "get_stanford_models.py"):
        shutil.copyfile(source / name, target / name)
    shutil.copyfile(
        source / "spice-1.0.jar", target / "spice-1.0.jar"
    )  # the manifest Class-Path resolves next to it
    for jar in [*(source / "lib").glob("*.jar"), *corenlp.glob("stanford-corenlp-3.6.0*.jar")]:
        (target / "lib" / jar.name).symlink_to(jar)
    return target


def coco_spice(
    candidates: Sequence[str], references: Sequence[Sequence[str]], corenlp: Path, js_jar: Path
) -> tuple[float, list[dict[str, dict[str, float]]]]:
    """pycocoevalcap's ``Spice().compute_score`` on pre-tokenised texts: (average, per-item
    scores)."""
    with tempfile.TemporaryDirectory(prefix="coco-spice-") as tmp:
        _package_copy(corenlp, Path(tmp))
        sys.path.insert(0, tmp)
        try:
            spec = importlib.util.spec_from_file_location(
                "coco_spice.spice",
                Path(tmp) / "coco_spice" / "spice.py",
                submodule_search_locations=None,
            )
            import coco_spice  # noqa: F401  (the package, for the relative import)

            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        finally:
            sys.path.remove(tmp)

        def check_call(
            cmd, cwd
        ):  # java -jar -Xmx8G spice-1.0.jar ARGS -> java -Xmx8G OPENS -cp jar:js MAIN ARGS
            assert cmd[:4] == ["java", "-jar", "-Xmx8G", "spice-1.0.jar"], cmd
            java = [
                "java",
                "-Xmx8G",
                *OPENS,
                "-cp",
                f"spice-1.0.jar:{js_jar}",
                "edu.anu.spice.SpiceScorer",
            ]
            return subprocess.check_call([*java, *cmd[4:]], cwd=cwd)

        module.subprocess = type("Shim", (), {"check_call": staticmethod(check_call)})
        scorer = module.Spice.__new__(module.Spice)  # skips get_stanford_models (a download)
        gts = {i: list(refs) for i, refs in enumerate(references)}
        res = {i: [c] for i, c in enumerate(candidates)}
        average, scores = scorer.compute_score(gts, res)
        sys.modules.pop("coco_spice", None)
        return float(average), scores
