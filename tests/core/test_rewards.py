"""capmetrics.integrations.rewards against pycocoevalcap's CiderScorer with the same fixed document
frequencies (Flickr8k: df from training images, rewards for test images), token ids with a
vocabulary, torch in/torch out, the self-critical advantage, BLEU rewards and bad input."""

from __future__ import annotations

from collections import defaultdict
from functools import cache
from pathlib import Path

import capmetrics
import numpy as np
import pytest
from capmetrics.errors import MetricError
from capmetrics.integrations.rewards import BleuReward, CiderDReward, decode, self_critical

from tests.plugins.coco_reference import FLICKR8K, coco, needs_flickr8k

pytestmark = needs_flickr8k


@cache
def _flickr8k() -> tuple[list[list[str]], list[str], list[list[str]]]:
    """Tokenised training references (1,500 images), 250 sampled captions (5 per test image,
    drawn from other images' captions) and the 50 test images' references."""
    from capmetrics.data.flickr8k import load_captions

    _, by_image = load_captions(FLICKR8K)
    names = lambda f: [n.split(".")[0] for n in (FLICKR8K / f).read_text().split()]  # noqa: E731
    ptb = capmetrics.compose("ptb")
    train = [ptb.tokenize_joined(by_image[n]) for n in names("Flickr_8k.trainImages.txt")[:1500]]
    test = [ptb.tokenize_joined(by_image[n]) for n in names("Flickr_8k.testImages.txt")[:50]]
    pool = [c for refs in train for c in refs] + [test[3][0], test[7][1]]
    rng = np.random.default_rng(0)
    samples = [pool[k] for k in rng.integers(0, len(pool), 250)]
    samples[15], samples[36] = test[3][0], test[7][1]  # two samples that hit a reference
    return train, samples, test


def _coco_cider_fixed_df(
    train: list[list[str]], samples: list[str], refs: list[list[str]]
) -> np.ndarray:
    """pycocoevalcap's CiderScorer with the document frequencies and image count of ``train``."""
    from pycocoevalcap.cider.cider_scorer import CiderScorer, cook_refs

    class _Corpus(list):  # compute_cider takes ln N from len(crefs): N is the training corpus
        def __len__(self) -> int:
            return len(train)

    df: defaultdict = defaultdict(float)  # as CiderScorer.document_frequency is
    for image in train:
        for gram in {g for ref in cook_refs(image) for g in ref}:
            df[gram] += 1
    scorer = CiderScorer(n=4, sigma=6.0)
    for s, r in zip(samples, refs):
        scorer += (s, r)
    scorer.crefs = _Corpus(scorer.crefs)
    scorer.document_frequency = df
    return np.asarray(scorer.compute_cider())


@pytest.fixture(scope="module")
def df_file(tmp_path_factory) -> Path:  # type: ignore[no-untyped-def]
    path = tmp_path_factory.mktemp("df") / "flickr8k-train-df.json.gz"
    CiderDReward.fit(_flickr8k()[0], path)
    return path


def test_cider_d_rewards_equal_pycocoevalcap_with_the_same_fixed_df(df_file: Path) -> None:
    pytest.importorskip("pycocoevalcap")
    train, samples, test = _flickr8k()
    reward = CiderDReward(df_file)
    got = reward(samples, test)  # 5 consecutive samples per image
    want = _coco_cider_fixed_df(train, samples, [test[i // 5] for i in range(250)])
    assert got.shape == (250,) and got.dtype == np.float64
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    assert got[15] > 1.0 and got[36] > 1.0 and want.std() > 0.1
    fitted = CiderDReward.fit(train)  # in memory, not saved: the same values
    np.testing.assert_array_equal(fitted(samples, test), got)


def _vocab_and_ids(texts: list[str]) -> tuple[list[str], np.ndarray]:
    vocab = ["<end>"] + sorted({w for t in texts for w in t.split()})
    index = {w: i for i, w in enumerate(vocab)}
    width = max(len(t.split()) for t in texts) + 3
    ids = np.zeros((len(texts), width), dtype=np.int64)
    for n, t in enumerate(texts):
        ids[n, : len(t.split())] = [index[w] for w in t.split()]
        ids[n, len(t.split()) + 1 :] = 1  # junk after the end token is ignored
    return vocab, ids


def test_token_ids_with_a_vocabulary_and_torch(df_file: Path) -> None:
    _, samples, test = _flickr8k()
    vocab, ids = _vocab_and_ids(samples + [r for refs in test for r in refs])
    assert decode(ids[:3], vocab) == samples[:3]
    strings = CiderDReward(df_file)(samples, test)
    by_ids = CiderDReward(df_file, vocab=vocab)(ids[:250], test)
    np.testing.assert_array_equal(by_ids, strings)
    as_dict = CiderDReward(df_file, vocab=dict(enumerate(vocab)))(list(map(list, ids[:250])), test)
    np.testing.assert_array_equal(as_dict, strings)
    torch = pytest.importorskip("torch")
    tensor = CiderDReward(df_file, vocab=vocab)(torch.as_tensor(ids[:250]), test)
    assert (
        isinstance(tensor, torch.Tensor) and tensor.dtype == torch.float64
    )  # the values as they are
    np.testing.assert_array_equal(tensor.numpy(), strings)
    bleu = BleuReward(4, vocab=vocab)(torch.as_tensor(ids[:250]), test)
    assert bleu.dtype == torch.float64
    np.testing.assert_array_equal(bleu.numpy(), BleuReward(4)(samples, test))


def test_token_ids_are_scored_without_text_as_their_text_is(df_file: Path) -> None:
    """The id path (no text made for the candidates) against the decoded text: reference words
    the vocabulary lacks, empty and repeated candidates, BLEU; and vocabularies whose words are
    not single tokens (a gap in an id -> word dict, a two-word entry) or a lower-casing
    tokenizer, which take the text path."""
    _, samples, test = _flickr8k()
    vocab, ids = _vocab_and_ids(samples[:40])  # the references have words it lacks
    ids[3] = 0  # an empty candidate
    ids[7] = ids[6]
    texts = decode(ids, vocab)
    assert texts[3] == "" and any(
        w not in vocab for refs in test[:8] for r in refs for w in r.split()
    )
    for make in (lambda **kw: CiderDReward(df_file, **kw), lambda **kw: BleuReward(4, **kw)):
        by_ids = make(vocab=vocab)
        assert by_ids._reads_ids
        np.testing.assert_array_equal(by_ids(ids, test[:8]), make()(texts, test[:8]))
        np.testing.assert_array_equal(by_ids(ids[:8], test[:8]), make()(texts[:8], test[:8]))
    gap = dict(enumerate(vocab[:-1]))
    gap[len(vocab)] = vocab[-1]  # no word for id len(vocab) - 1
    two_words = vocab[:-1] + ["hot dog"]
    for words, kwargs in (
        (gap, {}),
        (two_words, {}),
        (vocab, {"tokenizer": "whitespace(lowercase=true)"}),
    ):
        reward = CiderDReward(df_file, vocab=words, **kwargs)
        cut = np.where(ids < len(vocab) - 1, ids, 1)
        want = CiderDReward(df_file, **kwargs)(decode(cut, words), test[:8])
        assert reward._reads_ids == (words is vocab)
        np.testing.assert_array_equal(reward(cut, test[:8]), want)


def test_self_critical_advantage(df_file: Path) -> None:
    _, samples, test = _flickr8k()
    reward = CiderDReward(df_file)
    sampled, greedy = reward(samples, test), reward(samples[::5], test)
    advantage = self_critical(sampled, greedy)
    np.testing.assert_array_equal(advantage, sampled - np.repeat(greedy, 5))
    np.testing.assert_allclose(advantage[::5], 0.0, rtol=0, atol=1e-12)
    assert (np.abs(advantage) > 0.1).any()
    torch = pytest.importorskip("torch")
    t = self_critical(torch.as_tensor(sampled), torch.as_tensor(greedy))
    np.testing.assert_array_equal(t.numpy(), advantage)
    with pytest.raises(MetricError, match="250 sample rewards are not k per image for 3"):
        self_critical(sampled, greedy[:3])
    # samples and baselines in one batch: the same rewards as two calls, strings or ids
    both = reward.self_critical(samples, samples[::5], test)
    for got, want in zip(both, (advantage, sampled, greedy)):
        np.testing.assert_array_equal(got, want)
    vocab, ids = _vocab_and_ids(samples + [r for refs in test for r in refs])
    by_ids = CiderDReward(df_file, vocab=vocab).self_critical(ids[:250], ids[:250:5, :-1], test)
    for got, want in zip(by_ids, (advantage, sampled, greedy)):
        np.testing.assert_array_equal(got, want)
    as_torch = CiderDReward(df_file, vocab=vocab).self_critical(
        torch.as_tensor(ids[:250]), ids[:250:5], test
    )
    assert all(isinstance(t, torch.Tensor) and t.dtype == torch.float64 for t in as_torch)
    for got, want in zip(as_torch, (advantage, sampled, greedy)):
        np.testing.assert_array_equal(got.numpy(), want)
    with pytest.raises(
        MetricError,
        match="250 samples and 50 baselines need k samples, one baseline and one "
        "reference list per image; got 250 lists",
    ):
        reward.self_critical(samples, samples[::5], [test[i // 5] for i in range(250)])


def test_bleu_rewards_equal_pycocoevalcap() -> None:
    pytest.importorskip("pycocoevalcap")
    _, samples, test = _flickr8k()
    refs = [test[i // 5] for i in range(250)]
    _, per_caption = coco("bleu", samples, refs)
    np.testing.assert_allclose(BleuReward(4)(samples, test), per_caption[3], rtol=0, atol=1e-12)
    np.testing.assert_allclose(BleuReward(2)(samples, refs), per_caption[1], rtol=0, atol=1e-12)


def test_bad_input_is_one_clear_error(df_file: Path) -> None:
    _, samples, test = _flickr8k()
    with pytest.raises(MetricError, match="candidates are token ids; pass vocab="):
        CiderDReward(df_file)(np.zeros((2, 3), dtype=int), test[:2])
    with pytest.raises(MetricError, match="250 candidates need 250 reference lists or k per image"):
        CiderDReward(df_file)(samples, test[:3])
    with pytest.raises(MetricError, match="needs fixed document frequencies"):
        CiderDReward()(samples, test)
    with pytest.raises(MetricError, match="cannot read the df file"):
        CiderDReward(df_file.with_name("missing.json"))
    with pytest.raises(MetricError, match="token ids outside the vocabulary of 2 words"):
        decode([[1, 5]], ["<end>", "a"])
    with pytest.raises(
        MetricError, match=r"reference list\(s\) \[1\] need to be non-empty lists of strings"
    ):
        CiderDReward(df_file, vocab=["<end>", "a"])(np.ones((2, 2), dtype=int), [["a"], []])


def test_a_padded_batch_decodes_as_its_rows_do() -> None:
    vocab = {0: "<end>", 1: "a", 2: "dog", 3: "runs", 5: "far"}
    ids = np.array([[1, 2, 3, 0, 2], [2, 3, 5, 1, 2], [0, 0, 0, 0, 0], [3, 0, 9, 9, 9]])
    rows = [list(r) for r in ids]  # the row-by-row path
    assert (
        decode(ids, vocab)
        == decode(rows, vocab)
        == ["a dog runs", "dog runs far a dog", "", "runs"]
    )
    assert decode(ids[:3], vocab, end_id=None) == [
        "a dog runs <end> dog",
        "dog runs far a dog",
        "<end> <end> <end> <end> <end>",
    ]
    with pytest.raises(
        MetricError, match="sequence 1 has token ids outside the vocabulary of 6 words"
    ):
        decode(np.array([[1, 0, 7], [1, 7, 0]]), vocab)  # the 7 after an end is never read
    assert decode(np.zeros((2, 3), dtype=np.int64), []) == ["", ""]


# -- self-critical.pytorch's convention: keep_end=True with prepro_ngrams' df pickles ----------
SC_FIXTURES = Path(__file__).resolve().parents[1] / "data" / "cider_compat"
SC_NAME = "flickr8k-train300"


@pytest.fixture
def sc_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    """self-critical's batch (ids, its rewards) in a working directory with data/<name>-*.p."""
    import gzip
    import json
    import shutil

    (tmp_path / "data").mkdir()
    for kind in ("idxs", "words"):
        with (
            gzip.open(SC_FIXTURES / f"{SC_NAME}-{kind}.p.gz") as f,
            open(tmp_path / "data" / f"{SC_NAME}-{kind}.p", "wb") as g,
        ):
            shutil.copyfileobj(f, g)
    monkeypatch.chdir(tmp_path)
    batch = json.loads((SC_FIXTURES / "batch.json").read_text())
    batch["itow"] = {int(k): w for k, w in batch["ix_to_word"].items()}
    return batch


def _sc_arrays(batch: dict) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    return (
        np.array(batch["gen_result"]),
        np.array(batch["greedy_res"]),
        [np.array(g) for g in batch["gts"]],
    )


@pytest.mark.parametrize("kind", ["idxs", "words"])
def test_keep_end_equals_self_critical_rewards(sc_data: dict, kind: str) -> None:
    """get_self_critical_reward's advantages (CIDEr-D, and CIDEr-D + 0.5 BLEU-4) from the original
    code, within 1e-12, from ids; the -idxs pickle scores ids, the -words one words with '<eos>'."""
    import torch

    vocab = sc_data["itow"] if kind == "idxs" else sc_data["itow"] | {0: "<eos>"}
    gen, greedy, gts = _sc_arrays(sc_data)
    reward = CiderDReward(f"{SC_NAME}-{kind}", vocab=vocab, end_id=0, keep_end=True)
    advantage, _, _ = reward.self_critical(gen, greedy, gts)
    expected = np.array(sc_data["rewards"]["cider"])
    assert np.abs(advantage - expected).max() < 1e-12 and expected.std() > 0.5
    bleu, _, _ = BleuReward(4, vocab=sc_data["itow"] | {0: "<eos>"}, keep_end=True).self_critical(
        gen, greedy, gts
    )
    assert np.abs(advantage + 0.5 * bleu - np.array(sc_data["rewards"]["cider+bleu"])).max() < 1e-12
    tensor = reward.self_critical(torch.from_numpy(gen), torch.from_numpy(greedy), gts)[0]
    assert tensor.dtype == torch.float64 and np.abs(tensor.numpy() - expected).max() < 1e-12
    np.testing.assert_array_equal(tensor.numpy(), advantage)  # torch in: the same float64 values
    # cutting at the end token instead (the capmetrics default) is not self-critical's number
    cut = CiderDReward(f"{SC_NAME}-{kind}", vocab=vocab, end_id=0).self_critical(gen, greedy, gts)[
        0
    ]
    assert np.abs(cut - expected).max() > 0.05


def test_keep_end_decodes_the_end_token(sc_data: dict) -> None:
    words = ["<eos>", "a", "dog"]
    assert decode([[1, 2, 0, 1, 0], [1, 2, 1]], words, 0, keep_end=True) == [
        "a dog <eos>",
        "a dog a",
    ]
    assert decode(np.array([[1, 2, 0, 1], [0, 0, 0, 0]]), words, 0, keep_end=True) == [
        "a dog <eos>",
        "<eos>",
    ]
    assert decode(np.array([[1, 2, 0, 1]]), words, 0) == ["a dog"]


def test_keep_end_bad_input(sc_data: dict, tmp_path: Path) -> None:
    with pytest.raises(MetricError, match="vocab has no word for end_id 0.*'<eos>'"):
        CiderDReward(f"{SC_NAME}-words", vocab=sc_data["itow"], keep_end=True)
    with pytest.raises(MetricError, match="keep_end=True needs end_id"):
        BleuReward(4, vocab=["a"], end_id=None, keep_end=True)
    broken = tmp_path / "broken.p"
    broken.write_bytes(b"\x80\x02" + b"garbage")
    with pytest.raises(MetricError, match="cannot read the df pickle"):
        CiderDReward(str(broken), vocab=sc_data["itow"], keep_end=True)


def test_a_hostile_df_pickle_runs_nothing(sc_data: dict, tmp_path: Path) -> None:
    """CiderDReward(df="x.p") / df="<name>" with a __reduce__ payload that would create a file:
    a named error, the file never made (the df is read by a restricted unpickler)."""
    import os
    import pickle

    from capmetrics.integrations.dffiles import DfPickleRefused

    victim = tmp_path / "pwned"

    class Payload:
        def __reduce__(self):  # type: ignore[no-untyped-def]
            return (os.system, (f"touch {victim}",))

    Path("data/evil.p").write_bytes(
        pickle.dumps({"document_frequency": {("a",): Payload()}, "ref_len": 3})
    )
    for df in ("data/evil.p", "evil"):
        with pytest.raises(
            DfPickleRefused, match=r"df pickle data/evil.p asks for (posix|nt)\.system"
        ):
            CiderDReward(df, vocab=sc_data["itow"], keep_end=True)
    assert not victim.exists()


def test_a_capmetrics_df_file_converted_from_the_pickle(sc_data: dict, tmp_path: Path) -> None:
    """convert_df's JSON gives the pickle's rewards (self-critical's, within 1e-12)."""
    from capmetrics.integrations.dffiles import convert_df

    target = convert_df(f"{SC_NAME}-words", tmp_path / "words.json")
    gen, greedy, gts = _sc_arrays(sc_data)
    reward = CiderDReward(target, vocab=sc_data["itow"] | {0: "<eos>"}, end_id=0, keep_end=True)
    advantage = reward.self_critical(gen, greedy, gts)[0]
    assert np.abs(advantage - np.array(sc_data["rewards"]["cider"])).max() < 1e-12
