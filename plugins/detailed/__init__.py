"""Metrics for detailed (paragraph-long) captions: ``capture`` (CAPTURE's object, attribute and
relation F-scores between scene graphs) and ``chair`` (CHAIR's hallucinated COCO objects).

Both run offline on a CPU: WordNet 3.0 is read through NLTK from Debian's ``wordnet-base`` (or
NLTK's data), scene graphs come with the items or from SPICE's cached CoreNLP parse. See
docs/metrics/detailed-captions.md.
"""

from __future__ import annotations

from collections.abc import Callable

from capmetrics import hookimpl


@hookimpl
def register_distances(register: Callable[..., None]) -> None:
    from capmetrics.plugins.detailed.capture import Capture
    from capmetrics.plugins.detailed.chair import Chair

    register(Capture)
    register(Chair)
