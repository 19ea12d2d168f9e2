"""NNEval model folders: file names, reproducible weight files, checksums, and the models shipped
with capmetrics (``models/<name>/``)."""

from __future__ import annotations

import io
import os
import re
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from capmetrics.errors import MetricError
from capmetrics.io.digests import files_digest
from capmetrics.plugins.nneval.features import FEATURE_KINDS

MODEL_FORMAT = "capmetrics-nneval"
#: Version 2: ``cider`` (and pycocoevalcap's ``CIDEr``) name CIDEr-D; in version 1 files they named
#: the original CIDEr, now ``cider-original``.
MODEL_VERSION = 2
#: Components renamed since a model file version: {version: {old name: new name}}.
_RENAMED_SINCE = {1: {"cider": "cider-original"}}
MODEL_JSON = "nneval.json"
WEIGHTS = "weights.npz"

SHIPPED_DIR = Path(__file__).resolve().parent / "models"
#: The models shipped inside the package (trained by experiments/nneval_shipped_models.py).
SHIPPED_MODELS = (
    "flickr8k-paper",
    "flickr8k-embeddings",
    "flickr8k-paper-spice",
    "flickr8k-embeddings-spice",
)
#: The model of a plain ``nneval`` metric.
DEFAULT_MODEL = "flickr8k-paper"
#: A path parameter so named is a folder the component creates (``cache_dir``), not a file it
#: reads: a model file's value is made a folder inside the model's folder, and a saved model
#: leaves its trainer's out.
_CREATED_FOLDER = re.compile(r"(^|_)dir$")


def model_folder(path: str | Path) -> Path:
    """The model folder for a folder or its ``nneval.json``."""
    folder = Path(path)
    return folder.parent if folder.name == MODEL_JSON else folder


def resolve_model(model: str | Path) -> tuple[str, Path]:
    """(label, folder) of a shipped model name or a path to a saved model. The label is the
    shipped name, or the folder's own name for a user model (never an absolute path)."""
    if not str(model).strip():
        raise MetricError(
            f"nneval needs a model: model=NAME ({', '.join(SHIPPED_MODELS)}) or model=PATH"
        )
    if str(model) in SHIPPED_MODELS:
        return str(model), SHIPPED_DIR / str(model)
    folder = model_folder(model)
    if not folder.exists() and not any(sep in str(model) for sep in ("/", "\\")):
        raise MetricError(
            f"nneval: {str(model)!r} is neither a shipped model ({', '.join(SHIPPED_MODELS)}) "
            "nor a model folder; give model=NAME or model=PATH written by `capmetrics nneval train`"
        )
    return folder.name, folder


#: Largest ``nneval.json`` read (the shipped ones are under 100 KB).
MAX_MODEL_JSON_BYTES = 64 << 20


def read_model_json(path: Path) -> dict[str, Any]:
    """A model file's JSON object, or one MetricError naming the file: too large, not UTF-8
    JSON, nested too deeply for the parser, or not an object."""
    from capmetrics.errors import DataError
    from capmetrics.io.strict_json import check_regular_file, parse_json

    size = check_regular_file(path, "an NNEval model file")  # a FIFO would hang the read
    if size > MAX_MODEL_JSON_BYTES:
        raise MetricError(
            f"{path} is {size:,} bytes; an NNEval model file is at most {MAX_MODEL_JSON_BYTES:,}"
        )
    try:
        with path.open("rb") as handle:  # at most the limit, should the file grow meanwhile
            meta = parse_json(handle.read(MAX_MODEL_JSON_BYTES + 1).decode("utf-8"), str(path))
    except DataError as err:  # nesting past the parser's limit, 5000-digit numbers, not JSON
        reason = err.problems[0].message if err.problems else str(err)
        what = "JSON nested too deeply" if "nested too deeply" in reason else f"not JSON: {reason}"
        raise MetricError(f"{path} is not an NNEval model file ({what})") from None
    except (OSError, UnicodeDecodeError) as err:
        raise MetricError(f"{path} is not an NNEval model file (not JSON: {err})") from None
    if not isinstance(meta, dict):
        raise MetricError(f"{path} is not an NNEval model file (expected a JSON object)")
    return meta


def write_weights(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """An .npz that ``np.load`` reads, with fixed zip timestamps so equal arrays give equal
    bytes."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for key in sorted(arrays):
            buffer = io.BytesIO()
            np.lib.format.write_array(
                buffer, np.ascontiguousarray(arrays[key], dtype=np.float64), allow_pickle=False
            )
            info = zipfile.ZipInfo(f"{key}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, buffer.getvalue())


def model_digest(path: str | Path) -> str:
    """SHA-256 (first 16 hex digits) of a saved model's two files."""
    folder = model_folder(path)
    return files_digest([f for f in (folder / MODEL_JSON, folder / WEIGHTS) if f.is_file()])[:16]


#: ``params`` a model file may set (the learner's settings); never ``cache_dir`` (where the
#: user's runs write) or ``features`` (they are the file's own ``features``).
MODEL_PARAMS = frozenset(
    {
        "hidden",
        "scaling",
        "init",
        "l2",
        "lr",
        "batch_size",
        "max_epochs",
        "patience",
        "lr_decay",
        "decay_every",
        "validation_rating",
        "kendall",
        "nonfinite",
        "interaction",
        "ensemble",
        "seed",
    }
)


def confine_model_specs(meta: dict[str, Any], folder: Path) -> None:
    """Refuse a model file that could run a program or reach outside its own folder.

    Its feature and interaction specs are composed untrusted
    (:class:`capmetrics.registry.compose.Untrusted`): no parameter that names a program or
    code to run (``java``, ``corenlp``, ``trust_code``: the components' ``program_params``),
    files (``path_params``) only inside the folder (no absolute path, no ``..`` step, no link
    that leads out, no existing file elsewhere), and no other absolute or ``..`` path. To use a
    program or a file elsewhere, pass it yourself, in a spec you write. The files it declares
    (``feature_files``, see :func:`detach_feature_files`) are paths inside its folder, whatever
    lies in the current folder under the same name. ``params`` may hold only the learner's
    settings (:data:`MODEL_PARAMS`)."""
    from capmetrics.errors import SpecError, UnknownComponentError
    from capmetrics.registry.compose import Untrusted, UntrustedSpecError, compose, within

    source = f"NNEval model {folder}"
    declared = meta.get("feature_files") or {}
    if not isinstance(declared, dict):
        raise MetricError(f"{source}: feature_files must be an object (file name -> SHA-256)")
    for name in declared:
        if not isinstance(name, str) or not within(folder, name):
            raise MetricError(
                f"{source}: feature_files names {name!r}, which is not inside the model's folder; "
                "a model file may name only files inside its own folder"
            )
    params = meta.get("params")
    if params is not None and not isinstance(params, dict):
        raise MetricError(f"{source}: params must be an object, got {type(params).__name__}")
    refused = sorted(set(params or {}) - MODEL_PARAMS)
    if refused:
        raise MetricError(
            f"{source}: params may not set {', '.join(map(repr, refused))}; a model file sets only "
            f"the learner's settings ({', '.join(sorted(MODEL_PARAMS))})"
        )
    features = meta.get("features")
    if not isinstance(features, list):
        raise MetricError(f"{source}: features must be a list of spec strings")
    specs: list[tuple[Any, str | tuple[str, ...]]] = [(spec, FEATURE_KINDS) for spec in features]
    if params and params.get("interaction") is not None:
        specs.append((params["interaction"], "embedder"))
    untrusted = Untrusted(Path(folder), source, frozenset(declared))
    for spec, kind in specs:
        if not isinstance(spec, str):
            raise MetricError(
                f"{source}: a feature must be a spec string, got {type(spec).__name__}"
            )
        try:
            compose(spec, kind, untrusted=untrusted)
        except UntrustedSpecError as err:
            raise MetricError(str(err)) from None
        except UnknownComponentError:
            continue  # named with the plugin to install by check_features
        except SpecError as err:
            raise MetricError(f"{source}: feature {spec!r}: {str(err).splitlines()[0]}") from None


def without_programs(spec: str, kind: str | tuple[str, ...] = FEATURE_KINDS) -> str:
    """``spec`` with every program parameter (a component's ``program_params``: ``java``,
    ``corenlp``, ``trust_code``) and every folder it creates (a ``cache_dir`` path parameter)
    back at its default, for writing into a model file: a loaded model may not name programs
    (:func:`confine_model_specs`), so the loading user's own ones are used, and a cache's place
    changes no value. A spec that sets none is returned unchanged."""
    from capmetrics.components.base import Component
    from capmetrics.registry.compose import compose

    built = compose(spec, kind)
    changed = False
    stack: list[Any] = [built]
    while stack:
        component = stack.pop()
        params = type(component).constructor_parameters()
        created = [k for k in type(component).path_params if _CREATED_FOLDER.search(k)]
        for key in (*type(component).program_params, *created):
            default = params[key].default if key in params else None
            if key in params and getattr(component, key, default) != default:
                setattr(component, key, default)
                changed = True
        for key in params:
            value = getattr(component, key, None)
            stack.extend(
                v
                for v in (value if isinstance(value, (list, tuple)) else [value])
                if isinstance(v, Component)
            )
    return built.spec if changed else spec


def _path_keys() -> set[str]:
    """The path parameters (``path_params``) of every registered component a feature may use."""
    return set(_path_defaults())


def _path_defaults() -> dict[str, set[str]]:
    """Each path parameter of a registered component, with the string defaults it has in any
    of them (a keyword such as cider-d's ``df="corpus"``, never a file's name)."""
    from capmetrics.registry import get_registry

    registry = get_registry()
    defaults: dict[str, set[str]] = {}
    for kind in ("distance", "embedder", "tokenizer", "aggregator", "statistic"):
        for entry in registry.components(kind):
            params = entry.cls.constructor_parameters()
            for p in entry.cls.path_params:
                default = params[p].default if p in params else None
                defaults.setdefault(p, set()).update([default] if isinstance(default, str) else [])
    return defaults


def _path_arguments(spec: str) -> Iterator[tuple[str, str]]:
    """(key, value) of every argument of ``spec`` (nested specs too) whose key is a path
    parameter of some registered component."""
    from capmetrics.registry.spec import Spec, parse

    keys = _path_keys()
    stack: list[Any] = [parse(spec)]
    while stack:
        value = stack.pop()
        if isinstance(value, list):
            stack.extend(value)
        elif isinstance(value, Spec):
            for key, arg in value.args:
                if (
                    key in keys
                    and isinstance(arg, (str, Spec))
                    and (isinstance(arg, str) or arg.is_bare)
                ):
                    yield key, arg if isinstance(arg, str) else arg.name
                else:
                    stack.append(arg)


def file_digest(path: str | Path) -> str:
    """SHA-256 of a file's bytes, or of a folder's files (relative names and bytes, in order)."""
    root = Path(path)
    if root.is_file():
        return files_digest([root])
    return files_digest(sorted(p for p in root.rglob("*") if p.is_file()), root, b"\0")


def _replace_argument(spec: str, old: str, new: str) -> str:
    """``spec`` (canonical) with the path argument ``old`` written as ``new``."""
    from capmetrics.registry.spec import format_value

    return re.sub(
        f"={re.escape(format_value(old))}(?=\\s*[,)\\]])", lambda _: f"={format_value(new)}", spec
    )


def detach_feature_files(specs: list[str], folder: Path) -> tuple[list[str], dict[str, str]]:
    """The feature specs to write into a model saved in ``folder``, and the files they need
    (name -> SHA-256). A path argument naming an existing file (or folder) is written as its
    path inside ``folder`` when it is there, else as its base name: a model file names only
    files inside its own folder (:func:`confine_model_specs`); one elsewhere (a CLIP checkpoint)
    is put in the folder or passed when loading (:func:`attach_feature_files`)."""
    from capmetrics.plugins.nneval.features import build_feature

    out, needed = [], {}
    root = os.path.realpath(folder)
    for spec in specs:
        files = [
            value for _, value in _path_arguments(spec) if os.path.exists(os.path.expanduser(value))
        ]
        canonical = None
        if not files:  # a positional path (clip-model("x.pt")) has its name in the canonical spec
            canonical = build_feature(spec).spec
            files = [
                value
                for _, value in _path_arguments(canonical)
                if os.path.exists(os.path.expanduser(value))
            ]
        if not files:
            out.append(spec)
            continue
        canonical = canonical or build_feature(spec).spec
        for value in files:
            real = os.path.realpath(os.path.expanduser(value))
            inside = os.path.commonpath([root, real]) == root and real != root
            name = Path(os.path.relpath(real, root)).as_posix() if inside else Path(real).name
            digest = file_digest(real)
            if needed.setdefault(name, digest) != digest:
                raise MetricError(
                    f"NNEval: two different feature files are named {name!r}; a saved model names "
                    "its files by name: rename one"
                )
            canonical = _replace_argument(canonical, value, name)
        out.append(canonical)
    return out, needed


def attach_feature_files(
    meta: dict[str, Any], folder: Path, files: list[str] | None = None
) -> list[str]:
    """A loaded model's feature specs with the files they need (``meta["feature_files"]``) as
    paths: each one in the model's folder, or one of ``files`` (paths the user passes) with the
    same base name; each checked against the checksum the model was saved with."""
    source = f"NNEval model {folder}"
    needed: dict[str, str] = meta.get("feature_files") or {}
    given: dict[str, str] = {}
    for file in files or []:
        path = Path(file).expanduser()
        if not path.exists():
            raise MetricError(f"{source}: the file {file!r} passed with files= does not exist")
        if path.name not in needed:
            raise MetricError(
                f"{source}: its features need no file named {path.name!r} (files=); "
                f"they need: {', '.join(needed) or 'none'}"
            )
        given[path.name] = str(path)
    specs = [_inside(spec, folder, needed) for spec in meta["features"]]
    for name, digest in needed.items():
        path = given.get(name) or (str(folder / name) if (folder / name).exists() else None)
        if path is None:
            raise MetricError(
                f"{source}: a feature needs the file {name!r}; put it in the model's folder or "
                f'pass it: nneval(model=..., files=["/path/to/{name}"])'
            )
        if file_digest(path) != digest:
            raise MetricError(
                f"{source}: {path!r} is not the file {name!r} the model was trained with "
                "(its SHA-256 differs)"
            )
        specs = [
            _replace_argument(spec, name, path)
            if any(v == name for _, v in _path_arguments(spec))
            else spec
            for spec in specs
        ]
    return specs


def _inside(spec: str, folder: Path, declared: dict[str, str]) -> str:
    """``spec`` (confined: :func:`confine_model_specs`) with each relative path argument that is
    not a declared file made a path inside ``folder``, where it names something there or a
    folder the component creates (``cache_dir``): read or created from the current folder, it
    would be another file, or a folder made outside the model's. Unchanged if none is."""
    from capmetrics.registry.compose import within
    from capmetrics.registry.spec import Spec, parse

    keywords = _path_defaults()  # a parameter's keyword value stays a keyword

    def moved(key: str | None, value: Any) -> Any:
        if isinstance(value, list):
            return [moved(key, v) for v in value]
        if isinstance(value, Spec) and not value.is_bare:
            return Spec(value.name, tuple((k, moved(k, v)) for k, v in value.args), value.called)
        text = value.name if isinstance(value, Spec) else value
        if (
            key in keywords
            and isinstance(text, str)
            and text not in keywords[key]
            and text not in declared
            and within(folder, text)
            and (_CREATED_FOLDER.search(key) or os.path.lexists(folder / text))
        ):
            return str(folder / text)
        return value

    tree = parse(spec)
    out = moved(None, tree)
    return spec if out == tree else str(out)


def upgrade_model_specs(meta: dict[str, Any], source: str) -> None:
    """Bring the feature specs of an older model file to today's names, in place, so that a
    feature keeps the metric it was trained with (a version 1 ``cider`` is ``cider-original``);
    a file from a newer capmetrics is refused."""
    version = meta.get("version", 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise MetricError(f"{source}: version must be a positive integer, got {version!r}")
    if version > MODEL_VERSION:
        raise MetricError(
            f"{source}: model file version {version} was written by a newer capmetrics "
            f"(this one reads up to {MODEL_VERSION}); upgrade capmetrics"
        )
    renames = {
        old: new
        for v, names in _RENAMED_SINCE.items()
        if v >= version
        for old, new in names.items()
    }
    if not renames:
        return
    from capmetrics.registry.spec import parse

    meta["features"] = [
        str(_renamed(parse(s), renames)) if isinstance(s, str) else s
        for s in meta.get("features") or []
    ]


def _renamed(value: Any, renames: dict[str, str]) -> Any:
    """``value`` (a parsed spec, a list or a scalar) with renamed component names replaced."""
    from capmetrics.registry.spec import Spec

    if isinstance(value, list):
        return [_renamed(v, renames) for v in value]
    if not isinstance(value, Spec):
        return value
    args = tuple((k, _renamed(v, renames)) for k, v in value.args)
    return Spec(renames.get(value.key, value.name), args, value.called)
