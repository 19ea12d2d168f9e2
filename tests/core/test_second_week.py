"""Issue 39 ("The second week"): each row of the issue's table that this file owns, played as a
user would: the CLI in a subprocess, a pseudo-terminal where the terminal matters, the Python
API as it is called in a notebook. (doctor/plugins readiness, the self-critical and torchmetrics
rows and COCOEvalCap without SPICE are tested next to their code.)"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

import capmetrics
from capmetrics.strict_json import dumps, loads_strict
from tests.conftest import SAMPLE
from tests.core.test_first_contact import run_cli

CANDIDATES = ["a dog runs on the grass", "a man rides a bike"]
REFERENCES = [["a dog is running on the grass", "a brown dog runs"],
              ["a man is riding a bicycle", "a cyclist on a road"]]


@pytest.fixture(scope="module")
def results() -> capmetrics.Results:
    return capmetrics.score(candidates=CANDIDATES, references=REFERENCES, metrics=["bleu-1", "cider-d"])


# -- a MetricResult is its corpus value where a number is expected ------------------------------
def test_a_result_formats_rounds_compares_and_computes_as_its_corpus_value(results) -> None:
    r, b = results["CIDEr"], results["Bleu_1"]
    x, y = float(r.corpus), float(b.corpus)
    assert f"{r:.4f}" == f"{x:.4f}" and f"{r:>10.2e}" == f"{x:>10.2e}"
    assert round(r, 3) == round(x, 3) and round(r) == round(x) and isinstance(round(r), int)
    assert (r > 0.5) == (x > 0.5) and (r <= x) and (r >= x) and not (r < x) and (0.5 < r) == (x > 0.5)
    assert 2 * r == 2 * x and r * 2 == 2 * x and type(2 * r) is float
    assert r + b == x + y and r - b == x - y and 1 - r == 1 - x and r / 2 == x / 2 and 1 / r == 1 / x
    assert -r == -x and abs(r) == abs(x) and r ** 2 == x ** 2 and math.floor(r) == math.floor(x)
    assert sum(results.values()) == x + y and max(results.values()) is (r if x > y else b)
    assert sorted([r, b]) == sorted([r, b], key=float) and np.isclose(np.mean([r, b]), (x + y) / 2)
    assert math.log(r) == math.log(x) and np.float64(2) * r == 2 * x


def test_a_result_equals_and_hashes_as_its_corpus_value(results) -> None:
    r = results["cider-d"]
    x = float(r.corpus)
    assert r == x and x == r and r == np.float64(x) and r != x + 1
    assert hash(r) == hash(x) and {r: "a"}[x] == "a"  # equal objects hash alike
    again = capmetrics.score(candidates=CANDIDATES, references=REFERENCES, metrics=["cider-d"])["cider-d"]
    assert again == r and hash(again) == hash(r) and again is not r
    assert r != results["bleu-1"] and r != "cider-d" and len({r, again}) == 1
    assert f"{r}" == repr(r)  # no format spec: the repr, as before


# -- one-line errors that say what to do ----------------------------------------------------------
@pytest.mark.parametrize("name", ["bleu", "Bleu"])
def test_an_unknown_metric_close_to_one_is_one_line_naming_it(name: str) -> None:
    proc = run_cli("score", SAMPLE, "-m", name)
    assert proc.returncode == 2
    assert proc.stderr == (f"Error: unknown metric {name!r}; did you mean bleu-4? "
                           "(`capmetrics plugins` lists them all)\n")


def test_pycocoevalcaps_argument_order_gets_a_hint() -> None:
    gts = {"1": REFERENCES[0], "2": REFERENCES[1]}
    res = {"1": [CANDIDATES[0]], "2": [CANDIDATES[1]]}
    with pytest.raises(TypeError, match=r"takes the data first, then the metrics: "
                                        r"score\(candidates=res, references=gts"):
        capmetrics.score(gts, res)
    assert float(capmetrics.score(candidates=res, references=gts, metrics="cider-d")["cider-d"]) == \
        float(capmetrics.score(candidates=CANDIDATES, references=REFERENCES, metrics="cider-d")["cider-d"])


def test_a_string_of_candidates_is_refused_saying_what_to_give() -> None:
    with pytest.raises(TypeError, match=r"candidates must be a list .* got the string 'a dog': give "
                                        r"candidates=\['a dog'\]"):
        capmetrics.score(candidates="a dog", references=[["a dog runs"]])


# -- results JSON: written by the json module -----------------------------------------------------
def test_results_json_is_the_json_of_the_results_dict(results, tmp_path: Path) -> None:
    text = results.to_json()
    assert loads_strict(text) == json.loads(dumps(results.to_json_dict()))
    assert '\n        {"id": 0, "value": ' in text  # one item a line
    results.write(tmp_path / "r.json")
    assert (tmp_path / "r.json").read_text(encoding="utf-8") == text
