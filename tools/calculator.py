"""A calculator that cannot be turned into a bomb.

Only numbers, ``+ - * / // % **``, unary signs and parentheses are accepted; "15% of 86"
and a ``%`` that no operand follows ("17.5% * 2480", "50%") are percentages, not modulo.
Input length, nesting depth and node count are limited before evaluation, and
the size of every integer result is estimated *before* it is computed, so any
input answers (value or structured error) in well under 100 ms.
"""

from __future__ import annotations

import ast
import math
import operator
import re
import unicodedata
from collections.abc import Callable
from typing import Any

from tools.registry import Tool, tool
from tools.results import ToolError

MAX_CHARS = 1_000
MAX_PAREN_DEPTH = 100
MAX_AST_DEPTH = 200
MAX_NODES = 2_000
MAX_BITS = 10_000  # about 3,000 decimal digits

Number = int | float

_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type, Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_SYMBOLS = {ast.BitXor: "^ (use ** for powers)", ast.LShift: "<<", ast.RShift: ">>",
            ast.BitAnd: "&", ast.BitOr: "|", ast.MatMult: "@", ast.Invert: "~", ast.Not: "not"}
_ALLOWED = "numbers, + - * / // % **, and parentheses"


def _invalid(message: str) -> ToolError:
    return ToolError("invalid_expression", f"{message}; only {_ALLOWED} are allowed")


def _too_large(message: str) -> ToolError:
    return ToolError("too_large", message)


_PERCENT_OF = re.compile(r"(\d+(?:\.\d+)?)\s*%\s*of\b", re.IGNORECASE)
# a "%" that no operand follows (an operator, ")" or the end does) is not modulo but a
# percentage: "17.5% * 2480", as the 0.5B model wrote "What is 17.5% of 2480?"
_PERCENT_SIGN = re.compile(r"(\d+(?:\.\d+)?)\s*%(?=\s*(?:[*/)]|$))")


def _normalize(expression: str) -> str:
    text = unicodedata.normalize("NFKC", expression)  # full-width digits and brackets
    if len(text) <= MAX_CHARS:  # (longer is refused by _parse; a long run of digits costs the regex n²)
        text = _PERCENT_OF.sub(r"(\1 / 100) * ", text)  # "15% of 86", as people (and models) write it
        text = _PERCENT_SIGN.sub(r"(\1 / 100)", text.strip())
    return text.replace("×", "*").replace("÷", "/").replace("−", "-").strip()


def _paren_depth(text: str) -> int:
    depth = deepest = 0
    for ch in text:
        if ch == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif ch == ")":
            depth -= 1
    return deepest


def _parse(text: str) -> ast.expr:
    if not text:
        raise _invalid("the expression is empty")
    if len(text) > MAX_CHARS:
        raise _too_large(f"the expression has {len(text)} characters; the limit is {MAX_CHARS}")
    if _paren_depth(text) > MAX_PAREN_DEPTH:
        raise _too_large(f"parentheses are nested more than {MAX_PAREN_DEPTH} deep")
    try:
        return ast.parse(text, mode="eval").body
    except SyntaxError as exc:
        raise _invalid(f"not a valid expression ({exc.msg})") from exc
    except (RecursionError, MemoryError, ValueError) as exc:
        raise _too_large("the expression is too deeply nested to parse") from exc


def _check_shape(root: ast.expr) -> None:
    """Depth, node count and node kinds, checked iteratively (no recursion)."""
    stack: list[tuple[ast.AST, int]] = [(root, 1)]
    count = 0
    while stack:
        node, depth = stack.pop()
        count += 1
        if count > MAX_NODES:
            raise _too_large(f"the expression has more than {MAX_NODES} parts")
        if depth > MAX_AST_DEPTH:
            raise _too_large(f"the expression is nested more than {MAX_AST_DEPTH} levels deep")
        _check_kind(node)
        for child in (getattr(node, "left", None), getattr(node, "right", None),
                      getattr(node, "operand", None)):
            if child is not None:
                stack.append((child, depth + 1))


def _check_kind(node: ast.AST) -> None:
    if isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _invalid(f"{value!r} is not a number")
        if isinstance(value, float) and not math.isfinite(value):
            raise _too_large("a number in the expression is too large for a float")
        return
    op = getattr(node, "op", None)
    if isinstance(node, ast.BinOp) and type(op) in _BINARY:
        return
    if isinstance(node, ast.UnaryOp) and type(op) in _UNARY:
        return
    if op is not None and type(op) in _SYMBOLS:
        raise _invalid(f"the operator {_SYMBOLS[type(op)]} is not supported")
    kinds = {ast.Name: "names", ast.Call: "function calls", ast.Attribute: "attributes",
             ast.Subscript: "subscripts", ast.Compare: "comparisons"}
    label = next((v for k, v in kinds.items() if isinstance(node, k)), type(node).__name__)
    raise _invalid(f"{label} are not allowed ({ast.unparse(node)[:40]})")


def _int_bits(value: Number) -> int:
    return value.bit_length() if isinstance(value, int) else 0


def _guard_power(base: Number, exponent: Number) -> None:
    """Refuse an integer power whose result would exceed the bit budget."""
    if not (isinstance(base, int) and isinstance(exponent, int)) or exponent <= 0:
        return
    if abs(base) <= 1:
        return
    estimated = (abs(base).bit_length() - 1) * exponent
    if estimated > MAX_BITS:
        raise _too_large(f"the result would have about {estimated:,} bits; the limit is {MAX_BITS:,}")


def _guard_product(left: Number, right: Number) -> None:
    if _int_bits(left) + _int_bits(right) > MAX_BITS + 1:
        raise _too_large(f"the result would exceed {MAX_BITS:,} bits")


def _checked(value: Any) -> Number:
    if isinstance(value, complex):
        raise ToolError("math_error", "the result is not a real number")
    if isinstance(value, float) and not math.isfinite(value):
        raise _too_large("the result overflows a float")
    if isinstance(value, int) and value.bit_length() > MAX_BITS:
        raise _too_large(f"the result exceeds {MAX_BITS:,} bits")
    return value


def _apply(op: ast.operator, left: Number, right: Number) -> Number:
    if isinstance(op, ast.Pow):
        _guard_power(left, right)
    elif isinstance(op, ast.Mult):
        _guard_product(left, right)
    try:
        return _checked(_BINARY[type(op)](left, right))
    except ZeroDivisionError as exc:
        raise ToolError("division_by_zero", "division by zero") from exc
    except OverflowError as exc:
        raise _too_large("the result is too large to represent") from exc


def _evaluate(node: ast.expr) -> Number:
    """Recursive evaluation; depth is already bounded by ``_check_shape``."""
    if isinstance(node, ast.Constant):
        assert isinstance(node.value, int | float)  # _check_kind refused every other constant
        return node.value
    if isinstance(node, ast.UnaryOp):
        return _UNARY[type(node.op)](_evaluate(node.operand))
    assert isinstance(node, ast.BinOp)
    return _apply(node.op, _evaluate(node.left), _evaluate(node.right))


def calculator(expression: str) -> dict:
    """Evaluate an arithmetic expression exactly (integers) or as floats.

    Use it for any arithmetic instead of computing in your head. Supports
    + - * / // % ** and parentheses, e.g. "(17 + 5) * 3 / 4" or "2 ** 32".

    Args:
        expression: The arithmetic expression, numbers and operators only.
    """
    root = _parse(_normalize(expression))
    _check_shape(root)
    try:
        value = _evaluate(root)
    except RecursionError as exc:
        raise _too_large("the expression is too deeply nested") from exc
    return {"expression": expression, "value": value}


def make_calculator_tool() -> Tool:
    return tool(calculator, examples=("what's 17% of 2,340", "48 × 365 = ?", "split 150 dollars among 4 people", "三百二十除以八等于多少", "算一下 (12.5 + 7.5) × 3"))
