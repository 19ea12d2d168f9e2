"""capmetrics.compat.cider against ruotianluo/cider (at self-critical.pytorch's submodule commit)
on real Flickr8k captions: the df pickles its ``scripts/prepro_ngrams.py`` wrote and the values
and self-critical rewards the original code computed (tests/data/cider_compat/, made by
experiments/make_cider_compat_fixtures.py); corpus mode against pycocoevalcap's ``Cider``."""

from __future__ import annotations

import gzip
import json
import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest

from capmetrics.compat.cider import Cider, CiderD, read_df_pickle
from capmetrics.errors import MetricError

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "cider_compat"
NAME = "flickr8k-train300"


@pytest.fixture(scope="module")
def batch() -> dict:
    return json.loads((FIXTURES / "batch.json").read_text())


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory with data/<name>-{idxs,words}.p, as self-critical.pytorch runs in."""
    (tmp_path / "data").mkdir()
    for kind in ("idxs", "words"):
        with gzip.open(FIXTURES / f"{NAME}-{kind}.p.gz") as f, open(tmp_path / "data" / f"{NAME}-{kind}.p", "wb") as g:
            shutil.copyfileobj(f, g)
    monkeypatch.chdir(tmp_path)
    return tmp_path / "data"


def gts_res(batch: dict) -> tuple[dict, list]:
    """gts and res exactly as self-critical's get_self_critical_reward builds them (one list
    object per image, shared by its 5 samples and its greedy caption)."""
    refs = batch["gts_strings"]
    gts = {i: refs[i // 5] if i < 250 else refs[i - 250] for i in range(300)}
    return gts, [{"image_id": i, "caption": [c]} for i, c in enumerate(batch["res_strings"])]


@pytest.mark.parametrize(("cls", "key", "df"), [
    (CiderD, "ciderd", f"{NAME}-idxs"), (Cider, "cider", f"{NAME}-idxs"), (Cider, "cider_corpus", "corpus")])
def test_values_equal_the_original(data_dir: Path, batch: dict, cls: type, key: str, df: str) -> None:
    mean, scores = cls(df=df).compute_score(*gts_res(batch))
    expected = np.array(batch[f"{key}_scores"])
    assert scores.shape == (300,) and np.abs(scores - expected).max() < 1e-12
    assert abs(mean - batch[f"{key}_mean"]) < 1e-12
    assert expected.std() > 0.5  # real spread: a broken df would show


def test_a_direct_path_and_the_words_pickle(data_dir: Path, batch: dict) -> None:
    """The df as a path; the -words pickle scores word strings as the -idxs one scores ids."""
    gts, res = gts_res(batch)
    by_path = CiderD(df=str(data_dir / f"{NAME}-idxs.p")).compute_score(gts, res)[1]
    assert np.abs(by_path - np.array(batch["ciderd_scores"])).max() < 1e-12
    words = {int(k): w for k, w in batch["ix_to_word"].items()} | {0: "<eos>"}
    as_words = lambda s: " ".join(words[int(t)] for t in s.split())  # noqa: E731
    wgts = {k: [as_words(r) for r in v] for k, v in gts.items()}
    wres = [{"image_id": e["image_id"], "caption": [as_words(e["caption"][0])]} for e in res]
    assert np.abs(CiderD(df=f"{NAME}-words").compute_score(wgts, wres)[1] - by_path).max() < 1e-12


def test_read_df_pickle_format(data_dir: Path) -> None:
    df, images = read_df_pickle(data_dir / f"{NAME}-idxs.p")
    with open(data_dir / f"{NAME}-idxs.p", "rb") as f:
        raw = pickle.load(f, encoding="latin1")
    assert images == raw["ref_len"] == 300
    assert len(df) == len(raw["document_frequency"]) and df["9 10 0"] == raw["document_frequency"][("9", "10", "0")]


def test_corpus_mode_equals_pycocoevalcap(batch: dict) -> None:
    """ruotianluo/cider's own corpus mode fails at its HEAD (copy_empty); pycocoevalcap's Cider is
    the same CIDEr-D with the df of the call's references."""
    from pycocoevalcap.cider.cider import Cider as CocoCider

    gts, res = gts_res(batch)
    mean, scores = CiderD(df="corpus").compute_score(gts, res)
    ref_mean, ref_scores = CocoCider().compute_score(gts, {e["image_id"]: e["caption"] for e in res})
    assert np.abs(scores - ref_scores).max() < 1e-12 and abs(mean - ref_mean) < 1e-12


def test_bad_input(data_dir: Path, batch: dict, tmp_path: Path) -> None:
    gts, res = gts_res(batch)
    json_df = tmp_path / "capmetrics-df.json"
    json_df.write_text(json.dumps({"format": "capmetrics-cider-df", "df": {}}))
    with pytest.raises(MetricError, match="cannot read the df pickle .*prepro_ngrams"):
        CiderD(df=str(json_df))
    other = tmp_path / "other.p"
    other.write_bytes(pickle.dumps({"df": {}, "n": 3}, protocol=2))
    with pytest.raises(MetricError, match=r"not a prepro_ngrams df pickle \(got \['df', 'n'\]\)"):
        CiderD(df=str(other))
    with pytest.raises(MetricError, match="no data/missing.p"):
        CiderD(df="missing")
    with pytest.raises(MetricError, match="sigma=4.0.*ignores sigma"):
        CiderD(sigma=4.0)
    scorer = CiderD(df=f"{NAME}-idxs")
    with pytest.raises(MetricError, match=r"res\[1\] has image_id 999, which gts lacks"):
        scorer.compute_score(gts, [res[0], {"image_id": 999, "caption": ["1 2 0"]}])
    with pytest.raises(MetricError, match=r"res\[0\]\['caption'\] must be a list of one string"):
        scorer.compute_score(gts, [{"image_id": 0, "caption": "1 2 0"}])
