"""Preconditions: CEL compile, normalisation, caps, and explainable evaluation."""

from __future__ import annotations

import cel
import pytest

from memory_core.errors import InvalidPrecondition
from memory_core.preconditions import (
    Verdict,
    check,
    compile_all,
    compile_precondition,
    compile_stored,
    holds_all,
    make_context,
    scan_variables,
)


def verdict(expr: str, state: dict) -> Verdict:
    return check(compile_precondition(expr), make_context(state), frozenset(state)).verdict


def test_case_of_strings_never_matters() -> None:
    assert verdict('task_type == "API_CALL"', {"task_type": "api_call"}) is Verdict.held
    assert verdict('task_type == "api_call"', {"task_type": "API_CALL"}) is Verdict.held
    assert verdict('"Payment" in tools_used', {"tools_used": ["PAYMENT", "x"]}) is Verdict.held
    assert (
        verdict("last_error.contains('Rate  LIMIT')", {"last_error": "http 429: rate limit"})
        is Verdict.held
    )


def test_comparisons_and_failures() -> None:
    assert verdict("retry_count < 3", {"retry_count": 2}) is Verdict.held
    assert verdict("retry_count < 3", {"retry_count": 3}) is Verdict.failed
    assert verdict("error_code == 429", {"error_code": 429.0}) is Verdict.held  # JSON 429.0


def test_missing_variables_are_false_and_named() -> None:
    c = compile_precondition('tool == "a" && retry_count < 3')
    state = {"tool": "a"}
    result = check(c, make_context(state), frozenset(state))
    assert result.verdict is Verdict.missing
    assert result.missing == ("retry_count",)
    nested = check(
        compile_precondition("args.page == 1"), make_context({"args": {}}), frozenset({"args"})
    )
    assert nested.verdict is Verdict.missing


def test_non_boolean_and_type_errors_are_errors_not_matches() -> None:
    assert verdict("retry_count", {"retry_count": 1}) is Verdict.error
    assert verdict('retry_count > "a"', {"retry_count": 1}) is Verdict.error


@pytest.mark.parametrize("expr", ["tool ==", "tool = 'a'", "", "   ", "__import__('os')"])
def test_bad_expressions_are_refused_with_the_field(expr: str) -> None:
    with pytest.raises(InvalidPrecondition, match="preconditions"):
        compile_precondition(expr)


def test_caps_on_length_depth_and_count() -> None:
    with pytest.raises(InvalidPrecondition, match="cap is 20"):
        compile_precondition('tool == "a_very_long_tool_name"', max_chars=20)
    deep = "(" * 9 + "x == 1" + ")" * 9
    with pytest.raises(InvalidPrecondition, match="deeper"):
        compile_precondition(deep, max_depth=8)
    chain = " && ".join(f"x{i} == 1" for i in range(10))
    with pytest.raises(InvalidPrecondition, match="deeper"):
        compile_precondition(chain, max_depth=8)
    with pytest.raises(InvalidPrecondition, match="cap is 2"):
        compile_all(["a == 1", "b == 1", "c == 1"], max_count=2)
    # brackets inside string literals do not count as depth
    assert compile_precondition('x == "((((((((((("', max_depth=2).source == 'x == "((((((((((("'


def test_string_literals_with_quotes_and_escapes_survive_normalisation() -> None:
    c = compile_precondition('last_error == "user \\"BOB\\" not found"')
    assert c.source == 'last_error == "user \\"bob\\" not found"'
    assert (
        verdict('last_error == "user \\"BOB\\" not found"', {"last_error": 'User "Bob" not found'})
        is Verdict.held
    )


def test_an_empty_list_holds_and_duplicates_collapse() -> None:
    assert holds_all([], make_context({}), frozenset())
    assert len(compile_all(['a == "X"', 'a == "x"', "a  ==  'x'"])) == 2


SCANNED = [
    'tool == "a" && retry_count < 3',
    'tool in ["a", "b"] || last_tool == "c"',
    "last_error.contains('x.y(') && !has(args.id)",
    "args.page == 1 && size(items) > 0",
    "[1, 2].exists(q, q == n) ? a : b",
    "1e5 < x && 0x1f == y && 3u == z && 2.5 > w",
    'm["k"] == v && x == null && type(t) == int',
    "a . b == 1 && c.startsWith(e) == f",
]


@pytest.mark.parametrize("source", SCANNED)
def test_a_stored_text_reads_its_variables_as_cel_does_without_compiling(source: str) -> None:
    stored = compile_stored(source, on_use=True)
    assert not stored.compiled  # compiled on first use only
    # as CEL lists them, but a macro's loop variable ("q" below) is bound, not read from a state
    loop = {"q"} if ".exists(q," in source else set()
    assert stored.variables == frozenset(cel.compile(source).variables()) - loop
    assert stored.variables == compile_precondition(source).variables
    # shapes the scan cannot read exactly are compiled at once
    assert scan_variables("google.protobuf.Int64Value{value: 1} == x") is None
    assert scan_variables(".x == 1") is None
    assert compile_stored(".x == 1", on_use=True).compiled
    with pytest.raises(InvalidPrecondition):  # other readers of stored cards compile at once
        compile_stored("tool ==")


def test_a_stored_text_that_no_longer_compiles_never_holds_and_says_why() -> None:
    for source in ("tool ==", "evil(tool)"):
        stored = compile_stored(source, on_use=True)
        state = {"tool": "a"}
        result = check(stored, make_context(state), frozenset(state))
        assert result.verdict is Verdict.error and "precondition" in result.detail
        assert not holds_all([stored], make_context(state), frozenset(state))
    good = compile_stored('tool == "a"', on_use=True)
    assert check(good, make_context({"tool": "a"}), frozenset({"tool"})).verdict is Verdict.held
    assert good.compiled


def test_programs_compiled_on_use_are_capped_and_compiled_again_when_reached(monkeypatch) -> None:
    import threading

    import memory_core.cel_programs as p

    monkeypatch.setattr(p, "MAX_ON_USE", 4)
    texts = [compile_stored(f'tool == "t{i}"', on_use=True) for i in range(10)]
    for i, c in enumerate(texts):
        state = {"tool": f"t{i}"}
        assert check(c, make_context(state), frozenset(state)).verdict is Verdict.held
    held = sum(c.compiled for c in texts)
    assert held <= 4 and texts[-1].compiled and not texts[0].compiled
    # dropped programs compile again when reached, while other threads evaluate and evict
    errors: list[BaseException] = []

    def evaluate(offset: int) -> None:
        try:
            for n in range(300):
                i = (n + offset) % 10
                state = {"tool": f"t{i}"}
                assert holds_all([texts[i]], make_context(state), frozenset(state))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=evaluate, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


@pytest.mark.parametrize(
    ("expr", "held_on", "failed_on"),
    [
        ('size(tools_used.filter(t, t == "search")) < 2', ["search", "read"], ["search"] * 2),
        ('tools_used.exists(x, x == "read")', ["search", "read"], ["search"]),
        ('tools_used.all(x, x != "read")', ["search"], ["read"]),
        ('tools_used.exists_one(x, x == "search")', ["search"], ["search", "search"]),
        ('size(tools_used.map(x, x + "!")) == 1', ["search"], ["a", "b"]),
    ],
)
def test_a_macros_loop_variable_is_not_a_state_variable(expr, held_on, failed_on) -> None:
    # the loop variable is bound by the macro: a state never holds it, so it cannot be missing
    assert scan_variables(expr) == frozenset({"tools_used"})
    assert compile_stored(expr).variables == frozenset({"tools_used"})
    assert compile_precondition(expr).variables == frozenset({"tools_used"})
    assert verdict(expr, {"tools_used": held_on}) is Verdict.held
    assert verdict(expr, {"tools_used": failed_on}) is Verdict.failed
    assert verdict(expr, {}) is Verdict.missing  # the list itself is still needed
