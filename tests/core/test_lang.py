"""lang= / --lang / config lang: the language's tokenizer in every metric, English-only metrics
refused by name, the default set trimmed with a note; the warning for CJK text left
unsegmented; CJK data in COCO and AIC-ICC files; meta on Chinese judgments."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import capmetrics
import numpy as np
import pytest
from capmetrics.cli import app
from capmetrics.components.language import (
    cjk_language,
    get_language,
    localize,
    segmentation_problem,
)
from capmetrics.errors import DataError, MetricError, SpecError
from typer.testing import CliRunner

pytest.importorskip("jieba")

DATA = Path(__file__).resolve().parents[1] / "data" / "cjk"
ZH = [str(DATA / "zh_captions.json"), "--results", str(DATA / "zh_results.json")]
runner = CliRunner()


def zh_dataset() -> capmetrics.Dataset:
    return capmetrics.load_dataset(DATA / "zh_captions.json", DATA / "zh_results.json")


# --------------------------------------------------------------------------------------------
# specs
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "spec, expected",
    [
        ("bleu-4", "bleu-4(tokenizer=jieba)"),
        ("cider-d(df=corpus)", "cider-d(df=corpus, tokenizer=jieba)"),
        (
            "over-candidates(distance=cider-d, reduce=max)",
            "over-candidates(distance=cider-d(tokenizer=jieba), reduce=max)",
        ),
        ("bleu-4(tokenizer=char)", "bleu-4(tokenizer=char)"),  # the spec's own tokenizer stays
        ("bleu-4(tokenizer=ptb)", "bleu-4(tokenizer=ptb)"),  # ... and is refused later
        ("no-such-metric", "no-such-metric"),  # compose reports it
    ],
)
def test_localize_puts_the_tokenizer_where_the_spec_leaves_the_default(
    spec: str, expected: str
) -> None:
    assert localize(spec, "zh") == expected


def test_localize_english_and_normalize() -> None:
    assert localize("bleu-4", "en") == "bleu-4"
    assert localize("bleu-4", "ja", normalize="nfkc") == "bleu-4(tokenizer=mecab(normalize=nfkc))"
    assert localize("bleu-4", "zh-CN") == "bleu-4(tokenizer=jieba)"
    with pytest.raises(SpecError, match="unknown lang 'fr'"):
        get_language("fr")
    with pytest.raises(SpecError, match="normalize=nfkc applies to the segmenter"):
        localize("bleu-4", "en", normalize="nfkc")


def test_localize_expands_config_definitions() -> None:
    from capmetrics.registry.spec import Spec

    defs = {
        "best-cider": Spec(
            "over-candidates", (("distance", "cider-d"), ("reduce", "max")), called=True
        )
    }
    assert (
        localize("best-cider", "ko", definitions=defs)
        == "over-candidates(distance=cider-d(tokenizer=kiwi), reduce=max)"
    )


# --------------------------------------------------------------------------------------------
# score(..., lang=)
# --------------------------------------------------------------------------------------------
def test_lang_default_set_leaves_meteor_out_with_a_note_and_equals_explicit_specs() -> None:
    dataset = zh_dataset()
    with pytest.warns(UserWarning, match=r"left out meteor \(meteor works on English text only\)"):
        res = capmetrics.score(dataset, lang="zh")
    assert [m.name for m in res.metrics] == [
        "bleu-1",
        "bleu-2",
        "bleu-3",
        "bleu-4",
        "rouge-l",
        "cider-d",
    ]
    explicit = capmetrics.score(
        dataset, [f"{m}(tokenizer=jieba)" for m in ("bleu-1", "bleu-4", "rouge-l", "cider-d")]
    )
    for m in ("bleu-1", "bleu-4", "rouge-l", "cider-d"):
        assert res[m].corpus == explicit[f"{m}(tokenizer=jieba)"].corpus
        assert res[m].signature["tokenizer"] == "jieba"
    assert res["cider-d"].spec == "cider-d(tokenizer=jieba)"


@pytest.mark.parametrize(
    "metric, culprit",
    [
        ("spice", "spice"),
        ("meteor", "meteor"),
        ("meteor-jar", "meteor-jar"),
        ("bleu-4(tokenizer=ptb)", "ptb"),
        ("cider-d(tokenizer=ptb-jar)", "ptb-jar"),
        ("capture", "capture"),
        ("chair", "chair"),
        ("nneval", "nneval"),
    ],
)
def test_english_only_components_are_refused_by_name(metric: str, culprit: str) -> None:
    with pytest.raises(MetricError) as info:
        capmetrics.score(zh_dataset(), [metric], lang="zh")
    message = str(info.value)
    assert (
        message.startswith(f"{metric}")
        and f"{culprit} works on English text only, not Chinese" in message
    )
    assert "\n" not in message


@pytest.mark.parametrize(
    "metric, culprit, key",
    [
        ("wmd", "glove", "path"),
        ("embedding-cosine", "bert", "model"),
        ("bertscore", "bertscore", "model"),
    ],
)
def test_bundled_english_models_are_refused_and_a_model_of_yours_is_not(
    metric, culprit, key
) -> None:
    from capmetrics.components.language import refusal

    built = capmetrics.compose(localize(metric, "zh"), ("distance", "statistic"))
    assert (
        f"{culprit} works on English text only, not Chinese (lang 'zh'); give {culprit} a {key}="
        in refusal(built, "zh", metric)
    )
    own = {
        "wmd": 'wmd(embedder=glove(path="vectors.zh.txt"))',
        "embedding-cosine": 'embedding-cosine(embedder=bert(model="/models/multilingual"))',
        "bertscore": 'bertscore(model="/models/bert-base-multilingual-cased", layer=9)',
    }[metric]
    assert (
        refusal(capmetrics.compose(localize(own, "zh"), ("distance", "statistic")), "zh", own)
        is None
    )


def test_a_tokenizer_for_another_language_is_refused_too() -> None:
    with pytest.raises(MetricError, match="jieba works on Chinese text only, not Japanese"):
        capmetrics.score(zh_dataset(), ["bleu-4(tokenizer=jieba)"], lang="ja")
    # char and whitespace serve any language
    res = capmetrics.score(zh_dataset(), ["bleu-4(tokenizer=char)"], lang="zh")
    assert res.metrics[0].signature["tokenizer"] == "char"


def test_normalize_without_lang_is_refused_and_with_it_is_in_the_signature() -> None:
    with pytest.raises(MetricError, match="normalize applies to the segmenter"):
        capmetrics.score(zh_dataset(), ["bleu-4"], normalize="nfkc")
    res = capmetrics.score(zh_dataset(), ["bleu-4"], lang="zh", normalize="nfkc")
    assert res["bleu-4"].signature["tokenizer"] == "jieba(normalize=nfkc)"


def test_pycocoevalcap_names_take_lang_too() -> None:
    cands = ["一只狗在草地上奔跑", "一个男人骑自行车"]
    refs = [["一只狗在草地上跑", "小狗在草地上奔跑"], ["一个人在骑自行车", "男人骑着一辆自行车"]]
    named = capmetrics.compute(
        predictions=cands, references=refs, metrics=["Bleu_4", "CIDEr"], lang="zh"
    )
    explicit = capmetrics.compute(
        predictions=cands,
        references=refs,
        metrics=["bleu-4(tokenizer=jieba)", "cider-d(tokenizer=jieba)"],
    )
    assert list(named) == ["Bleu_4", "CIDEr"] and list(named.values()) == list(explicit.values())


def test_compute_takes_lang() -> None:
    out = capmetrics.compute(
        predictions=["一只狗在草地上奔跑"],
        references=[["一只狗在草地上跑", "小狗在草地上奔跑"]],
        metrics=["bleu-1"],
        lang="zh",
    )
    # jieba: 一只/狗/在/草地/上/奔跑 against 一只/狗/在/草地/上/跑: 6 of 6 unigrams match,
    # equal lengths
    assert out == {"bleu-1": pytest.approx(1.0, abs=1e-9)}


# --------------------------------------------------------------------------------------------
# the CLI and the config file
# --------------------------------------------------------------------------------------------
def test_cli_spice_with_lang_zh_is_a_named_error_exit_1() -> None:
    result = runner.invoke(app, ["score", *ZH, "-m", "spice", "--lang", "zh"])
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        "Error: spice: spice works on English text only, not Chinese (lang 'zh'); leave it out"
    ]


def test_cli_lang_zh_default_set_with_a_note(tmp_path: Path) -> None:
    out = tmp_path / "s.json"
    result = runner.invoke(app, ["score", *ZH, "--lang", "zh", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert (
        "note: lang zh: scoring bleu-1, bleu-2, bleu-3, bleu-4, rouge-l, cider-d with tokenizer "
        "jieba; "
        "left out meteor (meteor works on English text only)" in result.output
    )
    metrics = json.loads(out.read_text())["metrics"]
    assert [m["name"] for m in metrics] == [
        "bleu-1",
        "bleu-2",
        "bleu-3",
        "bleu-4",
        "rouge-l",
        "cider-d",
    ]
    assert {m["signature"]["tokenizer"] for m in metrics} == {"jieba"}


def test_cli_unknown_lang_is_a_usage_error() -> None:
    result = runner.invoke(app, ["score", *ZH, "-m", "bleu-4", "--lang", "klingon"])
    assert result.exit_code == 2 and "unknown lang 'klingon'" in result.output


def test_config_lang(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        '[score]\nmetrics = ["cider-d"]\nlang = "zh"\nformat = "json"\n', encoding="utf-8"
    )
    result = runner.invoke(app, ["score", *ZH, "--config", str(cfg), "-q"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["metrics"][0]["signature"]["tokenizer"] == "jieba"
    cfg.write_text("[score]\nlang = 3\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"\[score\] lang must be a string"):
        capmetrics.load_config(cfg)


# --------------------------------------------------------------------------------------------
# the silent failure, detected
# --------------------------------------------------------------------------------------------
def test_cjk_language_guess() -> None:
    assert cjk_language(["一只狗在草地上奔跑"]) == "zh"
    assert cjk_language(["犬が芝生の上を走っている"]) == "ja"
    assert cjk_language(["강아지가 잔디 위를 달린다"]) == "ko"
    assert cjk_language(["a dog runs on the grass", "日本"]) is None
    assert cjk_language([""]) is None


def test_ptb_on_chinese_warns_once_naming_lang() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        capmetrics.score(zh_dataset(), ["bleu-4", "cider-d", "rouge-l"])
    messages = [str(w.message) for w in caught if "segment" in str(w.message)]
    assert len(messages) == 1
    assert "most of the text is Chinese but tokenizer 'ptb' does not segment it" in messages[0]
    assert "--lang zh" in messages[0]


def test_whitespace_warns_on_unsegmented_text_only() -> None:
    import jieba

    ds = zh_dataset()
    cands = [it.candidates[0] for it in ds]
    refs = [list(it.references) for it in ds]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        capmetrics.score(
            candidates=cands, references=refs, metrics=["bleu-4(tokenizer=whitespace)"]
        )
    assert sum("--lang zh" in str(w.message) for w in caught) == 1
    seg = lambda t: " ".join(jieba.lcut(t))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        capmetrics.score(
            candidates=[seg(c) for c in cands],
            references=[[seg(r) for r in rs] for rs in refs],
            metrics=[
                "bleu-4(tokenizer=whitespace)",
                "cider-d(tokenizer=jieba)",
                "bleu-1(tokenizer=char)",
            ],
        )
        capmetrics.score(
            candidates=["a dog runs"], references=[["a dog is running"]], metrics=["bleu-1"]
        )
    assert not [w for w in caught if "segment" in str(w.message)]


def test_segmentation_problem_for_japanese_names_ja() -> None:
    ptb = capmetrics.compose("ptb", "tokenizer")
    texts = ["犬が芝生の上を走っている", "猫が窓辺で寝ている"]
    assert "--lang ja" in segmentation_problem(ptb, texts, ptb.tokenize(texts))


# --------------------------------------------------------------------------------------------
# data in any language
# --------------------------------------------------------------------------------------------
def test_coco_files_in_any_language_load_as_written(tmp_path: Path) -> None:
    for lang, first in (
        ("zh", "一只棕色的小狗在草地上奔跑"),
        ("ja", "芝生の上を茶色い犬が走っている"),
        ("ko", "갈색 강아지가 잔디 위를 달리고 있다"),
    ):
        ds = capmetrics.load_dataset(DATA / f"{lang}_captions.json", DATA / f"{lang}_results.json")
        assert ds[0].references[0] == first and len(ds[0].references) == 5
    # a BOM and \u escapes read the same
    bom = tmp_path / "bom.json"
    raw = json.loads((DATA / "zh_captions.json").read_text(encoding="utf-8"))
    bom.write_bytes(b"\xef\xbb\xbf" + json.dumps(raw, ensure_ascii=True).encode("ascii"))
    again = capmetrics.load_dataset(bom, DATA / "zh_results.json")
    assert [it.references for it in again] == [it.references for it in zh_dataset()]


def test_aic_icc_layout_loads_and_scores_like_the_coco_copy() -> None:
    ds = capmetrics.load_dataset(DATA / "zh_aic_references.json", DATA / "zh_aic_results.json")
    coco = zh_dataset()
    assert ds.ids[:2] == ["zh_0001.jpg", "zh_0002.jpg"] and len(ds) == 20
    assert [it.references for it in ds] == [it.references for it in coco]
    assert [it.candidates for it in ds] == [it.candidates for it in coco]
    assert (
        capmetrics.score(ds, ["cider-d"], lang="zh")["cider-d"].corpus
        == capmetrics.score(coco, ["cider-d"], lang="zh")["cider-d"].corpus
    )


def test_aic_problems_are_named(tmp_path: Path) -> None:
    refs = tmp_path / "refs.json"
    res = tmp_path / "res.json"
    refs.write_text(
        json.dumps(
            [
                {"image_id": "a.jpg", "caption": ["一只狗"]},
                {"image_id": "b.jpg", "caption": ["一只猫", 3]},
            ],
            ensure_ascii=False,
        ),
        encoding="utf-8",
    )
    res.write_text(
        json.dumps(
            [
                {"image_id": "a", "caption": "狗"},
                {"image_id": "zzz", "caption": "猫"},
                {"image_id": "b", "caption": "猫"},
            ],
            ensure_ascii=False,
        ),
        encoding="utf-8",
    )
    with pytest.raises(DataError) as info:
        capmetrics.load_dataset(refs, res)
    text = str(info.value)
    assert "'b.jpg': reference 1 must be a string, got int" in text
    assert "'zzz': result 1 names an image id missing from the references" in text
    skipped = capmetrics.load_dataset(refs, res, on_error="skip")
    assert skipped.ids == ["a.jpg"]
    with pytest.raises(DataError, match="need the results file"):
        capmetrics.load_dataset(refs)


def chinese_judgments(tmp_path: Path) -> tuple[Path, list[dict]]:
    """Three rated candidates per fixture image: its candidate (4), a fragment of a reference (2)
    and an unrelated caption (1); ratings made up for the test."""
    ds = zh_dataset()
    lines = []
    for _k, item in enumerate(ds):
        for j, (cand, rating) in enumerate(
            ((item.candidates[0], 4), (item.references[0][:3], 2), ("一辆红色的汽车", 1))
        ):
            lines.append(
                {
                    "id": f"{item.id}#{j}",
                    "image": str(item.id),
                    "references": list(item.references[1:]),
                    "candidate": cand,
                    "rating": rating,
                }
            )
    path = tmp_path / "judgments.jsonl"
    path.write_text(
        "\n".join(json.dumps(x, ensure_ascii=False) for x in lines) + "\n", encoding="utf-8"
    )
    return path, lines


def test_meta_on_chinese_judgments(tmp_path: Path) -> None:
    from capmetrics.analysis.meta import agreement
    from capmetrics.data.judgments import load_judgments

    ds = zh_dataset()
    path, lines = chinese_judgments(tmp_path)
    judgments = load_judgments(path)
    assert judgments.dataset[0].candidates[0] == ds[0].candidates[0]
    scores = capmetrics.score(judgments.dataset, ["cider-d(tokenizer=jieba)"])[
        "cider-d(tokenizer=jieba)"
    ]
    values = np.concatenate(scores.candidate_values)
    result = agreement("cider-d(tokenizer=jieba)", judgments, n_boot=20, ceiling=False)
    from scipy import stats

    expected = stats.kendalltau(
        values, np.array([x["rating"] for x in lines], dtype=float)
    ).statistic
    assert result.statistics["kendall_b"].value == pytest.approx(expected, abs=1e-12)
    assert expected > 0.5  # the segmented metric tracks the (made-up) ratings


def test_compare_takes_lang(tmp_path: Path) -> None:
    ds = zh_dataset()
    for name, pick in (("a", lambda it: it.candidates[0]), ("b", lambda it: it.references[0][:2])):
        rows = [
            {"id": it.id, "references": list(it.references[1:]), "candidates": [pick(it)]}
            for it in ds
        ]
        (tmp_path / f"{name}.jsonl").write_text(
            "\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", encoding="utf-8"
        )
    args = ["compare", str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl"), "--trials", "200"]
    result = runner.invoke(
        app, [*args, "-m", "cider-d", "--lang", "zh", "--resamples", "50", "--json"]
    )
    assert result.exit_code == 0, result.output
    comparison = json.loads(result.stdout)["comparisons"][0]
    assert "tokenizer=jieba" in json.dumps(comparison)
    refused = runner.invoke(app, [*args, "-m", "spice", "--lang", "zh"])
    assert refused.exit_code == 1 and "spice works on English text only" in refused.output


def test_meta_cli_takes_lang(tmp_path: Path) -> None:
    path, _ = chinese_judgments(tmp_path)
    args = ["meta", str(path), "--bootstrap", "0", "--no-ceiling", "--format", "json"]
    result = runner.invoke(app, [*args, "--lang", "zh"])
    assert result.exit_code == 0, result.output
    assert "left out meteor" in result.output
    rows = json.loads(result.stdout)
    rows = rows if isinstance(rows, list) else rows["metrics"]
    assert [r["metric"] for r in rows] == ["bleu-1", "bleu-4", "rouge-l", "cider-d"]
    explicit = json.loads(runner.invoke(app, [*args, "-m", "cider-d(tokenizer=jieba)"]).stdout)
    explicit = explicit if isinstance(explicit, list) else explicit["metrics"]
    assert rows[-1]["kendall_b"] == explicit[0]["kendall_b"]
    refused = runner.invoke(app, ["meta", str(path), "--lang", "zh", "-m", "spice"])
    assert refused.exit_code == 1 and "spice works on English text only" in refused.output
