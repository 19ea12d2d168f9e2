"""NNEval model folders: file names, reproducible weight files, checksums, and the models shipped
with capmetrics (``models/<name>/``)."""

from __future__ import annotations

import hashlib
import io
import zipfile
from pathlib import Path

import numpy as np
from capmetrics.errors import MetricError

MODEL_FORMAT = "capmetrics-nneval"
MODEL_JSON = "nneval.json"
WEIGHTS = "weights.npz"

SHIPPED_DIR = Path(__file__).resolve().parent / "models"
#: The models shipped inside the package (trained by experiments/nneval_shipped_models.py).
SHIPPED_MODELS = ("flickr8k-paper", "flickr8k-embeddings", "flickr8k-paper-spice", "flickr8k-embeddings-spice")
#: The model of a plain ``nneval`` metric.
DEFAULT_MODEL = "flickr8k-paper"


def model_folder(path: str | Path) -> Path:
    """The model folder for a folder or its ``nneval.json``."""
    folder = Path(path)
    return folder.parent if folder.name == MODEL_JSON else folder


def resolve_model(model: str | Path) -> tuple[str, Path]:
    """(label, folder) of a shipped model name or a path to a saved model. The label is the
    shipped name, or the folder's own name for a user model (never an absolute path)."""
    if not str(model).strip():
        raise MetricError(f"nneval needs a model: model=NAME ({', '.join(SHIPPED_MODELS)}) or model=PATH")
    if str(model) in SHIPPED_MODELS:
        return str(model), SHIPPED_DIR / str(model)
    folder = model_folder(model)
    if not folder.exists() and not any(sep in str(model) for sep in ("/", "\\")):
        raise MetricError(f"nneval: {str(model)!r} is neither a shipped model ({', '.join(SHIPPED_MODELS)}) "
                          "nor a model folder; give model=NAME or model=PATH written by `capmetrics nneval train`")
    return folder.name, folder


def write_weights(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """An .npz that ``np.load`` reads, with fixed zip timestamps so equal arrays give equal bytes."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for key in sorted(arrays):
            buffer = io.BytesIO()
            np.lib.format.write_array(buffer, np.ascontiguousarray(arrays[key], dtype=np.float64),
                                      allow_pickle=False)
            info = zipfile.ZipInfo(f"{key}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, buffer.getvalue())


def model_digest(path: str | Path) -> str:
    """SHA-256 (first 16 hex digits) of a saved model's two files."""
    folder = model_folder(path)
    h = hashlib.sha256()
    for name in (MODEL_JSON, WEIGHTS):
        file = folder / name
        h.update(file.read_bytes() if file.is_file() else b"")
    return h.hexdigest()[:16]
