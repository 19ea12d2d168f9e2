"""The example third-party plugin contrib/capmetrics-chrf, installed for real (offline) into a
temporary directory: found through its entry point, listed with its distribution, usable by
name and nested in other specs, blockable, and listed by ``capmetrics plugins``."""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import capmetrics
import pytest
from capmetrics import Distance, PluginError, UnknownComponentError, hookimpl
from capmetrics.registry import get_registry, register_plugin, reset_registry

from tests.conftest import ROOT

CONTRIB = ROOT / "contrib" / "capmetrics-chrf"

# The first two Flickr8k images: caption #0 as candidate, the other four as references.
CAPTIONS = [
    [
        "A child in a pink dress is climbing up a set of stairs in an entry way .",
        "A girl going into a wooden building .",
        "A little girl climbing into a wooden playhouse .",
        "A little girl climbing the stairs to her playhouse .",
        "A little girl in a pink dress going into a wooden cabin .",
    ],
    [
        "A black dog and a spotted dog are fighting",
        "A black dog and a tri-colored dog playing with each other on the road .",
        "A black dog and a white dog with brown spots are staring at each other in the street .",
        "Two dogs of different breeds looking at each other on the road .",
        "Two dogs on pavement moving toward each other .",
    ],
]
CANDIDATES = [c[0] for c in CAPTIONS]
REFERENCES = [c[1:] for c in CAPTIONS]
# sacrebleu 2.6.0: CHRF(beta=1).sentence_score / corpus_score on the items above.
SACREBLEU_BETA1 = [32.652453605915035, 36.611374082488354]
SACREBLEU_BETA1_CORPUS = 34.52796281380275
# sacrebleu 2.6.0: max over image 1's five captions of CHRF().sentence_score against image 2's.
SACREBLEU_MAX_OVER_CANDIDATES = 16.290622574697338


def _drop_modules() -> None:
    for name in [
        m for m in sys.modules if m == "capmetrics_chrf" or m.startswith("capmetrics_chrf.")
    ]:
        del sys.modules[name]


@pytest.fixture(scope="session")
def chrf_target(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """capmetrics-chrf built and installed with pip into a fresh directory, offline.

    It is built from a copy, so the build leaves nothing (build/, *.egg-info) in the tree.
    """
    source = tmp_path_factory.mktemp("contrib-src") / "capmetrics-chrf"
    shutil.copytree(
        CONTRIB,
        source,
        ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__", ".pytest_cache"),
    )
    target = tmp_path_factory.mktemp("contrib-site")
    command = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--no-index",
        "--no-deps",
        "--no-build-isolation",
        "--target",
        str(target),
        str(source),
    ]
    done = subprocess.run(command, check=False, capture_output=True, text=True)
    assert done.returncode == 0, f"pip install failed:\n{done.stdout}\n{done.stderr}"
    return target


@pytest.fixture(scope="module", autouse=True)
def chrf_installed(chrf_target: Path) -> Iterator[Path]:
    """The installed package on sys.path and a registry rebuilt from the entry points; both are
    restored afterwards, so the rest of the suite never sees the plugin."""
    saved = list(sys.path)
    sys.path.insert(0, str(chrf_target))
    importlib.invalidate_caches()
    _drop_modules()
    reset_registry()
    yield chrf_target
    sys.path[:] = saved
    _drop_modules()
    importlib.invalidate_caches()
    reset_registry()


@pytest.fixture
def fresh_registry() -> Iterator[None]:
    """Rebuild the registry after the test (which changes the environment or the plugins)."""
    yield
    reset_registry()


def test_listed_with_its_distribution(chrf_installed: Path) -> None:
    entry = next(e for e in get_registry().components("distance") if e.name == "chrf")
    assert (entry.plugin.name, entry.plugin.distribution, entry.plugin.version) == (
        "chrf",
        "capmetrics-chrf",
        "0.1.0",
    )
    assert entry.plugin.module == "capmetrics_chrf"
    assert Path(sys.modules[entry.cls.__module__].__file__).is_relative_to(chrf_installed)
    assert entry.summary.startswith("chrF (Popović 2015)")


def test_usable_by_name_with_real_values() -> None:
    metric = capmetrics.compose("chrf(beta=1)")
    assert (
        isinstance(metric, Distance) and metric.higher_is_better and metric.distance_offset == 100.0
    )
    scores = metric.score(CANDIDATES, REFERENCES)
    assert scores.values.tolist() == pytest.approx(SACREBLEU_BETA1, abs=1e-9)
    assert scores.corpus == pytest.approx(SACREBLEU_BETA1_CORPUS, abs=1e-9)


def test_usable_nested_in_another_spec() -> None:
    stat = capmetrics.compose("over-candidates(distance=chrf, reduce=max)")
    assert stat.higher_is_better
    assert stat.compare(CAPTIONS[0], CAPTIONS[1]).value == pytest.approx(
        SACREBLEU_MAX_OVER_CANDIDATES, abs=1e-9
    )


@pytest.mark.parametrize(
    ("spec", "canonical"),
    [
        ("chrf", "chrf"),
        ("CHRF(beta=1)", "chrf(beta=1.0)"),
        ("chrf(char-order=4, word_order=2)", "chrf(char_order=4, word_order=2)"),
        (
            "over-candidates(distance=chrf(beta=3), reduce=max)",
            "over-candidates(distance=chrf(beta=3.0), reduce=max)",
        ),
    ],
)
def test_spec_round_trip(spec: str, canonical: str) -> None:
    component = capmetrics.compose(spec)
    assert component.spec == canonical
    assert capmetrics.compose(component.spec) == component
    assert component.signature()["capmetrics-chrf"] == "0.1.0"


def test_blocked_by_environment(monkeypatch: pytest.MonkeyPatch, fresh_registry: None) -> None:
    monkeypatch.setenv("CAPMETRICS_DISABLE_PLUGINS", "chrf")
    reset_registry()
    registry = get_registry()
    assert "chrf" not in registry.names("distance")
    assert "capmetrics-chrf" not in {p.distribution for p in registry.plugins}
    with pytest.raises(UnknownComponentError, match="unknown distance 'chrf'"):
        capmetrics.compose("chrf", "distance")


def test_duplicate_name_is_an_error_naming_both(fresh_registry: None) -> None:
    class OtherChrF(Distance):
        """A second distance that claims the name chrf."""

        name = "chrf"

    class OtherPlugin:
        @hookimpl
        def register_distances(self, register):  # type: ignore[no-untyped-def]
            register(OtherChrF)

    with pytest.raises(PluginError, match="registered twice") as err:
        register_plugin(OtherPlugin(), "other-chrf")
    assert "capmetrics-chrf" in str(err.value) and "other-chrf" in str(err.value)


def _run_cli(target: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "COLUMNS": "200", **env}
    environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(target), environ.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "capmetrics.cli", *args],
        check=False,
        capture_output=True,
        text=True,
        env=environ,
        timeout=120,
    )


def test_cli_lists_the_plugin(chrf_installed: Path) -> None:
    done = _run_cli(chrf_installed, "plugins", "--kind", "distance")
    assert done.returncode == 0, done.stderr
    assert "chrf" in done.stdout and "capmetrics-chrf" in done.stdout
    done = _run_cli(chrf_installed, "plugins", "--kind", "distance", "--json")
    rows = {row["name"]: row for row in json.loads(done.stdout)}
    assert (rows["chrf"]["package"], rows["chrf"]["plugin"]) == ("capmetrics-chrf", "chrf")


def test_cli_respects_the_block(chrf_installed: Path) -> None:
    done = _run_cli(
        chrf_installed, "plugins", "--kind", "distance", CAPMETRICS_DISABLE_PLUGINS="chrf"
    )
    assert done.returncode == 0, done.stderr
    assert "capmetrics-chrf" not in done.stdout
