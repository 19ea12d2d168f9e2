"""Former path of :mod:`capmetrics.integrations.cider` (kept: the same objects, re-exported)."""

from capmetrics.integrations.cider import *  # noqa: F403
from capmetrics.integrations.cider import __all__  # noqa: F401
