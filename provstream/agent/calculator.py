"""Safe arithmetic for the ``calculator`` tool: the expression is parsed with
:mod:`ast` and only numbers, + - * / // % ** and parentheses are evaluated
(never ``eval``). Sizes are bounded so no input can hog the machine.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Final

from provstream.errors import ToolError

MAX_LENGTH: Final = 200
MAX_EXPONENT: Final = 1000
MAX_DIGITS: Final = 400

Number = int | float
_BINARY: Final[dict[type, Callable[[Number, Number], Number]]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
}
_UNARY: Final[dict[type, Callable[[Number], Number]]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}


def evaluate(expression: str) -> Number:
    """The value of an arithmetic expression; :class:`ToolError` saying why it has none."""
    text = expression.strip().replace("^", "**").replace("×", "*").replace("÷", "/")
    if not text:
        raise ToolError("empty expression")
    if len(text) > MAX_LENGTH:
        raise ToolError(f"expression longer than {MAX_LENGTH} characters")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise ToolError(f"not an arithmetic expression: {expression!r}") from exc
    return _eval(tree.body)


def _eval(node: ast.AST) -> Number:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _binary(node.op, _eval(node.left), _eval(node.right))
    raise ToolError(f"only numbers and + - * / // % ** ( ) are allowed, not {type(node).__name__}")


def _binary(op: ast.operator, left: Number, right: Number) -> Number:
    if isinstance(op, ast.Pow) and abs(right) > MAX_EXPONENT:
        raise ToolError(f"exponent {right} is larger than {MAX_EXPONENT}")
    try:
        value = _BINARY[type(op)](left, right)
    except ZeroDivisionError as exc:
        raise ToolError("division by zero") from exc
    except OverflowError as exc:
        raise ToolError("result too large") from exc
    if isinstance(value, complex):
        raise ToolError("the result is not a real number")
    if isinstance(value, int) and value.bit_length() > MAX_DIGITS * 3.33:
        raise ToolError(f"result has more than {MAX_DIGITS} digits")
    return value


def format_number(value: Number) -> str:
    """``391`` for integers and integral floats, else up to 12 significant digits."""
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ToolError("the result is not a finite number")
        if value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        return format(value, ".12g")
    return str(value)


def calculate(expression: str) -> str:
    return format_number(evaluate(expression))
