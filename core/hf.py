"""Former path of :mod:`capmetrics.integrations.hf` (kept: the same objects, re-exported)."""

from capmetrics.integrations.hf import *  # noqa: F403
from capmetrics.integrations.hf import __all__  # noqa: F401
