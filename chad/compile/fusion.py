"""Elementwise arithmetic of a vectorised region in one pass (docs/compiler.md,
"Fused arithmetic").

A batched body's arithmetic becomes numpy expressions, one array per
operation: `(p * c) * (1.0 + (-(t * t)))`, the derivative of `tanh (w * x) *
x`, makes five arrays of n reals and reads and writes each. After the
generated function's locals are folded (chad/compile/registers.py), such a
statement whose value is a batched real (the Batcher records the names it
gives them, chad/compile/vectorise.py) is rewritten into one call,
`_vfuse(code, p, c, t, 1.0)`: the expression's postfix code over its leaves
(names, calls, number literals; each evaluated once, left to right, as
Python evaluates them; the operations cannot fail or act, so they may come
after). `kernels.fuse` runs it in C over blocks of 256 elements
(chad/compile/_kernels.c: the same IEEE operations in the same order, so the
same bits, `-x` by its sign bit as numpy's `negative`), for float64 arrays
and reals that broadcast; for anything else, and where the extension was not
built, it runs the operators themselves one after the other (`evaluate`), as
the expression did.

Only +, -, *, / and unary minus are fused (numpy's exp, log, tanh are its
own implementations, which C's libm does not match), and only expressions of
at least two operations, of at most 40 leaves.
"""

from __future__ import annotations

import ast
import operator

# the code's bytes, printable (its repr in the generated line is the bytes
# themselves, with no letter the renaming of locals could take for a name):
# leaf k is LEAF + k
LEAF, NEG, ADD, SUB, MUL, DIV = ord("0"), ord("~"), ord("+"), ord("-"), ord("*"), ord("/")
_BINARY = {ast.Add: ADD, ast.Sub: SUB, ast.Mult: MUL, ast.Div: DIV}
_OPERATORS = {ADD: operator.add, SUB: operator.sub, MUL: operator.mul, DIV: operator.truediv}
MAX_LEAVES = 40   # '0' .. 'W'
MAX_DEPTH = 16    # the C loop's stack of blocks


class _NotFused(Exception):
    pass


def fused(rhs: str) -> str | None:
    """The call `_vfuse(code, leaves...)` computing the expression rhs (the
    right-hand side of a generated assignment whose value is a batched real),
    or None if rhs is not arithmetic of at least two operations."""
    try:
        tree = ast.parse(rhs, mode="eval").body
    except SyntaxError:
        return None
    code = bytearray()
    leaves: list[str] = []
    names: dict[str, int] = {}  # a name read twice is one leaf (no side effect)
    ops = depth = top = 0
    stack = [(tree, False)]
    try:
        while stack:  # postfix order, without recursion
            node, done = stack.pop()
            if done:
                code.append(NEG if isinstance(node, ast.UnaryOp) else _BINARY[type(node.op)])
                ops += 1
                depth -= 1 if isinstance(node, ast.BinOp) else 0
                continue
            if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
                stack += [(node, True), (node.right, False), (node.left, False)]
            elif (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub)
                  and not _literal(node.operand)):
                stack += [(node, True), (node.operand, False)]
            else:
                code.append(_leaf(rhs, node, leaves, names))
                depth += 1
                top = max(top, depth)
    except _NotFused:
        return None
    if ops < 2 or top > MAX_DEPTH:
        return None
    return f"_vfuse({bytes(code)!r}, {', '.join(leaves)})"


def summed_product(x: str, product: str, rhs: str) -> tuple[str, str, str] | None:
    """For `x = A * B` (product: the right-hand side assigning the batched real
    x) read only by the next statement, whose right-hand side rhs holds
    `_vsum(x, rest)`: rhs cut around that call, (before, `_vsumprod(A, B,
    rest)`, after). vector_support.vsumprod sums the products without making
    their block where it can. None if the statements are not of that form.
    A and B are then evaluated after what `before` evaluates (the caller
    checks that nothing there can act or fail), and the product, which can
    fail only by its shapes and cannot act, with them."""
    try:
        prod = ast.parse(product, mode="eval").body
        tree = ast.parse(rhs, mode="eval")
    except SyntaxError:
        return None
    if not (isinstance(prod, ast.BinOp) and isinstance(prod.op, ast.Mult)):
        return None
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id == "_vsum" and not node.keywords and len(node.args) > 1
                and isinstance(node.args[0], ast.Name) and node.args[0].id == x):
            break
    else:
        return None
    operands = [ast.get_source_segment(product, prod.left),
                ast.get_source_segment(product, prod.right)]
    rest = [ast.get_source_segment(rhs, a) for a in node.args[1:]]
    call = f"_vsumprod({', '.join(operands + rest)})"
    return rhs[:node.col_offset], call, rhs[node.end_col_offset:]


def _literal(node) -> bool:
    """A real literal (repr of a float, as the generator writes numbers)."""
    return isinstance(node, ast.Constant) and type(node.value) is float


def _leaf(rhs: str, node, leaves: list, names: dict) -> int:
    if isinstance(node, ast.Constant) and not _literal(node):
        raise _NotFused  # an integer, a string: not a real's expression
    if isinstance(node, ast.UnaryOp) and not (isinstance(node.op, ast.USub)
                                              and _literal(node.operand)):
        raise _NotFused  # `not`, `~`, `+x`
    text = ast.get_source_segment(rhs, node)
    if isinstance(node, ast.Name) and text in names:
        return names[text]
    if len(leaves) == MAX_LEAVES:
        raise _NotFused
    if isinstance(node, ast.Name):
        names[text] = LEAF + len(leaves)
    leaves.append(text)
    return LEAF + len(leaves) - 1


def evaluate(code: bytes, leaves: tuple):
    """The expression of `code` computed by Python's operators, one after the
    other, as the expression itself was (what `_vfuse` does where the C loop
    does not apply)."""
    stack: list = []
    for op in code:
        if LEAF <= op < LEAF + MAX_LEAVES:
            stack.append(leaves[op - LEAF])
        elif op == NEG:
            stack.append(-stack.pop())
        else:
            y = stack.pop()
            stack.append(_OPERATORS[op](stack.pop(), y))
    return stack[0]
