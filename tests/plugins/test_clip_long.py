"""Long captions in CLIP-S: exact token counts in the truncation warning, Long-CLIP checkpoints
(248 text positions) read and used whole, and the opt-in sentence-chunked mode.

tests/data/clip/longclip_reference.json was made by experiments/clip_longclip_fixture.py with
Long-CLIP's own model code (beichenzbc/Long-CLIP @ 3966af9) on the tiny Long-CLIP of
tests/data/clip/tiny_longclip.py.
"""

from __future__ import annotations

import json
import re
import warnings

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("PIL")

import capmetrics
import torch
from capmetrics.data.model import Dataset, Item
from capmetrics.errors import MetricError

from tests.conftest import DATA
from tests.data.clip.tiny_clip import tiny_clip_state_dict
from tests.data.clip.tiny_longclip import tiny_longclip_state_dict

CLIP_DATA = DATA / "clip"
LONG = json.loads((CLIP_DATA / "longclip_reference.json").read_text(encoding="utf-8"))
PROMPT = "A photo depicts "


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The tiny CLIP (77 positions) and the tiny Long-CLIP (248, Long-CLIP's two tables)."""
    folder = tmp_path_factory.mktemp("clip_long")
    for name, state in (
        ("clip", tiny_clip_state_dict(0)),
        ("longclip", tiny_longclip_state_dict()),
    ):
        torch.save({k: torch.from_numpy(v) for k, v in state.items()}, folder / f"{name}.pt")
    return {
        "clip": str(folder / "clip.pt"),
        "longclip": str(folder / "longclip.pt"),
        "folder": str(folder),
    }


def _bpe():
    from capmetrics.plugins.clip_score._bpe import ClipBPE

    return ClipBPE()


def _tokens(text: str) -> int:
    """The prompted text's length in CLIP's BPE tokens, start and end tokens included."""
    return len(_bpe().encode(PROMPT + text)) + 2


def _dataset(rows: list[tuple[str, str, list[str], list[str]]]) -> Dataset:
    return Dataset(
        [
            Item(i, tuple(refs), tuple(cands), str(CLIP_DATA / image))
            for i, image, cands, refs in rows
        ],
        "long.jsonl",
    )


def _longclip_dataset(rows: list[dict]) -> Dataset:
    return _dataset(
        [
            (f"{r['id']}-{r['caption']}-{k}", r["image"], [LONG["captions"][r["caption"]]], [])
            for k, r in enumerate(rows)
        ]
    )


def _score(data: Dataset, spec: str) -> tuple[np.ndarray, list[str]]:
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        res = capmetrics.score(data, [spec])
    return np.concatenate(res.metrics[0].candidate_values), [str(w.message) for w in record]


# ---------------------------------------------------------------- Long-CLIP checkpoints
def test_a_longclip_checkpoint_takes_its_248_positions(ckpts):
    from capmetrics.plugins.clip_score.model import ClipModel

    long, base = ClipModel(ckpts["longclip"]), ClipModel(ckpts["clip"])
    assert (long.context_length(), base.context_length()) == (248, 77)
    sig = long.signature_extra()
    assert sig["context"] == "248" and sig["format"] == "longclip-state-dict"


def test_longclip_scores_equal_longclip_code_and_only_captions_past_248_are_cut(ckpts):
    values, messages = _score(
        _longclip_dataset(LONG["rows"]), f'clip-score(model="{ckpts["longclip"]}")'
    )
    np.testing.assert_allclose(values, [r["clip_score"] for r in LONG["rows"]], atol=1e-5)
    counts = [_tokens(LONG["captions"][r["caption"]]) for r in LONG["rows"]]
    assert counts == [r["tokens"] for r in LONG["rows"]] == [14, 157, 157, 317]
    # three distinct captions (one is scored twice), one past 248 tokens
    expected = (
        "clip-score: 1 of 3 distinct captions longer than 248 tokens were cut "
        f"(up to 317 tokens; {317 - 248} tokens dropped in all;"
    )
    assert [m for m in messages if "were cut" in m] == [
        m for m in messages if m.startswith(expected)
    ]
    assert sum(m.startswith(expected) for m in messages) == 1


def test_a_150_token_caption_is_read_whole_and_scores_apart_from_its_cut_form(ckpts):
    from capmetrics.plugins.clip_score.model import ClipModel

    rows = [r for r in LONG["rows"] if r["caption"] == "detailed"]
    assert 150 <= rows[0]["tokens"] <= 248
    values, messages = _score(_longclip_dataset(rows), f'clip-score(model="{ckpts["longclip"]}")')
    assert not [m for m in messages if "were cut" in m]  # nothing cut: no warning
    whole = np.array([r["clip_score"] for r in rows])
    cut77 = np.array([r["clip_score_cut_at_77"] for r in rows])
    np.testing.assert_allclose(values, whole, atol=1e-5)
    assert np.all(np.abs(values - cut77) > 0.03)  # reading past token 77 changes the score
    feats = (
        ClipModel(ckpts["longclip"])
        .embed_texts([PROMPT + LONG["captions"]["detailed"]])[0]
        .astype(np.float64)
    )
    feats /= np.linalg.norm(feats)
    np.testing.assert_allclose(feats, rows[0]["text_features"], atol=1e-5)
    assert np.max(np.abs(feats - np.array(rows[0]["text_features_cut_at_77"]))) > 1e-2


def test_a_hugging_face_folder_of_a_longclip_takes_its_config_context(ckpts, tmp_path):
    from capmetrics.plugins.clip_score._checkpoints import load_checkpoint
    from capmetrics.plugins.clip_score.model import ClipModel

    load_checkpoint(ckpts["longclip"]).model.save_pretrained(tmp_path / "hf")
    model = ClipModel(str(tmp_path / "hf"))
    assert model.context_length() == 248
    row = next(r for r in LONG["rows"] if r["caption"] == "detailed")
    feats = model.embed_texts([PROMPT + LONG["captions"]["detailed"]])[0].astype(np.float64)
    np.testing.assert_allclose(feats / np.linalg.norm(feats), row["text_features"], atol=1e-5)


def test_position_tables_that_do_not_fit_are_named(tmp_path):
    state = tiny_longclip_state_dict()
    state["positional_embedding_res"] = state["positional_embedding_res"][:100]
    torch.save({k: torch.from_numpy(v) for k, v in state.items()}, tmp_path / "bad.pt")
    with pytest.raises(
        MetricError, match=r"model=.*bad\.pt.*positional_embedding_res \(100, 128\) does not fit"
    ):
        capmetrics.score(
            _longclip_dataset(LONG["rows"][:1]), [f'clip-score(model="{tmp_path / "bad.pt"}")']
        )


# ---------------------------------------------------------------- token counts in the warning
def test_the_warning_counts_captions_and_tokens_with_clips_own_tokenizer(ckpts):
    long_a, long_b, short = "a dog " * 40, "a red bus on a street. " * 12, "A dog."
    cands = [long_a, short, long_b, long_a]  # distinct texts count once
    counts = [_tokens(t) for t in cands]
    assert counts[0] > 77 and counts[2] > 77 and counts[1] <= 77
    cut = [counts[0], counts[2]]
    expected = (
        f"clip-score: 2 of 3 distinct captions longer than 77 tokens were cut (up to {max(cut)} "
        f"tokens; {sum(n - 77 for n in cut)} tokens dropped in all; prompt, start and end tokens "
        "counted)"
    )
    data = _dataset(
        [
            ("a", "images/astronaut.jpg", cands[:2], ["A woman."]),
            ("b", "images/chelsea.jpg", cands[2:], [long_b]),
        ]
    )
    _, messages = _score(data, f'clip-score(model="{ckpts["clip"]}")')
    assert sum(m.startswith(expected) for m in messages) == 1, messages
    # ref-clip-score counts the references too: "A woman." is one more; long_b is already counted
    _, messages = _score(data, f'ref-clip-score(model="{ckpts["clip"]}")')
    expected = (
        "ref-clip-score: 2 of 4 distinct captions longer than 77 tokens were cut "
        f"(up to {max(cut)} tokens; {sum(n - 77 for n in cut)} tokens dropped in all;"
    )
    assert sum(m.startswith(expected) for m in messages) == 1, messages
    with pytest.raises(
        MetricError,
        match=re.escape(
            f"2 caption(s) are longer than the 77 tokens the text tower "
            f"takes (with the prompt; up to {max(cut)} tokens)"
        ),
    ):
        capmetrics.score(data, [f'clip-score(model="{ckpts["clip"]}", truncate=false)'])


# ---------------------------------------------------------------- long=chunk
CHUNKED = [  # (caption, its sentences as written by hand)
    (
        "A woman in an orange suit smiles. She holds a white helmet! Is that a flag behind her?",
        [
            "A woman in an orange suit smiles.",
            "She holds a white helmet!",
            "Is that a flag behind her?",
        ],
    ),
    ("A cat sits on a chair.", ["A cat sits on a chair."]),
    ('He says "hello." Then he waves.  ', ['He says "hello."', "Then he waves."]),
    ("", [""]),
]


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def test_chunked_clip_score_is_the_mean_of_unit_sentence_features_renormalised(ckpts):
    from capmetrics.plugins.clip_score.model import ClipModel

    model = ClipModel(ckpts["clip"])
    images = [
        "images/astronaut.jpg",
        "images/chelsea.jpg",
        "images/coffee.jpg",
        "images/rocket.jpg",
    ]
    data = _dataset(
        [(f"i{k}", im, [c], ["x"]) for k, (im, (c, _)) in enumerate(zip(images, CHUNKED))]
    )
    values, messages = _score(data, f'clip-score(model="{ckpts["clip"]}", long=chunk)')
    expected, unnormalised, weighted = [], [], []
    for image, (_, parts) in zip(images, CHUNKED):
        unit = _unit(model.embed_texts([PROMPT + p for p in parts]))
        img = _unit(model.embed_images([str(CLIP_DATA / image)])[0])
        expected.append(2.5 * max(float(img @ _unit(unit.mean(axis=0))), 0.0))
        unnormalised.append(2.5 * max(float(img @ unit.mean(axis=0)), 0.0))
        sizes = np.array([_tokens(p) for p in parts], dtype=float)
        weighted.append(2.5 * max(float(img @ _unit(sizes @ unit / sizes.sum())), 0.0))
    # the same model outputs, batched differently: float32 noise only
    np.testing.assert_allclose(values, expected, rtol=0, atol=1e-6)
    # the rule is the documented one: other ways of combining are far off
    assert abs(values[0] - unnormalised[0]) > 1e-2 and abs(values[0] - weighted[0]) > 1e-4
    assert len(set(np.round(values, 4))) == 4 and not [m for m in messages if "were cut" in m]
    # a one-sentence caption is embedded as CLIP-S embeds it: the same number
    plain, _ = _score(data, f'clip-score(model="{ckpts["clip"]}")')
    assert values[1] == pytest.approx(plain[1], abs=1e-6) and abs(values[0] - plain[0]) > 1e-3


def test_chunked_ref_clip_score_chunks_candidates_and_references(ckpts):
    from capmetrics.plugins.clip_score.model import ClipModel

    model = ClipModel(ckpts["clip"])
    cand, cand_parts = CHUNKED[0]
    refs = [CHUNKED[2], CHUNKED[1]]
    data = _dataset([("a", "images/astronaut.jpg", [cand], [r for r, _ in refs])])
    values, _ = _score(data, f'ref-clip-score(model="{ckpts["clip"]}", long=chunk)')

    def feature(parts: list[str]) -> np.ndarray:
        return _unit(_unit(model.embed_texts([PROMPT + p for p in parts])).mean(axis=0))

    c = feature(cand_parts)
    a = 2.5 * max(
        float(_unit(model.embed_images([str(CLIP_DATA / "images/astronaut.jpg")])[0]) @ c), 0.0
    )
    b = max(float(feature(parts) @ c) for _, parts in refs)
    assert values[0] == pytest.approx(2 * a * b / (a + b), abs=1e-6)


def test_a_sentence_over_the_context_is_packed_into_word_pieces_that_fit(ckpts):
    from capmetrics.plugins.clip_score.metrics import ClipScore

    metric = ClipScore(ckpts["clip"], long="chunk")
    sentence = " ".join(f"word{k} and" for k in range(60))  # one sentence, ~180 tokens
    assert _tokens(sentence) > 2 * 77
    pieces = metric.chunks(sentence + ". A dog.")
    assert pieces[-1] == PROMPT + "A dog."
    body = [p[len(PROMPT) :] for p in pieces[:-1]]
    assert len(body) >= 3 and " ".join(body) == sentence + "."
    assert all(_tokens(p) <= 77 for p in body)
    words = sentence.split()
    start = 0
    for piece in body[:-1]:  # each piece is as long as it can be: one more word would not fit
        n = len(piece.split())
        assert _tokens(" ".join(words[start : start + n + 1])) > 77
        start += n
    data = _dataset([("a", "images/astronaut.jpg", [sentence + ". A dog."], ["x"])])
    _, messages = _score(data, f'clip-score(model="{ckpts["clip"]}", long=chunk)')
    assert not [m for m in messages if "were cut" in m]


def test_the_signature_names_the_mode_and_chunk_is_never_the_default(ckpts):
    data = _dataset([("a", "images/astronaut.jpg", ["A dog."], ["x"])])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = capmetrics.score(
            data,
            [
                f'clip-score(model="{ckpts["clip"]}")',
                f'clip-score(model="{ckpts["clip"]}", long=chunk)',
            ],
        )
    default, chunk = (m.signature for m in res.metrics)
    assert default["long"] == "truncate"
    assert (
        chunk["long"].startswith("chunk: sentences")
        and "mean of the pieces' unit features" in chunk["long"]
    )
    with pytest.raises(Exception, match="long"):
        capmetrics.score(data, [f'clip-score(model="{ckpts["clip"]}", long=whole)'])


class _NoCounts(capmetrics.ImageTextModel):
    """A model that says which texts it cuts (over 40 characters) but counts no tokens."""

    name = "no-counts-toy"

    def embed_images(self, images):
        return np.ones((len(images), 3))

    def embed_texts(self, texts):
        return np.array([[len(t), t.count("a") + 1, 1.0] for t in texts], dtype=float).reshape(
            len(texts), 3
        )

    def overlong(self, texts):
        return [i for i, t in enumerate(texts) if len(t) > 40]


def test_a_model_that_counts_no_tokens_gets_the_caption_count_only():
    from capmetrics.plugins.clip_score.metrics import ClipScore

    metric = ClipScore(_NoCounts())
    cands = ["a cat", "a cat sitting on a very long and winding road", "a cat"]
    with pytest.warns(UserWarning) as record:
        metric.score_images(cands, [[]] * 3, [None] * 3)
    messages = [str(w.message) for w in record]
    assert messages[0].startswith(
        "clip-score: 1 of 2 distinct captions longer than the text tower takes "
        "(with the prompt) were cut, "
    )
    # long=chunk splits sentences without a token count; the pieces' features are averaged
    chunked = ClipScore(_NoCounts(), long="chunk")
    assert chunked.chunks("A cat. A dog!") == [PROMPT + "A cat.", PROMPT + "A dog!"]
    feats, _ = chunked.text_features(["A cat. A dog!"])
    parts = _unit(_NoCounts().embed_texts([PROMPT + "A cat.", PROMPT + "A dog!"]))
    np.testing.assert_allclose(feats[0], _unit(parts.mean(axis=0)), atol=1e-15)


def test_chunk_mode_cuts_a_word_longer_than_a_piece_with_the_warning_or_refuses_it(ckpts):
    word = "x" * 400  # one "word" of CLIP's BPE far over 77 tokens
    n = _tokens(word)
    assert n > 77
    data = _dataset([("a", "images/astronaut.jpg", [f"A dog. {word}"], ["x"])])
    _, messages = _score(data, f'clip-score(model="{ckpts["clip"]}", long=chunk)')
    expected = (
        "clip-score: 1 of 2 distinct caption pieces longer than 77 tokens were cut "
        f"(up to {n} tokens; {n - 77} tokens dropped in all;"
    )
    assert sum(m.startswith(expected) for m in messages) == 1, messages
    with pytest.raises(
        MetricError, match=r"1 piece\(s\) of a sentence are longer than the text tower"
    ):
        capmetrics.score(data, [f'clip-score(model="{ckpts["clip"]}", long=chunk, truncate=false)'])
