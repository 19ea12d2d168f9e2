"""Former path of :mod:`capmetrics.integrations.torchmetrics`
(kept: the same objects, re-exported)."""

from capmetrics.integrations.torchmetrics import *  # noqa: F403
from capmetrics.integrations.torchmetrics import __all__  # noqa: F401
