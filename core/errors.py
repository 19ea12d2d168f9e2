"""Exception hierarchy. Every error capmetrics raises derives from :class:`CapmetricsError`
and also from the builtin that callers would catch anyway."""

from __future__ import annotations

import contextlib
import difflib
import pickle
from collections.abc import Iterable, Iterator
from typing import Any


class CapmetricsError(Exception):
    """Base class of every capmetrics error."""


class SpecError(CapmetricsError, ValueError):
    """A component spec names a wrong parameter or value."""


class SpecSyntaxError(SpecError):
    """A component spec does not parse."""


class UnknownComponentError(CapmetricsError, LookupError):
    """A spec names a component that no loaded plugin registers."""

    def __str__(self) -> str:  # LookupError would repr() the message
        return str(self.args[0]) if self.args else ""


class PluginError(CapmetricsError):
    """A plugin failed to load or registered something invalid."""


class NotFittedError(CapmetricsError, ValueError, AttributeError):
    """A learned component was used before ``fit``."""


class DataError(CapmetricsError, ValueError):
    """Input data has problems; ``problems`` lists every one of them."""

    def __init__(self, problems: Iterable[object], header: str = "invalid input") -> None:
        self.problems: list[Any] = list(problems)  # Problem records (capmetrics.data.model)
        lines = [f"{header}: {len(self.problems)} problem(s)"]
        lines += [f"  {p}" for p in self.problems[:50]]
        if len(self.problems) > 50:
            lines.append(f"  ... and {len(self.problems) - 50} more")
        super().__init__("\n".join(lines))


class OutputError(CapmetricsError, OSError):
    """An output cannot be written (full disk, read-only folder, a directory at the path); the
    message names the path and the operating system's reason."""

    def __str__(self) -> str:  # OSError would add nothing useful
        return str(self.args[0]) if self.args else ""


class MetricError(CapmetricsError, ValueError):
    """A metric cannot produce a value for the given input."""


class InternalError(CapmetricsError):
    """A component failed in a way it does not report itself: a bug, not bad input.

    ``spec`` names the component that was running; the original exception is ``__cause__``.
    """

    def __init__(self, spec: str, error: BaseException) -> None:
        self.spec = spec
        self.error = error
        where = f" in {spec}" if spec else ""
        super().__init__(f"internal error{where}: {type(error).__name__}: {error}")


@contextlib.contextmanager
def component_errors(spec: str) -> Iterator[None]:
    """Let capmetrics' own errors through; turn any other exception raised while ``spec``
    runs into an :class:`InternalError` that names it (the original stays as ``__cause__``)."""
    try:
        yield
    except CapmetricsError:
        raise
    except (
        pickle.UnpicklingError
    ) as err:  # torch.load(weights_only=True) refused a file: bad input, not a bug
        text = str(err).split("WeightsUnpickler error:", 1)[-1]
        reason = next(
            (line.strip() for line in text.splitlines() if line.strip()), type(err).__name__
        )
        raise MetricError(
            f"{spec}: a weights file it read is a pickle that holds more than tensors ({reason}); "
            "capmetrics never runs code from a file: use a state dict or a .safetensors file"
        ) from None
    except Exception as err:
        raise InternalError(spec, err) from err


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """Return ``" Did you mean 'x'?"`` for close matches of ``word``, or ``""``."""
    close = difflib.get_close_matches(word, list(choices), n=3, cutoff=0.6)
    if not close:
        return ""
    return " Did you mean " + " or ".join(repr(c) for c in close) + "?"
