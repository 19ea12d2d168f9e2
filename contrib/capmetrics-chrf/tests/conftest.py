"""Let the tests run from a source checkout that is not installed (``pip install -e .`` is the
usual way); the installed package wins when there is one."""

import importlib.util
import sys
from pathlib import Path

if importlib.util.find_spec("capmetrics_chrf") is None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
