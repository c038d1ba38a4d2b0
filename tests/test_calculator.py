from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support import CALCULATOR_BOMBS
from tools.calculator import MAX_BITS, calculator, make_calculator_tool
from tools.registry import Registry
from tools.results import ToolError

REG = Registry([make_calculator_tool()])


def call(expression: str) -> dict:
    return REG.call("calculator", {"expression": expression})


# The bombs are answered in 0.2 ms (median) to 65 ms (the slowest, idle); one evaluated takes
# minutes (9**9**9). The bound only tells those apart: 0.1 s failed once in a loaded suite.
HANG_S = 2.0


def timed(expression: str) -> tuple[dict, float]:
    """The result and the fastest of up to three tries: on a shared machine (or beside other
    test workers) one pause is noise, a slow input is slow every time."""
    best, result = float("inf"), {}
    for _ in range(3):
        start = time.perf_counter()
        result = call(expression)
        best = min(best, time.perf_counter() - start)
        if best < 0.1:
            break
    return result, best


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("1 + 2 * 3", 7),
        ("(1 + 2) * 3", 9),
        ("7 / 2", 3.5),
        ("7 // 2", 3),
        ("-7 % 3", 2),
        ("2 ** 10", 1024),
        ("2 ** -1", 0.5),
        ("-(-3)", 3),
        ("+4 - -4", 8),
        ("1.5e3 + 0.25", 1500.25),
        ("2 ** 3 ** 2", 512),
        ("（1＋2）× 3 ÷ 2", 4.5),
        ("10 ** 300 // 10 ** 299", 10),
        ("2 ** -10000", 0.0),
        ("0 ** 0", 1),
        ("(-8) ** 2", 64),
    ],
)
def test_values(expression: str, value: float) -> None:
    result = call(expression)
    assert result == {"ok": True, "expression": expression, "value": value}


def test_exact_integers() -> None:
    assert call("2 ** 100")["value"] == 2**100
    assert call("99999999999999999999 * 3")["value"] == 299999999999999999997


@pytest.mark.parametrize(
    ("expression", "error_type"),
    [
        ("", "invalid_expression"),
        ("x + 1", "invalid_expression"),
        ("__import__('os')", "invalid_expression"),
        ("(1).__class__", "invalid_expression"),
        ("'a' * 3", "invalid_expression"),
        ("[1, 2][0]", "invalid_expression"),
        ("1 < 2", "invalid_expression"),
        ("2 ^ 3", "invalid_expression"),
        ("1 << 100000", "invalid_expression"),
        ("~5", "invalid_expression"),
        ("1j * 2", "invalid_expression"),
        ("True + 1", "invalid_expression"),
        ("lambda: 1", "invalid_expression"),
        ("1 +", "invalid_expression"),
        ("1 / 0", "division_by_zero"),
        ("5 % 0", "division_by_zero"),
        ("0 ** -1", "division_by_zero"),
        ("(-8) ** 0.5", "math_error"),
    ],
)
def test_refused(expression: str, error_type: str) -> None:
    result = call(expression)
    assert result["ok"] is False and result["error"]["type"] == error_type
    assert result["error"]["message"]


@pytest.mark.parametrize("bomb", CALCULATOR_BOMBS, ids=[b[:30] for b in CALCULATOR_BOMBS])
def test_bombs_answer_fast(bomb: str) -> None:
    result, elapsed = timed(bomb)
    assert elapsed < HANG_S, f"{elapsed:.3f}s"
    if result["ok"]:  # a few are legitimately computable, but must stay in budget
        value = result["value"]
        assert not isinstance(value, int) or value.bit_length() <= MAX_BITS
    else:
        assert result["error"]["type"] in {"too_large", "invalid_expression"}


def test_specific_bombs_are_refused_as_too_large() -> None:
    for bomb in ("9**9**9", "4000000**4000000", "(10 ** 3000) / 3", "1e308 * 10"):
        assert call(bomb)["error"]["type"] == "too_large", bomb


def test_plain_function_raises_tool_error() -> None:
    assert calculator("6 * 7") == {"expression": "6 * 7", "value": 42}
    with pytest.raises(ToolError) as info:
        calculator("import os")
    assert info.value.type == "invalid_expression"


TOKENS = st.sampled_from(
    ["1", "0", "2", "9", "10", "0.5", "1e308", "3.25", "9" * 40, "+", "-", "*", "/", "//",
     "%", "**", "(", ")", " ", "x", ".", "e", "j", "<<", "'", "[", "]", ",", "_"]
)


def _expression_tree() -> st.SearchStrategy[str]:
    leaves = st.integers(-(10**6), 10**6).map(str) | st.floats(allow_nan=False).map(repr)
    ops = st.sampled_from(["+", "-", "*", "/", "//", "%", "**"])

    def extend(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        binary = st.tuples(children, ops, children).map(lambda t: f"({t[0]}{t[1]}{t[2]})")
        unary = st.tuples(st.sampled_from(["-", "+"]), children).map("".join)
        return binary | unary

    return st.recursive(leaves, extend, max_leaves=40)


def _assert_well_behaved(expression: str) -> None:
    result, elapsed = timed(expression)
    assert elapsed < HANG_S, f"{elapsed:.3f}s"
    assert isinstance(result["ok"], bool)
    if not result["ok"]:
        assert result["error"]["type"] in {
            "invalid_expression", "too_large", "division_by_zero", "math_error"
        }, result


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(TOKENS, max_size=60).map("".join))
def test_fuzz_token_soup(expression: str) -> None:
    _assert_well_behaved(expression)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_expression_tree())
def test_fuzz_well_formed_trees(expression: str) -> None:
    _assert_well_behaved(expression)


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=200))
def test_fuzz_arbitrary_text(expression: str) -> None:
    _assert_well_behaved(expression)


@pytest.mark.parametrize(("expression", "value"), [
    ("15% of 86", 12.9), ("17.5 % OF 2480", 434.0), ("(15% of 86) + 1", 13.9), ("10 % 3", 1),
])
def test_a_percentage_of_a_number_is_written_as_people_write_it(expression, value) -> None:
    """Both embedded models wrote "15% of 86" for "What's 15% of 86?"; "%" alone stays modulo."""
    assert calculator(expression)["value"] == value


@pytest.mark.parametrize(("expression", "value"), [
    ("17.5% * 2480", 434.0), ("2480 * 17.5%", 434.0), ("50%", 0.5), ("(20%) * 10", 2.0),
    ("86 / 10% ", 860.0), ("10 % 3 * 2", 2), ("7 % (2)", 1),
])
def test_a_percent_sign_no_operand_follows_is_a_percentage(expression, value) -> None:
    """The 0.5B model wrote "17.5% * 2480" for "What is 17.5% of 2480?" (refused as invalid);
    a "%" that no operand follows cannot be modulo, so it divides by 100. Modulo is unchanged."""
    assert calculator(expression)["value"] == pytest.approx(value)
