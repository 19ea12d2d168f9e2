"""Former path of :mod:`capmetrics.integrations.pycocoevalcap`
(kept: the same objects, re-exported)."""

from capmetrics.integrations.pycocoevalcap import *  # noqa: F403
from capmetrics.integrations.pycocoevalcap import __all__  # noqa: F401
