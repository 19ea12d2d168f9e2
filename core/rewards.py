"""Former path of :mod:`capmetrics.integrations.rewards` (kept: the same objects, re-exported)."""

from capmetrics.integrations.rewards import *  # noqa: F403
from capmetrics.integrations.rewards import __all__  # noqa: F401
