"""A model folder is walked on every check: what is put in a subfolder after a first check that
passed (the folder's own modification time unchanged) is still seen."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from capmetrics.errors import MetricError
from capmetrics.io.model_folder import check_model_path


def test_a_fifo_made_in_a_subfolder_after_a_check_is_refused_next_time(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    (folder / "1_Pooling").mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"\0" * 64)
    assert check_model_path(folder) == str(folder)
    before = os.stat(folder).st_mtime_ns
    os.mkfifo(folder / "1_Pooling" / "config.json")
    assert os.stat(folder).st_mtime_ns == before  # the top level did not change
    with pytest.raises(MetricError) as err:
        check_model_path(folder)
    assert str(err.value) == (
        f"model={str(folder)!r}: '1_Pooling/config.json' is a FIFO (named pipe), not a regular "
        "file; a model folder holds regular files only (a pipe would hang the run, a device "
        "would never end)"
    )
