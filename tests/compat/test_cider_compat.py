"""capmetrics.integrations.cider against ruotianluo/cider (at self-critical.pytorch's submodule
commit) on real Flickr8k captions: the df pickles its ``scripts/prepro_ngrams.py`` wrote and the
values and self-critical rewards the original code computed (tests/data/cider_compat/, made by
experiments/make_cider_compat_fixtures.py); corpus mode against pycocoevalcap's ``Cider``."""

from __future__ import annotations

import gzip
import json
import os
import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest
from capmetrics.errors import MetricError
from capmetrics.integrations.cider import Cider, CiderD, read_df_pickle
from capmetrics.integrations.dffiles import DfPickleRefused, convert_df

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
        with (
            gzip.open(FIXTURES / f"{NAME}-{kind}.p.gz") as f,
            open(tmp_path / "data" / f"{NAME}-{kind}.p", "wb") as g,
        ):
            shutil.copyfileobj(f, g)
    monkeypatch.chdir(tmp_path)
    return tmp_path / "data"


def gts_res(batch: dict) -> tuple[dict, list]:
    """gts and res exactly as self-critical's get_self_critical_reward builds them (one list
    object per image, shared by its 5 samples and its greedy caption)."""
    refs = batch["gts_strings"]
    gts = {i: refs[i // 5] if i < 250 else refs[i - 250] for i in range(300)}
    return gts, [{"image_id": i, "caption": [c]} for i, c in enumerate(batch["res_strings"])]


@pytest.mark.parametrize(
    ("cls", "key", "df"),
    [
        (CiderD, "ciderd", f"{NAME}-idxs"),
        (Cider, "cider", f"{NAME}-idxs"),
        (Cider, "cider_corpus", "corpus"),
    ],
)
def test_values_equal_the_original(
    data_dir: Path, batch: dict, cls: type, key: str, df: str
) -> None:
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


@pytest.mark.parametrize("protocol", [0, 1, 5])
def test_other_pickle_protocols(data_dir: Path, protocol: int) -> None:
    """The same table pickled with Python 2's protocols 0 and 1 (and the newest) reads the same."""
    with open(data_dir / f"{NAME}-idxs.p", "rb") as f:
        raw = pickle.load(f, encoding="latin1")
    (data_dir / "other.p").write_bytes(pickle.dumps(raw, protocol=protocol))
    assert read_df_pickle(data_dir / "other.p") == read_df_pickle(data_dir / f"{NAME}-idxs.p")
    assert CiderD(df="other").metric.fixed_df()[1] == 300


def test_read_df_pickle_format(data_dir: Path) -> None:
    df, images = read_df_pickle(data_dir / f"{NAME}-idxs.p")
    with open(data_dir / f"{NAME}-idxs.p", "rb") as f:
        raw = pickle.load(f, encoding="latin1")
    assert images == raw["ref_len"] == 300
    assert (
        len(df) == len(raw["document_frequency"])
        and df["9 10 0"] == raw["document_frequency"][("9", "10", "0")]
    )


def test_corpus_mode_equals_pycocoevalcap(batch: dict) -> None:
    """ruotianluo/cider's own corpus mode fails at its HEAD (copy_empty); pycocoevalcap's Cider is
    the same CIDEr-D with the df of the call's references."""
    from pycocoevalcap.cider.cider import Cider as CocoCider

    gts, res = gts_res(batch)
    mean, scores = CiderD(df="corpus").compute_score(gts, res)
    ref_mean, ref_scores = CocoCider().compute_score(
        gts, {e["image_id"]: e["caption"] for e in res}
    )
    assert np.abs(scores - ref_scores).max() < 1e-12 and abs(mean - ref_mean) < 1e-12


def test_bad_input(data_dir: Path, batch: dict, tmp_path: Path) -> None:
    gts, res = gts_res(batch)
    json_df = tmp_path / "capmetrics-df.json"
    json_df.write_text(json.dumps({"format": "capmetrics-cider-df", "df": {}}))
    with pytest.raises(MetricError, match="is not a capmetrics CIDEr df file"):
        CiderD(df=str(json_df))
    text = tmp_path / "df.txt"
    text.write_text("a dog 3\n")
    with pytest.raises(
        MetricError, match="neither a prepro_ngrams pickle nor a capmetrics df file"
    ):
        CiderD(df=str(text))
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


def test_a_capmetrics_df_file_scores_as_the_pickle(
    data_dir: Path, batch: dict, tmp_path: Path
) -> None:
    """convert_df writes the pickle as capmetrics' JSON df, which the shim reads to the same
    values."""
    target = convert_df(f"{NAME}-idxs", tmp_path / "train300.json.gz")
    assert (
        read_df_pickle(data_dir / f"{NAME}-idxs.p")[0] == json.loads(gzip.open(target).read())["df"]
    )
    for cls, key in ((CiderD, "ciderd"), (Cider, "cider")):
        scores = cls(df=str(target)).compute_score(*gts_res(batch))[1]
        assert np.abs(scores - np.array(batch[f"{key}_scores"])).max() < 1e-12


@pytest.mark.parametrize("cls", [CiderD, Cider])
def test_a_hostile_df_pickle_runs_nothing(data_dir: Path, tmp_path: Path, cls: type) -> None:
    """The attacker's df: a prepro_ngrams-shaped pickle whose table is built by a __reduce__
    payload that would create a file. Refused by name, before anything is called."""
    victim = tmp_path / "pwned"

    class Payload:
        def __reduce__(self):  # type: ignore[no-untyped-def]
            return (os.system, (f"touch {victim}",))

    (data_dir / "evil.p").write_bytes(
        pickle.dumps({"document_frequency": Payload(), "ref_len": 3}, protocol=2)
    )
    with pytest.raises(
        DfPickleRefused,
        match=r"df pickle data/evil.p asks for (posix|nt)\.system, .*nothing in it was run",
    ):
        cls(df="evil")
    assert not victim.exists()
    # the same with builtins (eval), a class instance (BUILD), and protocol 5
    for payload in (
        pickle.dumps(Payload(), protocol=5),
        pickle.dumps(_Shaped(), protocol=2),
        b"\x80\x02cbuiltins\neval\nX\x0c\x00\x00\x00print('hi')\x85R.",
    ):
        path = tmp_path / "x.p"
        path.write_bytes(payload)
        with pytest.raises(DfPickleRefused, match=f"df pickle {path} asks for"):
            read_df_pickle(path)
    assert not victim.exists()


class _Shaped:
    """An object of a test module: a real df never names one."""


def test_the_real_pickles_use_only_the_allowed_globals(data_dir: Path) -> None:
    """prepro_ngrams' table is a defaultdict(float) (its only globals); it reads as a dict."""
    import pickletools

    raw = (data_dir / f"{NAME}-words.p").read_bytes()
    globs = {arg for op, arg, _ in pickletools.genops(raw) if op.name == "GLOBAL"}
    assert globs == {"collections defaultdict", "__builtin__ float"}
    df, images = read_df_pickle(data_dir / f"{NAME}-words.p")
    assert images == 300 and len(df) > 10_000 and all(type(v) is int for v in df.values())


@pytest.fixture(scope="module")
def self_cider() -> dict:
    return json.loads((FIXTURES / "self_cider.json").read_text())


@pytest.mark.parametrize(("cls", "key"), [(Cider, "cider"), (CiderD, "ciderd")])
def test_my_self_cider_equals_the_original(
    data_dir: Path, self_cider: dict, cls: type, key: str
) -> None:
    """self-critical's self_cider_reward_weight > 0:
    Cider_scorer.my_self_cider([one image's samples]), and all images at once, against
    ruotianluo/cider's (experiments/make_self_cider_fixtures.py)."""
    scorer = cls(df=self_cider["df"])
    expected = [np.array(m) for m in self_cider[key]]
    got = scorer.my_self_cider(self_cider["res"])
    assert len(got) == 50 and all(g.shape == (5, 5) for g in got)
    assert max(np.abs(g - e).max() for g, e in zip(got, expected)) < 1e-12
    one = scorer.my_self_cider([self_cider["res"][3]])
    assert len(one) == 1 and np.abs(one[0] - expected[3]).max() < 1e-12
    off = np.concatenate([e[~np.eye(5, dtype=bool)] for e in expected])
    assert (
        off.std() > 0.4 and off.max() > 4 and (off > 0).mean() > 0.8
    )  # real spread between samples
    with pytest.raises(MetricError, match="df='corpus' has no document frequencies for pairs"):
        cls(df="corpus").my_self_cider(self_cider["res"][:1])
    with pytest.raises(MetricError, match=r"res\[0\] must be a list of caption strings"):
        scorer.my_self_cider(["a b c"])
