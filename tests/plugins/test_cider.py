"""CIDEr-D and CIDEr: the ALGORITHMS.md §3.5 test vector, document-frequency sources (corpus,
fit, file), pairwise, edge cases, and exact parity with pycocoevalcap's ``Cider`` on
Flickr8k-Expert and Flickr8k-CF."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from capmetrics.errors import MetricError
from capmetrics.plugins import ngram
from capmetrics.plugins.ngram.cider import Cider, CiderD
from capmetrics.plugins.tokenizers import WhitespaceTokenizer

from tests.plugins import coco_reference as cr

WS = WhitespaceTokenizer()
globals().update(cr.coco_parity_tests(lambda: CiderD(tokenizer=WS), "cider"))


def plain_cider(candidate: str, references: list[str], corpus: list[list[str]]) -> float:
    """Vedantam et al.'s CIDEr × 10, written out directly (df over ``corpus``'s reference sets)."""

    def grams(text: str, n: int) -> Counter:
        words = text.split()
        return Counter(tuple(words[i : i + n]) for i in range(len(words) - n + 1))

    def tfidf(text: str, n: int, df: Counter) -> dict[tuple[str, ...], float]:
        log_n = math.log(len(corpus))
        return {g: c * (log_n - math.log(max(1, df[g]))) for g, c in grams(text, n).items()}

    def norm(vec: dict[tuple[str, ...], float]) -> float:
        return math.sqrt(sum(v * v for v in vec.values()))

    total = 0.0
    for n in range(1, 5):
        df = Counter(g for refs in corpus for g in set().union(*(grams(r, n) for r in refs)))
        c = tfidf(candidate, n, df)
        for r in (tfidf(ref, n, df) for ref in references):
            dot = sum(v * r.get(g, 0.0) for g, v in c.items())
            total += dot / (norm(c) * norm(r)) if norm(c) * norm(r) else dot
    return 10 * total / 4 / len(references)


def test_vector() -> None:
    metric = CiderD(tokenizer=WS)
    scores = metric.score(cr.RES, cr.GTS)
    # pycocoevalcap's numbers to the last bit
    assert scores.corpus == 2.5790625766259514
    assert scores.values.tolist() == [3.8695643258460244, 1.8447534087912678, 2.022869995240562]
    two = metric.score(cr.RES[:2], cr.GTS[:2])  # the IDF changes with the corpus
    assert two.corpus == 2.972811448093891
    assert two.values.tolist() == [4.200455003174463, 1.7451678930133188]


def test_single_item_with_corpus_df_warns_and_scores_zero() -> None:
    with pytest.warns(UserWarning, match="single item is always 0"):
        scores = CiderD(tokenizer=WS).score(cr.RES[:1], cr.GTS[:1])
    assert scores.values.tolist() == [0.0] and scores.corpus == 0.0


def test_registers_both_variants() -> None:
    names: list[str] = []
    ngram.register_distances(lambda cls, aliases=(): names.append(cls.name))
    assert names[-2:] == ["cider-d", "cider-original"]
    assert CiderD.distance_offset == Cider.distance_offset == 10.0


def test_plain_cider_is_the_tfidf_cosine() -> None:
    scores = Cider(tokenizer=WS).score(cr.RES, cr.GTS)
    expected = [plain_cider(c, r, cr.GTS) for c, r in zip(cr.RES, cr.GTS)]
    np.testing.assert_allclose(scores.values, expected, rtol=1e-12)


@cr.needs_coco
@pytest.mark.parametrize("seed", [0, 1])
def test_random_captions_match_coco(seed: int) -> None:
    cr.assert_matches_coco(
        CiderD(tokenizer=WS), "cider", *cr.random_captions(seed, 300, 25, vocab="abcdef")
    )


def test_fit_on_the_same_references_equals_corpus_df() -> None:
    fitted = CiderD(tokenizer=WS).fit(cr.GTS)
    assert (
        fitted.n_images_ == 3
        and fitted.df_["a"] == 2
        and fitted.df_["snow"] == 1
        and fitted.df_["a man is"] == 1
    )
    np.testing.assert_allclose(
        fitted.score(cr.RES, cr.GTS).values,
        CiderD(tokenizer=WS).score(cr.RES, cr.GTS).values,
        rtol=1e-14,
    )
    # fixed df: a single item no longer degenerates
    assert fitted.score(cr.RES[:1], cr.GTS[:1]).values[0] == pytest.approx(
        3.8695643258460244, rel=1e-13
    )


@pytest.mark.parametrize("suffix", [".json", ".json.gz"])
def test_saved_df_file_gives_the_fitted_scores(tmp_path: Path, suffix: str) -> None:
    fitted = CiderD(tokenizer=WS).fit(cr.GTS)
    path = tmp_path / f"df{suffix}"
    fitted.save_df(path)
    from_file = CiderD(tokenizer=WS, df=str(path))
    np.testing.assert_array_equal(
        from_file.score(cr.RES, cr.GTS).values, fitted.score(cr.RES, cr.GTS).values
    )
    np.testing.assert_array_equal(
        from_file.pairwise(cr.RES, cr.GTS[0]), fitted.pairwise(cr.RES, cr.GTS[0])
    )
    assert from_file.signature()["df"].startswith("sha256:")


def test_bad_df_file_and_unfitted_save_raise(tmp_path: Path) -> None:
    path = tmp_path / "df.json"
    path.write_text(json.dumps({"a": 1}))
    with pytest.raises(MetricError, match="not a capmetrics CIDEr df file"):
        CiderD(tokenizer=WS, df=str(path)).score(cr.RES, cr.GTS)
    with pytest.raises(MetricError, match="cannot read the df file"):
        CiderD(tokenizer=WS, df=str(tmp_path / "missing.json")).score(cr.RES, cr.GTS)
    with pytest.raises(MetricError, match="call fit"):
        CiderD(tokenizer=WS).save_df(path)


@pytest.mark.parametrize("cls", [CiderD, Cider])
def test_pairwise_needs_fixed_df_and_scores_each_pair_alone(cls: type[CiderD]) -> None:
    with pytest.raises(MetricError, match="need fixed document frequencies"):
        cls(tokenizer=WS).pairwise(cr.RES, cr.GTS[0])
    metric = cls(tokenizer=WS).fit(cr.GTS)
    a, b = cr.RES + [""], cr.GTS[0] + [cr.RES[0]]
    expected = np.array([[metric.score([x], [[y]]).values[0] for y in b] for x in a])
    np.testing.assert_allclose(metric.pairwise(a, b), 10.0 - expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose(
        metric.pairwise_scores(a, [[y] for y in a]), np.diag(10.0 - metric.pairwise(a, a))
    )
    assert metric.pairwise(cr.RES[:1], cr.RES[:1])[0, 0] == pytest.approx(
        0.0, abs=1e-12
    )  # d(x, x) = 0


def test_empty_and_unseen_candidates_score_zero() -> None:
    scores = CiderD(tokenizer=WS).score(
        ["", "zebra zebra"] + cr.RES, [cr.GTS[0], cr.GTS[1]] + cr.GTS
    )
    assert scores.values[:2].tolist() == [0.0, 0.0]


def test_fixed_df_lookup_equals_the_table_for_every_ngram() -> None:
    """The integer-keyed look-up gives each n-gram its df, and 0 to n-grams with an unknown word
    anywhere (first: its key must not read as the shorter n-gram after it), as the strings do."""
    from capmetrics.plugins.ngram.cider import DfIndex
    from capmetrics.plugins.ngram.counts import make_batch, ngrams

    df = {"a": 3, "dog": 2, "a dog": 2, "dog runs": 1, "a dog runs": 1, "runs": 1, "the": 5}
    cands = ["zebra dog runs", "a dog runs fast", "zebra zebra a dog", "dog a the"]
    batch = make_batch(WS, cands, [["x"]] * len(cands), str.split, "test")
    tables = ngrams(batch.sentences, 4)
    want = [df.get(g, 0) for t in tables for g in t.strings(batch.sentences)]
    index = DfIndex(df)
    assert index.exact and index.lookup(batch.sentences, tables).tolist() == want
    index.exact = False  # the string look-up of vocabularies too large for int64 keys
    assert index.lookup(batch.sentences, tables).tolist() == want


def test_the_index_built_by_fit_looks_up_what_the_index_of_the_strings_does() -> None:
    from capmetrics.plugins.ngram.cider import MAX_N, DfIndex
    from capmetrics.plugins.ngram.counts import make_batch, ngrams

    refs = cr.random_captions(3, 200, 6)[1]
    fitted = CiderD(tokenizer=WS).fit(refs)
    table, index = fitted._index
    assert table is fitted.df_ and index.exact
    plain = DfIndex(fitted.df_)
    cands = [r[0] for r in refs] + ["a zz b c", "q"]  # words the table does not have
    batch = make_batch(WS, cands, refs + [["a"], ["b"]], CiderD.split, "cider-d")
    tables = ngrams(batch.sentences, MAX_N)
    got, want = index.lookup(batch.sentences, tables), plain.lookup(batch.sentences, tables)
    assert (
        got.dtype == want.dtype
        and np.array_equal(got, want)
        and (got > 0).any()
        and (got == 0).any()
    )
    parts = CiderD(tokenizer=WS).fit_states([CiderD(tokenizer=WS).fit_state(refs)])
    assert not hasattr(parts, "_index")  # built from the strings when first needed
    assert (
        parts.score(cands, refs + [["a"], ["b"]]).values.tobytes()
        == fitted.score(cands, refs + [["a"], ["b"]]).values.tobytes()
    )


def test_a_pickled_fitted_cider_d_sends_its_index_not_its_strings(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Workers get the fitted df as the exact index alone: same scores and signature, and the
    strings, read back from the keys when asked for, equal the fitted table."""
    import pickle

    from capmetrics.plugins.ngram.cider import IndexedDf

    refs = cr.random_captions(5, 300, 6)[1]
    fitted = CiderD(tokenizer=WS).fit(refs)
    cands = [r[0] for r in refs] + ["a zz b c"]
    payload = pickle.dumps(fitted)
    copy = pickle.loads(payload)
    assert (
        isinstance(copy.df_, IndexedDf) and copy._index[0] is copy.df_ and copy._index[1].df is None
    )
    four_grams = [g for g in fitted.df_ if g.count(" ") == 3]
    assert four_grams and not any(
        g.encode() in payload for g in four_grams[:50]
    )  # no n-gram string sent
    assert (
        copy.score(cands, refs + [["a"]]).values.tobytes()
        == fitted.score(cands, refs + [["a"]]).values.tobytes()
    )
    assert copy.df_._strings is None  # scoring never decoded the strings
    assert copy.signature_extra() == fitted.signature_extra()
    assert dict(copy.df_) == fitted.df_ and len(copy.df_) == len(fitted.df_) > 500
    copy.save_df(tmp_path / "copy.json")
    fitted.save_df(tmp_path / "fitted.json")
    assert json.loads((tmp_path / "copy.json").read_text()) == json.loads(
        (tmp_path / "fitted.json").read_text()
    )
    again = pickle.loads(pickle.dumps(copy))  # an unpickled one pickles the same way
    assert (
        again.score(cands, refs + [["a"]]).values.tobytes()
        == fitted.score(cands, refs + [["a"]]).values.tobytes()
    )


def test_fitted_df_digest_spelled_out_on_a_tiny_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """The signature's df digest: SHA-256 of the JSON [images, sorted words], then per order
    the n-grams as rows of word ranks, sorted, and their counts (little-endian int64)."""
    import hashlib

    from capmetrics.plugins.ngram.cider import _df_digest

    fitted = CiderD(tokenizer=WS).fit([["b a"], ["a"], ["b"]])
    assert dict(fitted.df_) == {"a": 2, "b": 2, "b a": 1}
    i8 = lambda values: np.array(values, dtype="<i8").tobytes()  # noqa: E731
    expected = hashlib.sha256(
        json.dumps([3, ["a", "b"]]).encode()
        + b"|1:2|"
        + i8([1, 2])
        + i8([2, 2])
        + b"|2:1|"
        + i8([2, 1])
        + i8([1])
    ).hexdigest()
    assert _df_digest(fitted.df_, 3) == expected
    assert fitted.signature_extra() == {"df": f"fitted:{expected[:16]}"}
    assert _df_digest({"a": 2, "b": 2, "b a": 1}, 3) == expected  # a string table: the same value
    from capmetrics.plugins.ngram import dfcounts

    monkeypatch.setattr(dfcounts, "fits_int64", lambda *a: False)  # rows sorted column by column
    assert _df_digest(fitted.df_, 3) == _df_digest({"a": 2, "b": 2, "b a": 1}, 3) == expected
    monkeypatch.undo()
    assert _df_digest({"a": 2, "b": 2, "b a": 2}, 3) != expected
    assert _df_digest({"a": 2, "b": 2, "a b": 1}, 3) != expected
    assert _df_digest({"a": 2, "b": 2, "b a": 1}, 4) != expected


def test_fitting_in_parts_gives_the_whole_fit_however_it_was_counted() -> None:
    """Parts counted as integer keys (each with its own vocabulary) and summed give the table,
    the look-ups and the digest of fitting whole; so does the string form (fit_state)."""
    import pickle

    sample = (
        Path(__file__).resolve().parents[2] / "core" / "sample" / "flickr8k_expert_sample.jsonl"
    )
    items = [json.loads(line) for line in sample.read_text().splitlines()]
    refs = [item["references"] for item in items] * 2 + [["a cat\u2028on a mat", '日本 の "猫"']]
    cands = [item["candidates"][0] for item in items]
    whole = CiderD().fit(refs)
    parts = CiderD().fit_counts(
        [CiderD().count_state(refs[a:b]) for a, b in ((0, 7), (7, 30), (30, len(refs)))]
    )
    strings = CiderD().fit_states([CiderD().fit_state(refs[:13]), CiderD().fit_state(refs[13:])])
    copy = pickle.loads(pickle.dumps(parts))
    table = dict(whole.df_)
    assert len(table) > 500 and dict(parts.df_) == table == strings.df_ == dict(copy.df_)
    assert whole.n_images_ == parts.n_images_ == strings.n_images_ == len(refs)
    sig = whole.signature_extra()
    assert parts.signature_extra() == strings.signature_extra() == copy.signature_extra() == sig
    values = whole.score(cands, refs[: len(cands)]).values
    for other in (parts, strings, copy):
        assert other.score(cands, refs[: len(cands)]).values.tobytes() == values.tobytes()


def test_tables_too_large_for_integer_keys_fall_back_to_strings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Over ~55,000 distinct words the keys would overflow int64: a part comes back as its string
    table, and parts whose words together overflow are summed as strings; the same table, digest
    and scores either way."""
    from capmetrics.plugins.ngram import cider, dfcounts

    refs = [["a cat on a mat", "the dog sat"], ["a dog on a log"], ["x y z w v", "a cat"]]
    cands = ["a cat on a log", "the dog", "x y z"]
    whole = CiderD(tokenizer=WS).fit(refs)
    parts = [CiderD(tokenizer=WS).count_state(refs[:2]), CiderD(tokenizer=WS).count_state(refs[2:])]
    monkeypatch.setattr(
        dfcounts, "fits_int64", lambda *a: False
    )  # the parts' words together overflow
    summed = CiderD(tokenizer=WS).fit_counts(parts)
    monkeypatch.setattr(cider, "fits_int64", lambda *a: False)  # one part's words overflow
    state = CiderD(tokenizer=WS).count_state(refs)
    assert isinstance(state, tuple) and isinstance(state[0], dict)
    strings = CiderD(tokenizer=WS).fit_counts([state])
    for other in (summed, strings):
        assert isinstance(other.df_, dict) and other.df_ == dict(whole.df_)
        assert other.signature_extra() == whole.signature_extra()
        assert (
            other.score(cands, refs).values.tobytes() == whole.score(cands, refs).values.tobytes()
        )


def test_fitting_no_parts_gives_the_empty_table_as_the_string_form_does() -> None:
    none = CiderD(tokenizer=WS).fit_counts([])
    strings = CiderD(tokenizer=WS).fit_states([])
    assert dict(none.df_) == strings.df_ == {} and none.n_images_ == strings.n_images_ == 0
    assert none.signature_extra() == strings.signature_extra()
