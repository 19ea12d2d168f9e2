"""The segmenting tokenizers (jieba, mecab, sudachi, kiwi, char) against the segmenters called
directly, and the parity of issue 38: BLEU/CIDEr-D with a segmenter equal pycocoevalcap's
scorers on the same text segmented beforehand, to the bit (fixtures: tests/data/cjk/, captions
written by hand for these tests)."""

from __future__ import annotations

import json
import logging
import os
import pickle
import subprocess
import sys
from pathlib import Path

import capmetrics
import pytest
from capmetrics import compose
from capmetrics.errors import MetricError

DATA = Path(__file__).resolve().parents[1] / "data" / "cjk"


def fixture(lang: str) -> tuple[list[str], list[list[str]], capmetrics.Dataset]:
    """Candidates, references and the dataset of one language's COCO-format fixture."""
    dataset = capmetrics.load_dataset(DATA / f"{lang}_captions.json", DATA / f"{lang}_results.json")
    return [it.candidates[0] for it in dataset], [list(it.references) for it in dataset], dataset


def all_texts(lang: str) -> list[str]:
    cands, refs, _ = fixture(lang)
    return cands + [r for rs in refs for r in rs]


# --------------------------------------------------------------------------------------------
# each tokenizer equals its segmenter called directly
# --------------------------------------------------------------------------------------------
def test_jieba_equals_jieba_lcut_joined_and_split() -> None:
    jieba = pytest.importorskip("jieba")
    texts = all_texts("zh") + ["一只 狗\t在跑。 A Dog's ball", "", "   "]
    expected = [" ".join(jieba.lcut(t)).split() for t in texts]
    assert compose("jieba", "tokenizer").tokenize(texts) == expected
    assert compose("jieba(hmm=false)", "tokenizer").tokenize(texts) == [
        " ".join(jieba.lcut(t, HMM=False)).split() for t in texts
    ]


def test_mecab_equals_fugashi_surfaces() -> None:
    fugashi = pytest.importorskip("fugashi")
    unidic_lite = pytest.importorskip("unidic_lite")
    texts = all_texts("ja") + ["犬が 芝生の上を\n走っている。ＡＢＣ", ""]
    tagger = fugashi.Tagger(f'-r "{unidic_lite.DICDIR}/mecabrc" -d "{unidic_lite.DICDIR}"')
    expected = [[w.surface for w in tagger(t)] for t in texts]
    assert compose("mecab", "tokenizer").tokenize(texts) == expected
    assert expected[0] == ["犬", "が", "芝生", "の", "上", "を", "走っ", "て", "いる"]


def test_mecab_ipadic_equals_fugashi_generic_tagger() -> None:
    fugashi = pytest.importorskip("fugashi")
    ipadic = pytest.importorskip("ipadic")
    texts = all_texts("ja")
    tagger = fugashi.GenericTagger(ipadic.MECAB_ARGS)
    assert compose("mecab(dictionary=ipadic)", "tokenizer").tokenize(texts) == [
        [w.surface for w in tagger(t)] for t in texts
    ]


@pytest.mark.parametrize("mode", ["A", "B", "C"])
def test_sudachi_equals_sudachipy_surfaces(mode: str) -> None:
    sudachipy = pytest.importorskip("sudachipy")
    pytest.importorskip("sudachidict_core")
    texts = all_texts("ja") + ["東京都庁の　前で", ""]
    tok = sudachipy.Dictionary(dict="core").tokenizer(mode=mode)
    expected = [[m.surface() for m in tok.tokenize(t) if m.surface().strip()] for t in texts]
    assert compose(f"sudachi(mode={mode})", "tokenizer").tokenize(texts) == expected


def test_sudachi_modes_differ_where_compounds_are() -> None:
    pytest.importorskip("sudachipy")
    a = compose("sudachi(mode=A)", "tokenizer").tokenize(["東京都庁"])[0]
    c = compose("sudachi(mode=C)", "tokenizer").tokenize(["東京都庁"])[0]
    assert "".join(a) == "".join(c) == "東京都庁" and len(a) > len(c)


def test_kiwi_equals_kiwipiepy_forms() -> None:
    kiwipiepy = pytest.importorskip("kiwipiepy")
    texts = all_texts("ko") + ["강아지가 잔디 위를 달렸다.", ""]
    kiwi = kiwipiepy.Kiwi()
    ours = compose("kiwi", "tokenizer")  # one model load (seconds) for both calls
    assert ours.tokenize(texts) == [[t.form for t in kiwi.tokenize(x)] for x in texts]
    assert ours.tokenize(["강아지가 잔디 위를 달렸다."])[0] == [
        "강아지",
        "가",
        "잔디",
        "위",
        "를",
        "달리",
        "었",
        "다",
        ".",
    ]


# --------------------------------------------------------------------------------------------
# char, and the options every segmenter shares
# --------------------------------------------------------------------------------------------
def test_char_tokens_by_hand() -> None:
    char = compose("char", "tokenizer")
    assert char.tokenize(["一只 狗，Ａb。", "  ", ""]) == [
        ["一", "只", "狗", "，", "Ａ", "b", "。"],
        [],
        [],
    ]
    # a combining mark stays with its consonant (Thai), a ZWJ emoji sequence is one token
    assert char.tokenize(["ตัว", "e\u0301a", "👨\u200d👩\u200d👧!"]) == [
        ["ตั", "ว"],
        ["e\u0301", "a"],
        ["👨\u200d👩\u200d👧", "!"],
    ]
    assert compose("char(punctuation=remove)", "tokenizer").tokenize(["一只 狗，Ａb。!"]) == [
        ["一", "只", "狗", "Ａ", "b"]
    ]
    assert compose("char(normalize=nfkc, lowercase=true)", "tokenizer").tokenize(
        ["狗，ＡＢ１。ｶ"]
    ) == [["狗", ",", "a", "b", "1", "。", "カ"]]


def test_nfkc_is_applied_before_segmenting_and_recorded_in_the_signature() -> None:
    pytest.importorskip("jieba")
    plain, nfkc = compose("jieba", "tokenizer"), compose("jieba(normalize=nfkc)", "tokenizer")
    text = "３只狗在ＡＢＣ公园，玩耍"
    assert "，" in plain.tokenize([text])[0] and "," in nfkc.tokenize([text])[0]
    # jieba splits full-width letters one by one; NFKC makes them the word "ABC" first
    assert nfkc.tokenize([text])[0] == ["3", "只", "狗", "在", "ABC", "公园", ",", "玩耍"]
    assert plain.tokenize([text])[0][:7] == ["３", "只", "狗", "在", "Ａ", "Ｂ", "Ｃ"]
    assert nfkc.signature()["spec"] == "jieba(normalize=nfkc)"
    sig = capmetrics.score(
        candidates=[text],
        references=[["三只狗"]],
        metrics="bleu-1(tokenizer=jieba(normalize=nfkc))",
    )
    assert sig.metrics[0].signature["tokenizer"] == "jieba(normalize=nfkc)"


def test_signatures_name_versions_and_dictionaries() -> None:
    pytest.importorskip("jieba")
    pytest.importorskip("fugashi")
    pytest.importorskip("sudachipy")
    pytest.importorskip("kiwipiepy")
    from importlib.metadata import version

    jieba_sig = compose("jieba", "tokenizer").signature()
    assert jieba_sig["jieba"] == version("jieba") and jieba_sig["dictionary"].startswith(
        "jieba dict.txt sha256:"
    )
    assert compose("mecab", "tokenizer").signature() == {
        "spec": "mecab",
        "fugashi": version("fugashi"),
        "dictionary": f"unidic-lite {version('unidic-lite')}",
    }
    assert compose("sudachi(mode=C)", "tokenizer").signature() == {
        "spec": "sudachi(mode=C)",
        "sudachipy": version("sudachipy"),
        "dictionary": f"sudachidict-core {version('sudachidict-core')}",
    }
    assert compose("kiwi", "tokenizer").signature() == {
        "spec": "kiwi",
        "kiwipiepy": version("kiwipiepy"),
        "dictionary": f"kiwipiepy-model {version('kiwipiepy-model')}",
    }


def test_bad_option_values_are_spec_errors() -> None:
    from capmetrics.errors import SpecError

    for spec in (
        "char(normalize=nfc)",
        "char(punctuation=strip)",
        "sudachi(mode=D)",
        "mecab(dictionary=unidic)",
    ):
        with pytest.raises(SpecError):
            compose(spec, "tokenizer")


@pytest.mark.parametrize("spec", ["jieba", "mecab", "sudachi", "kiwi", "char"])
def test_each_distinct_text_is_segmented_once_and_pickles(spec: str, monkeypatch) -> None:
    tok = compose(spec, "tokenizer")
    pytest.importorskip(
        {
            "jieba": "jieba",
            "mecab": "fugashi",
            "sudachi": "sudachipy",
            "kiwi": "kiwipiepy",
            "char": "json",
        }[spec]
    )
    seen: list[str] = []
    real = type(tok)._segment
    monkeypatch.setattr(
        type(tok), "_segment", lambda self, texts: seen.extend(texts) or real(self, texts)
    )
    texts = ["一只狗。", "犬が走る", "一只狗。", "개가 달린다"]
    first = tok.tokenize(texts)
    assert tok.tokenize(texts[::-1]) == first[::-1]
    assert sorted(seen) == sorted(set(texts))  # one call per distinct text, ever
    copy = pickle.loads(pickle.dumps(tok))
    assert copy == tok and copy.tokenize(texts) == first


@pytest.mark.parametrize(
    "module, spec, extra",
    [
        ("jieba", "jieba", "zh"),
        ("fugashi", "mecab", "ja"),
        ("sudachipy", "sudachi", "ja"),
        ("kiwipiepy", "kiwi", "ko"),
    ],
)
def test_missing_package_is_a_one_line_error_naming_the_extra(
    module, spec, extra, monkeypatch
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # import fails as if not installed
    tok = compose(spec, "tokenizer")
    with pytest.raises(MetricError) as info:
        tok.tokenize(["一只狗"])
    assert f"pip install 'capmetrics[{extra}]'" in str(info.value) and "\n" not in str(info.value)


def test_segmenters_print_nothing_and_leave_logging_alone(tmp_path: Path) -> None:
    pytest.importorskip("jieba")
    code = """
import logging, jieba, capmetrics
before = (jieba.default_logger.disabled, jieba.default_logger.level, logging.getLogger().level)
for spec in ("jieba", "mecab", "sudachi", "kiwi", "char"):
    try:
        capmetrics.compose(spec, "tokenizer").tokenize(
            ["一只狗在草地上奔跑", "犬が走る", "개가 달린다"]
        )
    except capmetrics.MetricError:
        pass
after = (jieba.default_logger.disabled, jieba.default_logger.level, logging.getLogger().level)
assert before == after, (before, after)
"""
    env = {**os.environ, "CAPMETRICS_CACHE_DIR": str(tmp_path)}  # a cold jieba cache: it would log
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "" and proc.stderr == ""
    assert list((tmp_path / "jieba").glob("jieba-*.cache"))  # jieba's cache went under ours


# --------------------------------------------------------------------------------------------
# parity: pycocoevalcap's Bleu and Cider on text segmented beforehand
# --------------------------------------------------------------------------------------------
def _coco_scores(cands: list[str], refs: list[list[str]]) -> tuple[list[float], list, float, list]:
    bleu = pytest.importorskip("pycocoevalcap.bleu.bleu")
    cider = pytest.importorskip("pycocoevalcap.cider.cider")
    gts = {i: rs for i, rs in enumerate(refs)}
    res = {i: [c] for i, c in enumerate(cands)}
    b, bs = bleu.Bleu(4).compute_score(gts, res, verbose=0)
    c, cs = cider.Cider().compute_score(gts, res)
    return b, bs, float(c), list(cs)


def test_jieba_bleu_and_cider_equal_pycocoevalcap_on_jieba_lcut_text() -> None:
    jieba = pytest.importorskip("jieba")
    cands, refs, dataset = fixture("zh")
    seg = lambda t: " ".join(jieba.lcut(t))
    b, bs, c, cs = _coco_scores([seg(x) for x in cands], [[seg(r) for r in rs] for rs in refs])
    res = capmetrics.score(dataset, ["bleu-4(tokenizer=jieba)", "cider-d(tokenizer=jieba)"])
    assert res["bleu-4(tokenizer=jieba)"].corpus == b[3]
    assert list(res["bleu-4(tokenizer=jieba)"].item_values) == list(bs[3])
    assert res["cider-d(tokenizer=jieba)"].corpus == c
    assert list(res["cider-d(tokenizer=jieba)"].item_values) == cs
    assert 0.3 < b[3] < 0.6 and 1.0 < c < 3.0  # real overlap, not the 0 of unsegmented text
    # the same text segmented by the user, through the whitespace tokenizer: the same numbers
    presegmented = capmetrics.score(
        candidates=[seg(x) for x in cands],
        references=[[seg(r) for r in rs] for rs in refs],
        metrics=["bleu-4(tokenizer=whitespace)", "cider-d(tokenizer=whitespace)"],
    )
    assert presegmented.to_dict() == {
        "bleu-4(tokenizer=whitespace)": b[3],
        "cider-d(tokenizer=whitespace)": c,
    }


def test_jieba_parity_through_the_cli(tmp_path: Path) -> None:
    jieba = pytest.importorskip("jieba")
    from capmetrics.cli import app
    from typer.testing import CliRunner

    cands, refs, _ = fixture("zh")
    seg = lambda t: " ".join(jieba.lcut(t))
    b, _, c, _ = _coco_scores([seg(x) for x in cands], [[seg(r) for r in rs] for rs in refs])
    out = tmp_path / "scores.json"
    result = CliRunner().invoke(
        app,
        [
            "score",
            str(DATA / "zh_captions.json"),
            "--results",
            str(DATA / "zh_results.json"),
            "-m",
            "bleu-4(tokenizer=jieba)",
            "-m",
            "cider-d(tokenizer=jieba)",
            "--out",
            str(out),
            "-q",
        ],
    )
    assert result.exit_code == 0, result.output
    corpus = {m["name"]: m["corpus"] for m in json.loads(out.read_text())["metrics"]}
    assert corpus == {"bleu-4(tokenizer=jieba)": b[3], "cider-d(tokenizer=jieba)": c}


def test_mecab_cider_equals_pycocoevalcap_on_fugashi_surfaces() -> None:
    fugashi = pytest.importorskip("fugashi")
    cands, refs, dataset = fixture("ja")
    tagger = fugashi.Tagger()  # unidic-lite is the only UniDic installed here, as in the ja extra
    seg = lambda t: " ".join(w.surface for w in tagger(t))
    b, _bs, c, cs = _coco_scores([seg(x) for x in cands], [[seg(r) for r in rs] for rs in refs])
    res = capmetrics.score(dataset, ["cider-d(tokenizer=mecab)", "bleu-4(tokenizer=mecab)"])
    assert res["cider-d(tokenizer=mecab)"].corpus == c
    assert list(res["cider-d(tokenizer=mecab)"].item_values) == cs
    assert res["bleu-4(tokenizer=mecab)"].corpus == b[3]
    assert c > 1.0


def test_jieba_logger_state_is_restored_after_an_error(monkeypatch) -> None:
    jieba = pytest.importorskip("jieba")
    from capmetrics.plugins.tokenizers._segmenter import logger_silenced

    with pytest.raises(RuntimeError), logger_silenced(jieba.default_logger):
        assert jieba.default_logger.disabled
        raise RuntimeError
    assert jieba.default_logger.disabled is False
    assert logging.getLogger("jieba") is jieba.default_logger
