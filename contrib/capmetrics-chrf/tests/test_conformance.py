"""capmetrics' conformance kit over chrF: the checks every capmetrics component passes (spec
round trip, signature in a new process, pickling, strict results, item order, determinism,
executors, edge inputs). Install the package first (``pip install -e .``) so that a new process
finds its entry point."""

from __future__ import annotations

import importlib.metadata

from capmetrics.registry import get_registry, register_plugin
from capmetrics.testing import CHECKS, parametrize_with_checks

INSTALLED = any(ep.name == "chrf" for ep in importlib.metadata.entry_points(group="capmetrics"))
if not INSTALLED:  # running from a source checkout: register the hooks in this process only
    import capmetrics_chrf

    if "chrf" not in get_registry().names("distance"):
        register_plugin(capmetrics_chrf, "chrf")
CHECK_NAMES = [c for c in CHECKS if INSTALLED or c != "check_signature_fresh_process"]
SPECS = [
    "chrf",
    "chrf(word_order=2, beta=1.0)",
    "over-candidates(distance=chrf, reduce=max)",
    "trm(distance=chrf, p_value=exact)",
]


@parametrize_with_checks(SPECS, checks=CHECK_NAMES)
def test_chrf_conforms(component, check):
    check(component)
