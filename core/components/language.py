"""Text has a language: ``lang=`` / ``--lang`` picks the language's tokenizer for every metric
that takes one, leaves out of the default set what cannot serve the language, and refuses by
name a metric that works on English only. Also the check that warns when CJK text reaches a
tokenizer that leaves it unsegmented (every caption one "word").

A component declares the languages it serves with its ``languages`` class attribute
(``("en",)`` for one that parses English; ``None``, the default, for any). A parameter
annotated with :class:`~capmetrics.components.base.Tokenizer` is where the language's tokenizer
goes.
"""

from __future__ import annotations

import re
import typing
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, overload

from capmetrics.components.base import (
    KIND_BASES,
    METRIC_KINDS,
    Component,
    init_hints,
    union_args,
)
from capmetrics.components.spec import Spec, normalize_name, parse
from capmetrics.errors import MetricError, SpecError, UnknownComponentError, did_you_mean


@dataclass(frozen=True)
class Language:
    """A language ``lang=`` accepts: its code, its name and the tokenizer spec it picks
    (``None``: the metrics' own defaults, coco-caption's PTB tokenizer)."""

    code: str
    name: str
    tokenizer: str | None


LANGUAGES: dict[str, Language] = {
    "en": Language("en", "English", None),
    "zh": Language("zh", "Chinese", "jieba"),
    "ja": Language("ja", "Japanese", "mecab"),
    "ko": Language("ko", "Korean", "kiwi"),
}
NORMALIZE = ("none", "nfkc")


def get_language(code: str) -> Language:
    """The :class:`Language` of ``code`` (``zh``; a region or script after ``-`` or ``_`` is
    ignored: ``zh-CN`` is ``zh``).

    Raises:
        SpecError: an unknown code, naming those accepted and the way to score other languages.
    """
    if not isinstance(code, str):
        raise SpecError(f"lang must be a language code such as 'zh', got {code!r}")
    key = code.strip().lower().replace("_", "-").split("-")[0]
    if key not in LANGUAGES:
        raise SpecError(
            f"unknown lang {code!r}.{did_you_mean(key, LANGUAGES)} Languages: "
            f"{', '.join(LANGUAGES)}; for another language give each metric a tokenizer, "
            "e.g. -m 'bleu-4(tokenizer=char)'"
        )
    return LANGUAGES[key]


def tokenizer_spec(language: Language, normalize: str | None = None) -> Spec | None:
    """The tokenizer spec ``language`` picks, with ``normalize`` when given."""
    if normalize not in (None, "none", "nfkc"):
        raise SpecError(f"unknown normalize {normalize!r}; use none or nfkc")
    if language.tokenizer is None:
        if normalize not in (None, "none"):
            raise SpecError(
                f"normalize={normalize} applies to the segmenter that lang picks; "
                f"lang {language.code!r} keeps coco-caption's PTB tokenizer, which has none"
            )
        return None
    if normalize in (None, "none"):
        return Spec(language.tokenizer)
    return Spec(language.tokenizer, (("normalize", normalize),), called=True)


# --------------------------------------------------------------------------------------------
# putting the language's tokenizer into specs
# --------------------------------------------------------------------------------------------
def _kinds(annotation: Any) -> tuple[str, ...]:
    return tuple(
        kind
        for o in union_args(annotation)
        for kind, base in KIND_BASES.items()
        if isinstance(o, type) and issubclass(o, base)
    )


class _Localizer:
    def __init__(self, tokenizer: Spec, definitions: Mapping[str, Spec] | None) -> None:
        from capmetrics.registry import get_registry

        self.tokenizer = tokenizer
        self.registry = get_registry()
        self.definitions = {normalize_name(k): v for k, v in (definitions or {}).items()}
        self.expanding: list[str] = []

    def spec(self, spec: Spec, kinds: tuple[str, ...] | None) -> Spec:
        definition = self.definitions.get(spec.key)
        if definition is not None and spec.key not in self.expanding and len(self.expanding) < 32:
            self.expanding.append(spec.key)
            try:
                return self.spec(
                    Spec(definition.name, definition.args + spec.args, called=True), kinds
                )
            finally:
                self.expanding.pop()
        try:
            cls = self.registry.lookup(spec.name, kinds).cls
        except UnknownComponentError:
            return spec  # compose reports it, with its suggestions
        params = cls.constructor_parameters()
        hints = init_hints(cls)
        args: list[tuple[str | None, Any]] = []
        given = set()
        for key, value in spec.args:
            name = key if key is not None else next(iter(params), None)
            given.add(name)
            hint = hints.get(name, Any) if name is not None else Any
            kinds_here = _kinds(hint) if name in params else ()
            args.append((key, self.value(value, kinds_here, hint)))
        for name, param in params.items():
            if name in given:
                continue
            kinds_here = _kinds(hints.get(name, Any))
            if "tokenizer" in kinds_here:
                args.append((name, self.tokenizer))
            elif kinds_here and isinstance(param.default, Component):
                default = parse(param.default.spec)
                local = self.spec(default, kinds_here)
                if local != default:
                    args.append((name, local))
        if args == list(spec.args):
            return spec
        return Spec(spec.name, tuple(args), called=True)

    def value(self, value: Any, kinds: tuple[str, ...], annotation: Any) -> Any:
        if not kinds:
            return value
        if isinstance(value, str):
            if str in typing.get_args(annotation):  # a quoted text (a path) stays text
                return value
            try:
                value = parse(value)
            except SpecError:
                return value
        if isinstance(value, Spec):
            return self.spec(value, kinds)
        return value


@overload
def localize(
    metric: str,
    lang: str,
    *,
    normalize: str | None = None,
    definitions: Mapping[str, Spec] | None = None,
) -> str: ...
@overload
def localize(
    metric: Spec,
    lang: str,
    *,
    normalize: str | None = None,
    definitions: Mapping[str, Spec] | None = None,
) -> str | Spec: ...
@overload
def localize(
    metric: Component,
    lang: str,
    *,
    normalize: str | None = None,
    definitions: Mapping[str, Spec] | None = None,
) -> Component: ...
def localize(
    metric: str | Spec | Component,
    lang: str,
    *,
    normalize: str | None = None,
    definitions: Mapping[str, Spec] | None = None,
) -> str | Spec | Component:
    """``metric`` with the tokenizer of ``lang`` given to every parameter annotated as a
    Tokenizer that the spec leaves at its default, nested specs and default nested components
    included. A tokenizer the spec names itself stays (and is checked by :func:`check_language`).
    A built component is returned as it is.

    >>> localize("over-candidates(distance=cider-d)", "zh")                       # doctest: +SKIP
    'over-candidates(distance=cider-d(tokenizer=jieba))'
    """
    tokenizer = tokenizer_spec(get_language(lang), normalize)
    if tokenizer is None or isinstance(metric, Component):
        return metric
    parsed = parse(metric) if isinstance(metric, str) else metric
    local = _Localizer(tokenizer, definitions).spec(parsed, METRIC_KINDS)
    if local == parsed:
        return metric if isinstance(metric, str) else str(metric)
    return str(local)


def _language_names(codes: Iterable[str]) -> str:
    return " or ".join(LANGUAGES[c].name if c in LANGUAGES else c for c in codes)


def refusing(component: Component, lang: str) -> Component | None:
    """The component (``component`` itself or one it wraps) whose ``languages`` leave ``lang``
    out, or None."""
    langs = getattr(component, "languages", None)
    if langs is not None and lang not in langs:
        return component
    for value in component.get_params().values():
        values = value if isinstance(value, (list, tuple)) else (value,)
        for v in values:
            if isinstance(v, Component):
                found = refusing(v, lang)
                if found is not None:
                    return found
    return None


def refusal(component: Component, lang: str, name: str) -> str | None:
    """The one-line reason ``name`` cannot score ``lang`` text, or None when it can."""
    code = get_language(lang).code
    found = refusing(component, code)
    if found is None:
        return None
    via = "" if found is component else f" (through its {found.kind} {found.name})"
    fix = "leave it out"
    params = found.get_params()
    if found.kind == "tokenizer" and LANGUAGES[code].tokenizer:
        fix = (
            f"give it tokenizer={LANGUAGES[code].tokenizer}, or leave the tokenizer out for "
            "lang to pick"
        )
    elif "model" in params or "path" in params:
        key = "model" if "model" in params else "path"
        fix = (
            f"give {found.name} a {key}= that serves {LANGUAGES[code].name} (a local model or "
            "file), or leave it out"
        )
    return (
        f"{name}{via}: {found.name} works on {_language_names(found.languages or ())} text only, "
        f"not {LANGUAGES[code].name} (lang {code!r}); {fix}"
    )


def check_language(component: Component, lang: str, name: str) -> None:
    """Raise a one-line MetricError when ``component`` (or one it wraps) cannot serve ``lang``."""
    reason = refusal(component, lang, name)
    if reason is not None:
        raise MetricError(reason)


def compose_metric(
    spec: str | Spec | Component,
    lang: str | None,
    *,
    normalize: str | None = None,
    definitions: Mapping[str, Spec] | None = None,
) -> Component:
    """``spec`` built as a metric; with ``lang``, given the language's segmenter and refused
    by name when it cannot serve the language (the one path of score() and the CLI)."""
    from capmetrics.registry.compose import METRIC_KINDS, compose

    if lang is None:
        return compose(spec, METRIC_KINDS, definitions=definitions)
    name = spec if isinstance(spec, str) else str(spec) if isinstance(spec, Spec) else spec.spec
    local = localize(spec, lang, normalize=normalize, definitions=definitions)
    component = compose(local, METRIC_KINDS, definitions=definitions)
    check_language(component, lang, name)
    return component


def default_metrics(
    defaults: Sequence[str], lang: str, *, definitions: Mapping[str, Spec] | None = None
) -> tuple[list[str], str | None]:
    """The default metric set for ``lang``: ``defaults`` less those that cannot serve it, and a
    note naming what was left out (None when nothing was)."""
    from capmetrics.registry.compose import METRIC_KINDS, compose

    language = get_language(lang)
    kept, dropped = [], []
    for spec in defaults:
        built = compose(
            localize(spec, lang, definitions=definitions), METRIC_KINDS, definitions=definitions
        )
        found = refusing(built, language.code)
        if found is None:
            kept.append(spec)
        else:
            dropped.append(
                f"{spec} ({found.name} works on {_language_names(found.languages or ())} text only)"
            )
    if not dropped:
        return kept, None
    tokenizer = f" with tokenizer {language.tokenizer}" if language.tokenizer else ""
    note = (
        f"lang {language.code}: scoring {', '.join(kept)}{tokenizer}; left out {'; '.join(dropped)}"
    )
    return kept, note


# --------------------------------------------------------------------------------------------
# the silent failure: CJK text through a tokenizer that does not segment it
# --------------------------------------------------------------------------------------------
#: Texts looked at per tokenized batch (the check must cost nothing next to the tokenizing).
SAMPLE = 200
#: Mean CJK characters per token above which CJK text counts as unsegmented (Chinese and
#: Japanese words are 1-3 characters; an unsegmented caption is one token of 10-20).
UNSEGMENTED_CHARS = 4.0
_SCRIPTS = (
    ("han", ((0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0x20000, 0x2FA1F))),
    ("kana", ((0x3040, 0x30FF), (0x31F0, 0x31FF), (0xFF66, 0xFF9F))),
    ("hangul", ((0x1100, 0x11FF), (0x3130, 0x318F), (0xAC00, 0xD7AF))),
)


def _char_class(ranges: tuple[tuple[int, int], ...]) -> str:
    return "".join(f"{chr(lo)}-{chr(hi)}" for lo, hi in ranges)


_SCRIPT_RE = {name: re.compile(f"[{_char_class(ranges)}]") for name, ranges in _SCRIPTS}
_CJK_RE = re.compile("[" + "".join(_char_class(ranges) for _, ranges in _SCRIPTS) + "]")
_WORD_RE = re.compile(r"[^\W_]")  # letters and digits of any script


def cjk_language(texts: Sequence[str]) -> str | None:
    """``zh``, ``ja`` or ``ko`` when most letters and digits of ``texts`` are CJK (kana
    present: Japanese; mostly Hangul: Korean; else Chinese), otherwise None."""
    joined = "".join(texts)
    if joined.isascii():  # the common case, at C speed
        return None
    cjk = len(_CJK_RE.findall(joined))
    if cjk == 0 or cjk * 2 <= len(_WORD_RE.findall(joined)):
        return None
    if len(_SCRIPT_RE["hangul"].findall(joined)) * 2 > cjk:
        return "ko"
    return "ja" if len(_SCRIPT_RE["kana"].findall(joined)) * 20 > cjk else "zh"


def _unsegmented(tokens: Sequence[Sequence[str]]) -> bool:
    lengths = [len(_CJK_RE.findall(tok)) for toks in tokens for tok in toks if not tok.isascii()]
    lengths = [n for n in lengths if n]
    return bool(lengths) and sum(lengths) / len(lengths) > UNSEGMENTED_CHARS


def segmentation_problem(
    tokenizer: Component, texts: Sequence[str], tokens: Sequence[Sequence[str]]
) -> str | None:
    """The warning for CJK ``texts`` that ``tokenizer`` leaves unsegmented, or None."""
    lang = cjk_language(texts[:SAMPLE])
    if lang is None:
        return None
    langs = getattr(tokenizer, "languages", None)
    english_only = langs is not None and not set(langs) & {"zh", "ja", "ko"}
    if not english_only and not _unsegmented(tokens[:SAMPLE]):
        return None
    what = f"tokenizer {tokenizer.name!r} does not segment it"
    return (
        f"most of the text is {LANGUAGES[lang].name} but {what}: a caption becomes one or a few "
        f"'words' and n-gram metrics mean little; score with --lang {lang} "
        f"(lang={lang!r} in Python), or give the metrics a segmenting tokenizer "
        f"(tokenizer={LANGUAGES[lang].tokenizer})"
    )


def check_segmentation(
    tokenizer: Component, texts: Sequence[str], tokens: list[list[str]]
) -> list[list[str]]:
    """Warn (once per run) when ``tokens`` show CJK ``texts`` left unsegmented; returns
    ``tokens``."""
    from capmetrics.engine.prepared import in_run, shared

    problem = segmentation_problem(tokenizer, texts, tokens)
    if problem is None:
        return tokens
    if in_run():
        first: list[bool] = []
        shared(
            ("capmetrics.components.language", "segmentation-warned"), lambda: first.append(True)
        )
        if not first:
            return tokens
    warnings.warn(problem, UserWarning, stacklevel=4)
    return tokens
