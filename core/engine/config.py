"""TOML configuration: named component definitions and defaults for ``capmetrics score``.

::

    [score]
    metrics = ["bleu-4", "cider-d", "best-bleu"]
    format = "table"
    lang = "zh"            # optional: the text's language (--lang), see docs/usage/languages.md

    [components.best-bleu]
    component = "over-candidates"
    distance = "bleu-4"
    reduce = "max"
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from capmetrics.components.spec import NAME_RE, Spec
from capmetrics.data.model import Problem
from capmetrics.errors import DataError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


@dataclass
class Config:
    """A parsed config file."""

    definitions: dict[str, Spec] = field(default_factory=dict)
    metrics: list[str] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)
    source: str = "<config>"


def parse_config(data: dict[str, Any], source: str = "<config>") -> Config:
    """Build a :class:`Config` from parsed TOML, reporting every problem at once."""
    problems: list[Problem] = []
    cfg = Config(source=source)
    for key in data:
        if key not in ("score", "components"):
            problems.append(
                Problem(
                    source, None, f"unknown table [{key}]; expected [score] and [components.NAME]"
                )
            )
    components = data.get("components", {})
    if not isinstance(components, dict):
        problems.append(Problem(source, None, "[components] must be a table of tables"))
        components = {}
    for name, table in components.items():
        where = f"[components.{name}]"
        if not NAME_RE.fullmatch(name):
            problems.append(
                Problem(source, None, f"{where}: {name!r} is not a valid component name")
            )
            continue
        if not isinstance(table, dict) or not isinstance(table.get("component"), str):
            problems.append(
                Problem(source, None, f'{where}: needs a key component = "<registered name>"')
            )
            continue
        args = tuple((k.replace("-", "_"), v) for k, v in table.items() if k != "component")
        cfg.definitions[name] = Spec(table["component"], args, called=True)
    score = data.get("score", {})
    if not isinstance(score, dict):
        problems.append(Problem(source, None, "[score] must be a table"))
        score = {}
    metrics = score.get("metrics", [])
    if not isinstance(metrics, list) or not all(isinstance(m, str) for m in metrics):
        problems.append(Problem(source, None, "[score] metrics must be a list of spec strings"))
    else:
        cfg.metrics = list(metrics)
    cfg.options = {k: v for k, v in score.items() if k != "metrics"}
    for key in ("lang", "normalize"):
        if key in cfg.options and not isinstance(cfg.options[key], str):
            problems.append(
                Problem(
                    source,
                    None,
                    f"[score] {key} must be a string such as {'zh' if key == 'lang' else 'nfkc'!r}",
                )
            )
    if problems:
        raise DataError(problems, header=f"invalid config {source}")
    return cfg


#: A config file larger than this is refused (configs are a few kilobytes).
MAX_CONFIG_BYTES = 1 << 20


def load_config(path: str | Path) -> Config:
    """Read and parse a TOML config file: a regular file of at most 1 MiB, its tables and
    arrays nested at most 64 deep (:mod:`capmetrics.io.strict_json`'s bounds); each problem a
    :class:`DataError`."""
    from capmetrics.io.strict_json import MAX_DEPTH, depth_over, read_bytes

    path = Path(path)
    header = "invalid config"
    data = read_bytes(path, "a config file", MAX_CONFIG_BYTES, header)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise DataError([Problem(str(path), None, f"cannot read: {err}")], header=header) from err
    try:
        parsed = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise DataError(
            [Problem(str(path), None, f"not valid TOML: {err}")], header=header
        ) from err
    except RecursionError as err:
        raise DataError(
            [Problem(str(path), None, f"TOML nested too deeply (more than {MAX_DEPTH} levels)")],
            header=header,
        ) from err
    if depth_over(parsed, MAX_DEPTH):
        raise DataError(
            [Problem(str(path), None, f"TOML nested more than {MAX_DEPTH} levels deep")],
            header=header,
        )
    return parse_config(parsed, str(path))
