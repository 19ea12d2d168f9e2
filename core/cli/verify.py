"""``capmetrics verify``: this installation's numbers against stored reference values.

Every bundled metric that runs on text scores the bundled Flickr8k-Expert sample
(``capmetrics/sample/flickr8k_expert_sample.jsonl``: 20 images, 113 candidates); its corpus value
and every candidate's value are compared with the values stored in
``capmetrics/sample/reference_values.json`` (made by ``capmetrics verify --record`` on the
reference installation). A metric whose extra or set-up step is missing is skipped, with the
command that readies it. The tolerances are those of each metric's arithmetic: the n-gram
metrics, METEOR and SPICE are deterministic (1e-12: a C library other than glibc may round a
power differently in the last bit; SPICE 1e-9), the embedding metrics run float32 models (1e-5).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

SAMPLE_DIR = Path(__file__).resolve().parents[1] / "sample"
SAMPLE = SAMPLE_DIR / "flickr8k_expert_sample.jsonl"
REFERENCE = SAMPLE_DIR / "reference_values.json"
FORMAT = "capmetrics-verify"

#: The bundled metrics that run on text, with the largest |difference| their arithmetic allows.
METRICS: dict[str, float] = {
    "bleu-1": 1e-12,
    "bleu-2": 1e-12,
    "bleu-3": 1e-12,
    "bleu-4": 1e-12,
    "rouge-l": 1e-12,
    "cider-d": 1e-12,
    "cider-original": 1e-12,
    "meteor": 1e-12,
    "meteor-jar": 1e-12,
    "spice": 1e-9,
    "bertscore": 1e-5,
    "embedding-cosine": 1e-5,
    "wembsim": 1e-5,
    "wmd": 1e-6,
    "nneval": 1e-5,
}


@dataclass
class Check:
    """One metric's verdict: ``status`` is ``OK``, ``FAIL`` or ``SKIP``."""

    metric: str
    status: str
    expected: float | None = None
    got: float | None = None
    max_diff: float | None = None
    tolerance: float | None = None
    reason: str = ""


def sample_digest() -> str:
    return hashlib.sha256(SAMPLE.read_bytes()).hexdigest()


def _values(spec: str, dataset: Any) -> tuple[float, list[float]]:
    """The corpus value and every candidate's value of ``spec`` on the sample."""
    from capmetrics.engine.scoring import score

    result = score(dataset, [spec])[spec]
    return float(result.corpus), [float(v) for values in result.candidate_values for v in values]


def _not_ready(spec: str) -> str:
    """What is missing for ``spec`` to run here (``""`` when nothing is)."""
    from capmetrics.cli import get_app
    from capmetrics.cli.setup import readiness, setup_commands
    from capmetrics.errors import SpecError
    from capmetrics.registry.compose import compose

    try:
        component = compose(spec, "distance")  # "nneval" is a learner too
    except SpecError:
        component = compose(spec)
    return readiness(type(component), set(setup_commands(get_app())), component)


def _setup_missing(message: str) -> bool:
    """Whether an error message names a missing extra or set-up step (not a wrong number)."""
    return any(
        hint in message for hint in ("pip install", "capmetrics setup", "no `java`", "needs Java")
    )


def verify(metrics: list[str] | None = None, reference: Path | None = None) -> list[Check]:
    """Score the sample with each metric that can run here and compare with ``reference``
    (default: the stored reference values)."""
    from capmetrics.data.loaders import load_dataset
    from capmetrics.errors import CapmetricsError

    reference = REFERENCE if reference is None else reference
    stored = json.loads(reference.read_text(encoding="utf-8"))
    if stored.get("format") != FORMAT or stored.get("sample_sha256") != sample_digest():
        raise CapmetricsError(
            f"{reference} is not the reference of this sample (format {FORMAT!r}, "
            f"sample sha256 {sample_digest()[:16]}...)"
        )
    dataset = load_dataset(SAMPLE)
    checks = []
    for spec in metrics or list(stored["metrics"]):
        entry = stored["metrics"].get(spec)
        if entry is None:
            checks.append(
                Check(
                    spec,
                    "SKIP",
                    reason=f"no stored reference (stored: {', '.join(stored['metrics'])})",
                )
            )
            continue
        missing = _not_ready(spec)
        if missing:
            checks.append(Check(spec, "SKIP", entry["corpus"], reason=f"needs: {missing}"))
            continue
        try:
            corpus, values = _values(spec, dataset)
        except CapmetricsError as err:
            first = str(err).splitlines()[0] if str(err) else type(err).__name__
            checks.append(
                Check(
                    spec,
                    "SKIP" if _setup_missing(str(err)) else "FAIL",
                    entry["corpus"],
                    reason=first,
                )
            )
            continue
        checks.append(_compare(spec, entry, corpus, values))
    return checks


def _compare(spec: str, entry: dict[str, Any], corpus: float, values: list[float]) -> Check:
    tolerance = float(entry["tolerance"])
    if len(values) != len(entry["values"]):
        return Check(
            spec,
            "FAIL",
            entry["corpus"],
            corpus,
            None,
            tolerance,
            f"{len(values)} candidate values, {len(entry['values'])} stored",
        )
    expected = np.array([entry["corpus"], *entry["values"]], dtype=float)
    got = np.array([corpus, *values], dtype=float)
    same_nan = np.isnan(expected) & np.isnan(got)
    diff = float(np.max(np.where(same_nan, 0.0, np.abs(got - expected)), initial=0.0))
    ok = bool(np.all(same_nan | (np.abs(got - expected) <= tolerance)))
    exact = "bit-identical" if np.array_equal(expected, got, equal_nan=True) else ""
    return Check(spec, "OK" if ok else "FAIL", entry["corpus"], corpus, diff, tolerance, exact)


def record(path: Path, metrics: list[str] | None = None) -> list[str]:
    """Write the reference values of ``metrics`` (default: every one that runs here); returns
    the metrics left out because they cannot run here."""
    from capmetrics.data.loaders import load_dataset

    dataset = load_dataset(SAMPLE)
    out: dict[str, Any] = {}
    left_out = []
    for spec in metrics or list(METRICS):
        if _not_ready(spec):
            left_out.append(spec)
            continue
        corpus, values = _values(spec, dataset)
        out[spec] = {"corpus": corpus, "tolerance": METRICS.get(spec, 1e-12), "values": values}
    from capmetrics import __version__

    data = {
        "format": FORMAT,
        "sample": SAMPLE.name,
        "sample_sha256": sample_digest(),
        "capmetrics": __version__,
        "metrics": out,
    }
    path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    return left_out


def _show(value: float | None) -> str:
    return "" if value is None else f"{value:.10g}"


def _verdict(check: Check) -> str:
    """The result column: OK (bit-identical, or within the tolerance), FAIL or SKIP and why."""
    if check.status == "OK":
        return "OK" + (" (bit-identical)" if check.reason else f" (<= {check.tolerance:.0e})")
    if check.status == "FAIL" and not check.reason:
        return f"FAIL (> {check.tolerance:.0e})"
    return f"{check.status}: {check.reason}"


def verify_cli(
    metric: Annotated[
        list[str] | None,
        typer.Option("--metric", "-m", help="Verify only this metric; repeat for several."),
    ] = None,  # noqa: UP045 - typer
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    strict: Annotated[
        bool, typer.Option("--strict", help="Exit 1 when a metric is skipped, too.")
    ] = False,
    record_to: Annotated[
        Path | None,
        typer.Option(
            "--record",
            help="Write the reference values of every metric that runs here to this file "
            "(for maintainers) instead of checking.",
        ),
    ] = None,  # noqa: UP045
) -> None:
    """Check this installation's numbers: score the bundled sample with every bundled metric
    and compare its corpus value and every candidate's value with the stored reference values
    (exit 1 when one differs; a metric whose extra or set-up is missing is skipped)."""
    if record_to is not None:
        left_out = record(record_to, metric)
        typer.echo(
            f"wrote {record_to}"
            + (f"; left out (not ready here): {', '.join(left_out)}" if left_out else ""),
            err=True,
        )
        return
    checks = verify(metric)
    if as_json:
        from capmetrics.io.strict_json import dumps

        typer.echo(dumps([check.__dict__ for check in checks]))
    else:
        from rich.console import Console
        from rich.table import Table

        table = Table(title=f"capmetrics verify: {SAMPLE.name}")
        table.add_column("metric", no_wrap=True)
        table.add_column("expected", no_wrap=True)
        table.add_column("got", no_wrap=True)
        table.add_column("max |diff|", no_wrap=True)
        table.add_column("result", overflow="fold", ratio=1)
        for c in checks:
            table.add_row(
                c.metric,
                _show(c.expected),
                _show(c.got),
                "" if c.max_diff is None else f"{c.max_diff:.1e}",
                _verdict(c),
            )
        Console(highlight=False, emoji=False).print(table)
    failed = [c for c in checks if c.status == "FAIL" or (strict and c.status == "SKIP")]
    if failed:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add ``verify`` to the root ``capmetrics`` app."""
    app.command("verify")(verify_cli)
