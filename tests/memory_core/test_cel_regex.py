"""`x.matches("...")` searched by Python's `re` (memory_core/cel_regex.py) gives CEL's verdicts."""

from __future__ import annotations

import cel
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_core.cel_programs import CompiledPrecondition
from memory_core.cel_regex import fast_source
from memory_core.preconditions import Verdict, check, compile_precondition, make_context

# the shapes lessons key on (an id's prefix and digits, a date, a code) and hand-written ones
PATTERNS = [
    "^gift_card_[0-9]+$",
    "^[0-9]{4}-[0-9]{2}-[0-9]{2}$",
    "^[0-9]{4}-[0-9]{2}-[0-9]{2}[t ][0-9]{2}:[0-9]{2}",
    "^[a-z0-9]{6}$",
    "^ab\\-c[0-9]+$",
    "timeout|refused",
    "^(?:us|eu)-[a-z]+-\\d$",
    "^[^0-9]+$",
    "x.y*z?",
    "\\$[0-9]+\\.[0-9]{2}$",
]
TEXTS = st.text(alphabet="abcdefgiklrstuxyz_-0123456789 :.$\n٣", max_size=24)


def _cel_only(source: str) -> CompiledPrecondition:
    c = compile_precondition(source)
    return CompiledPrecondition(c.source, cel.compile(c.source), c.variables)


@pytest.mark.parametrize("pattern", PATTERNS)
def test_each_safe_pattern_is_searched_in_python(pattern: str) -> None:
    source = compile_precondition(f"args.v.matches({pattern!r})".replace("'", '"')).source
    assert fast_source(source) is not None, source


@settings(max_examples=300, deadline=None)
@given(pattern=st.sampled_from(PATTERNS), text=TEXTS)
def test_python_and_cel_agree_on_every_string(pattern: str, text: str) -> None:
    source = f'args.v.matches("{pattern.replace(chr(92), chr(92) * 2)}")'
    fast, slow = compile_precondition(source), _cel_only(source)
    context, keys = make_context({"args": {"v": text}}, normalised=True), frozenset({"args"})
    assert check(fast, context, keys).verdict == check(slow, context, keys).verdict


@pytest.mark.parametrize(
    "pattern",
    ["(?=x)a", "(?i)abc", "^a\\w$", "a$b", "[[:alpha:]]", "[a-z&&[^x]]", "a{", "\\bword", "a^b"],
)
def test_patterns_the_engines_might_read_apart_stay_with_cel(pattern: str) -> None:
    source = f'args.v.matches("{pattern.replace(chr(92), chr(92) * 2)}")'
    assert fast_source(source) is None


def test_only_a_lone_call_on_a_path_is_rewritten() -> None:
    assert fast_source('tool == "t" && args.v.matches("^a$")') is None
    assert fast_source('"x".matches("^a$")') is None
    assert fast_source('args["a b"].matches("^a$")') is not None


def test_a_value_the_state_lacks_is_missing_and_a_number_fails() -> None:
    c = compile_precondition('args.v.matches("^a[0-9]+$")')
    for state, verdict in [
        ({"args": {"v": "a12"}}, Verdict.held),
        ({"args": {"v": "b12"}}, Verdict.failed),
        ({"args": {"v": "a12\n"}}, Verdict.failed),  # `$` is the end of the text
        ({"args": {"v": 12}}, Verdict.failed),
        ({"args": {}}, Verdict.missing),
        ({"tool": "t"}, Verdict.missing),
    ]:
        assert check(c, make_context(state, normalised=True), frozenset(state)).verdict is verdict
