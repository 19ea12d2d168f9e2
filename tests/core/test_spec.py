from __future__ import annotations

import capmetrics
import pytest
from capmetrics import SpecError, SpecSyntaxError, UnknownComponentError
from capmetrics.registry.spec import Spec, format_value, parse


def test_parse_nested_spec_with_every_value_type():
    spec = parse(
        "trm(distance=cider-d(sigma=6.5), n=-3, eps=1e-3, on=true, off=none, "
        'path="a b\\"c", words=[x, 2, "y"], pos=false)'
    )
    assert spec.name == "trm"
    args = dict(spec.args)
    assert args["distance"] == Spec("cider-d", (("sigma", 6.5),), called=True)
    assert args["n"] == -3 and isinstance(args["n"], int)
    assert args["eps"] == 0.001
    assert args["on"] is True and args["off"] is None and args["pos"] is False
    assert args["path"] == 'a b"c'
    assert args["words"] == [Spec("x"), 2, "y"]


def test_positional_argument_binds_first():
    spec = parse("pregen(mean_max_normcount_prefix0)")
    assert spec.args == ((None, Spec("mean_max_normcount_prefix0")),)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("trm(distance=meteor", "expected ')', found end of spec at column 20"),
        ("mean(", "expected a value, found end of spec at column 6"),
        ("mean)", "unexpected ')' after the spec at column 5"),
        ("(x)", "expected a name, found '(' at column 1"),
        ("a(x=1, x=2)", "parameter 'x' given twice at column 8"),
        ("a(x=1, 2)", "a positional argument must come first at column 8"),
        ('a(p="open)', "unterminated string at column 5"),
    ],
)
def test_syntax_errors_point_at_the_column(text, message):
    with pytest.raises(SpecSyntaxError) as info:
        parse(text)
    assert message in str(info.value)
    assert str(info.value).splitlines()[1].strip() == text


def test_caret_under_the_problem():
    with pytest.raises(SpecSyntaxError) as info:
        parse("trm(distance=meteor")
    lines = str(info.value).splitlines()
    assert lines[2].index("^") == lines[1].index("r", 15) + 1


@pytest.mark.parametrize(
    "value",
    [
        1,
        -2,
        0.5,
        1e-12,
        True,
        False,
        None,
        "mean",
        "two words",
        'q"uote',
        "true",
        "",
        [1, "a b", [2.5]],
    ],
)
def test_values_round_trip(value):
    assert parse(f"f(v={format_value(value)})").args[0][1] in (
        value,
        Spec(value) if isinstance(value, str) else value,
    )


@pytest.mark.parametrize(
    "text",
    [
        "mean",
        "over-candidates(distance=bleu-4)",
        "over-candidates(distance=bleu-4, reduce=max)",
        "whitespace(lowercase=true)",
        "over-candidates(distance=bleu-2(tokenizer=whitespace(lowercase=true)), reduce=geomean)",
    ],
)
def test_specs_round_trip_through_components(text):
    component = capmetrics.compose(text)
    assert component.spec == text
    again = capmetrics.compose(component.spec)
    assert again == component and again.spec == text


def test_defaults_are_left_out_and_underscores_equal_dashes():
    assert (
        capmetrics.compose("over_candidates(distance=bleu_4, reduce=mean)").spec
        == "over-candidates(distance=bleu-4)"
    )


def test_unknown_name_gets_did_you_mean_and_the_list():
    with pytest.raises(UnknownComponentError) as info:
        capmetrics.compose("over-candidates(distance=bleu-5)")
    msg = str(info.value)
    assert msg == (
        "unknown distance 'bleu-5' in spec 'over-candidates(distance=bleu-5)'; did you mean "
        "bleu-4? (`capmetrics plugins` lists them all)"
    )  # one line when a name is close
    with pytest.raises(UnknownComponentError) as info:
        capmetrics.compose("over-candidates(distance=xyzzy)")
    assert "Available distances: bertscore, bleu-1, bleu-2, bleu-3, bleu-4" in str(info.value)


def test_wrong_parameter_lists_accepted_ones():
    with pytest.raises(SpecError) as info:
        capmetrics.compose("over-candidates(distanc=bleu-4)")
    msg = str(info.value)
    assert "over-candidates() got an unexpected parameter 'distanc'" in msg
    assert "Did you mean 'distance'?" in msg
    assert (
        "over-candidates accepts: distance (Distance, required), reduce (Aggregator, default mean)"
        in msg
    )


def test_wrong_value_type_and_missing_parameter():
    with pytest.raises(
        SpecError, match="parameter 'lowercase' of whitespace.* must be bool, got 1"
    ):
        capmetrics.compose("whitespace(lowercase=1)")
    with pytest.raises(SpecError, match="missing the required parameter\\(s\\) 'distance'"):
        capmetrics.compose("over-candidates")
    with pytest.raises(SpecError, match="must name a aggregator, got 3"):
        capmetrics.compose("over-candidates(distance=bleu-4, reduce=3)")


def test_kind_restricts_lookup():
    with pytest.raises(UnknownComponentError, match="unknown distance 'mean'"):
        capmetrics.compose("mean", "distance")


def test_compose_with_python_values_and_components():
    reduce = capmetrics.compose("max")
    stat = capmetrics.compose("over-candidates", distance="bleu-4", reduce=reduce)
    assert stat.spec == "over-candidates(distance=bleu-4, reduce=max)"


def test_no_eval(tmp_path):
    with pytest.raises(SpecSyntaxError):
        parse("__import__('os').system('echo hi')")
