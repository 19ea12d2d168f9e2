"""Whether the user lets files run code (``--trust-code``): off unless they say so.

Loading a file someone shares runs none of its code: checkpoints are read as tensors only
(``torch.load(weights_only=True)``, safetensors), and a TorchScript archive, whose scripted
methods run while it loads, is refused unless the user asks for it: ``trust_code=true`` on
the component (``clip-model(..., trust_code=true)``) or ``--trust-code`` on the command line,
which sets :func:`use_trust_code` for the run. A model file can never set it (the parameter is
one of the component's ``program_params``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

_TRUST_CODE: ContextVar[bool] = ContextVar("capmetrics_trust_code", default=False)


def trust_code(explicit: bool | None = None) -> bool:
    """``explicit`` when given (a component's ``trust_code``), else the run's setting."""
    return bool(explicit) if explicit is not None else _TRUST_CODE.get()


@contextlib.contextmanager
def use_trust_code(trust: bool) -> Iterator[None]:
    """Within the block, components without a ``trust_code`` of their own take ``trust``."""
    token = _TRUST_CODE.set(bool(trust))
    try:
        yield
    finally:
        _TRUST_CODE.reset(token)


__all__ = ["trust_code", "use_trust_code"]
