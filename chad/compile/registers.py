"""Reuse of locals in a generated function, after the code is generated.

The code generator (codegen.py) gives every intermediate value a fresh local,
assigned once. A local keeps its value alive until the function returns: a
1000-step chain keeps 5000 floats alive, so none is recycled through CPython's
free list and the primal runs at half the speed of the same chain written as a
loop. This pass, on the lines of one generated function,

1. drops assignments whose local is never read and whose right-hand side cannot
   fail or act (a tuple of atoms, an atom, a `_partial` of atoms), repeatedly;
2. folds a local read once, by the next statement, into it, where that keeps
   the order of every operation (`_fold`): `v5 = _sin(a2)`, `v6 = (0.5 * v5)`
   become `v6 = (0.5 * _sin(a2))`, one store and one load fewer;
   then (given the names of batched reals' arrays) rewrites the arithmetic
   assigned to such a local into one fused call (chad/compile/fusion.py);
3. renames the remaining single-assignment locals onto a few *registers*: once
   a local's last read has passed, its name is free and the next local defined
   in the same statement list takes it over (the old value is then released).

It reads the generator's output, whose names are all generated (a lowercase
stem and a number: `v12`, `g3`, `a2`, `cells7`), and whose statements are
assignments, expression statements, `return`, and `if`/`else` blocks (four
spaces an indent). A local assigned more than once (the cells of a run held in
locals, the result of a `case`), assigned by a pattern, or read outside the
statement list that defines it is left as it is. Module-level names (`_K3`,
`_math`) and the functions (`f4`, read but never assigned here) are never
touched. Linear in the number of lines; no recursion on the nesting depth.
"""

from __future__ import annotations

import re

from .fusion import fused, summed_product

_NAME = re.compile(r"(?<![\w.])[a-z]+[0-9]+\b")
_ASSIGN = re.compile(r"([a-z]+[0-9]+) = (.*)")
_ATOM = r"(?:[a-z]+[0-9]+|_[A-Za-z]+[0-9]+|None|-?[0-9][0-9.e+-]*|\(-[0-9][0-9.e+-]*\))"
_PURE_ATOM = re.compile(_ATOM)
_PURE = re.compile(rf"{_ATOM}|\({_ATOM}(?:, {_ATOM})+\)|_partial\({_ATOM}(?:, {_ATOM})*\)")

_INDENT = "    "
MAX_NESTING = 12
# what may act or fail when evaluated: a call or a subscript (a name or a
# bracket followed by an opening one)
_UNSAFE = re.compile(r"[\w)\]][(\[]")
_CALLEE = re.compile(r"[A-Za-z_][\w.]*")
_PAREN = re.compile(r"[()]")
_LITERAL = re.compile(r"None|-?[0-9][0-9.e+-]*|\(-[0-9][0-9.e+-]*\)")


class _Stmt:
    __slots__ = ("indent", "text", "target", "uses", "seq", "index", "nest")

    def __init__(self, indent: int, text: str, target, uses, seq: int, index: int):
        self.indent = indent      # levels
        self.text = text          # without the indentation
        self.target = target      # the local a simple assignment defines, or None
        self.uses = uses          # the generated names the statement reads (a list)
        self.seq = seq            # the statement list it belongs to
        self.index = index        # its position in that list
        self.nest = text.count("(")  # bounds its parentheses' nesting


def reuse_locals(lines: list[str], reals=frozenset()) -> list[str]:
    """The lines of one generated function (its `def` line first), with dead
    pure assignments dropped and locals reused (see the module doc); the
    arithmetic assigned to a local in `reals` (a batched real's array) fused
    into one pass (chad/compile/fusion.py)."""
    if not lines or not lines[0].startswith("def "):
        return lines
    header = lines[0]
    params = _NAME.findall(header[header.index("("):])
    stmts: list[_Stmt] = []
    # statement lists: parent[s] = (parent list, index of the block statement)
    parent: list[tuple[int, int] | None] = [None]
    open_lists: list[int] = [0]      # the list open at each indent level (1 = the body)
    counts: list[int] = [0]          # statements so far in each list
    assigned: dict[str, int] = {p: 1 for p in params}
    pinned: set[str] = set()
    for line in lines[1:]:
        stripped = line.lstrip(" ")
        level = (len(line) - len(stripped)) // len(_INDENT)
        depth = level - 1                # 0 = the function's body
        del open_lists[depth + 1:]
        seq = open_lists[depth]
        index = counts[seq]
        counts[seq] += 1
        target = None
        m = _ASSIGN.fullmatch(stripped)
        if m is not None:
            target = m.group(1)
            uses = _NAME.findall(m.group(2))
            assigned[target] = assigned.get(target, 0) + 1
        elif " = " in stripped and not stripped.startswith(("if ", "return ")) \
                and "==" not in stripped.split(" = ", 1)[0]:
            lhs, rhs = stripped.split(" = ", 1)
            defined = _NAME.findall(lhs)
            if "[" not in lhs:           # a pattern: its names are pinned
                pinned.update(defined)
                uses = _NAME.findall(rhs)
            else:                        # a store into a list: everything is read
                uses = _NAME.findall(stripped)
        else:
            uses = _NAME.findall(stripped)
        stmts.append(_Stmt(level, stripped, target, uses, seq, index))
        if stripped.endswith(":"):       # `if ...:` or `else:` opens a list
            parent.append((seq, index))
            counts.append(0)
            open_lists.append(len(parent) - 1)
    pinned.update(n for n, k in assigned.items() if k != 1)
    # parameters are not reused: the caller holds their values anyway, and the
    # generated code reads better with them unchanged
    pinned.update(params)

    # 1. dead pure assignments, dropped until none is left
    reads: dict[str, int] = {}
    for s in stmts:
        for n in s.uses:
            reads[n] = reads.get(n, 0) + 1
    alive = [True] * len(stmts)
    defined_at = {s.target: j for j, s in enumerate(stmts) if s.target is not None}
    work = [i for i, s in enumerate(stmts) if _droppable(s, reads, pinned)]
    while work:
        i = work.pop()
        if not alive[i]:
            continue
        alive[i] = False
        for n in stmts[i].uses:
            reads[n] -= 1
            if reads[n] == 0 and n not in pinned:
                j = defined_at.get(n)
                if j is not None and alive[j] and _droppable(stmts[j], reads, pinned):
                    work.append(j)

    # 2. a local read once, by the next statement, folded into it
    _fold(stmts, alive, reads, pinned)
    # 2b. then a batched real's arithmetic, folded so, made in one pass (a
    # product read only by the sum after it: summed without its block)
    if reals:
        _sum_products(stmts, alive, reads, pinned, reals)
        for i, s in enumerate(stmts):
            if alive[i] and s.target in reals:
                call = fused(s.text[len(s.target) + 3:])
                if call is not None:
                    s.text = f"{s.target} = {call}"
                    s.nest = s.text.count("(")

    # 3. where each local is defined, and its last read in the list defining it
    home: dict[str, tuple[int, int]] = {p: (0, -1) for p in params}
    for s in stmts:
        if s.target is not None:
            home[s.target] = (s.seq, s.index)
    last: dict[str, int] = {}
    for i, s in enumerate(stmts):
        if not alive[i]:
            continue
        for n in s.uses:
            h = home.get(n)
            if h is None or n in pinned:
                continue
            at = _position_in(parent, s.seq, s.index, h[0])
            if at is None or at <= h[1]:
                pinned.add(n)            # read outside its list (or before): left alone
            elif at > last.get(n, -1):
                last[n] = at
    dying: dict[tuple[int, int], list[str]] = {}
    for n, at in last.items():
        if n not in pinned:
            dying.setdefault((home[n][0], at), []).append(n)

    # 4. one pass in order: rename, free the dead, give a defined local a free name
    rename: dict[str, str] = {}
    pools: dict[int, list[str]] = {}
    out = [header]
    sub = lambda m: rename.get(m.group(0), m.group(0))  # noqa: E731
    for i, s in enumerate(stmts):
        if not alive[i]:
            continue
        pool = pools.setdefault(s.seq, [])
        freed = [rename.get(n, n) for n in dying.get((s.seq, s.index), ())]
        if s.target is not None and s.target not in pinned:
            rhs = _NAME.sub(sub, s.text.split(" = ", 1)[1])
            pool.extend(freed)          # the right-hand side is read before the store
            name = pool.pop() if pool else s.target
            rename[s.target] = name
            out.append(f"{_INDENT * s.indent}{name} = {rhs}")
            if s.target not in last:     # never read (an impure right-hand side)
                pool.append(name)
        else:
            out.append(_INDENT * s.indent + _NAME.sub(sub, s.text))
            pool.extend(freed)
    return out


def _sum_products(stmts: list[_Stmt], alive: list[bool], reads: dict[str, int],
                  pinned: set[str], reals) -> None:
    """`x = A * B` (x a batched real read once) followed, in the same
    statement list, by a statement reading `_vsum(x, ...)` with nothing that
    can act or fail to its left: that call becomes `_vsumprod(A, B, ...)`
    (chad/compile/fusion.py, summed_product)."""
    before = None  # the alive statement just before the current one
    for j, s in enumerate(stmts):
        if not alive[j]:
            continue
        d, before = before, j
        if d is None:
            continue
        p = stmts[d]
        x = p.target
        if (x is None or x not in reals or x in pinned or reads.get(x, 0) != 1
                or p.seq != s.seq or x not in s.uses):
            continue
        if s.target is not None:
            head = s.target + " = "
        elif s.text.startswith("return "):
            head = "return "
        else:
            continue
        rhs = s.text[len(head):]
        cut = summed_product(x, p.text[len(x) + 3:], rhs)
        if cut is None or " if " in rhs or _UNSAFE.search(cut[0]) is not None:
            continue
        s.text = head + "".join(cut)
        s.nest = s.text.count("(")
        uses = list(s.uses)
        uses.remove(x)
        s.uses = uses + p.uses
        reads[x] = 0
        alive[d] = False


def _fold(stmts: list[_Stmt], alive: list[bool], reads: dict[str, int],
          pinned: set[str]) -> None:
    """`x = E` followed, in the same statement list, by `y = R` or `return R`
    where R reads x once and nothing in R before x can act or fail (no call,
    subscript or conditional to its left): `y = R[x := (E)]`. E is then evaluated
    at the same point of the computation (after what R loads before x, local
    names and numbers, and before the rest of R), so the result is the same,
    operation for operation; one store and one load fewer. Folds nest up to
    MAX_NESTING parentheses (bounded by counting them)."""
    before: list[int] = []  # the alive statements just before the current one
    for j, s in enumerate(stmts):
        if not alive[j]:
            continue
        while before and _fold_into(stmts[before[-1]], s, reads, pinned):
            i = before.pop()
            alive[i] = False
        before.append(j)


def _fold_into(d: _Stmt, s: _Stmt, reads: dict[str, int], pinned: set[str]) -> bool:
    """Fold d (`x = E`) into s if allowed (see _fold); whether it was."""
    x = d.target
    if (x is None or x in pinned or reads.get(x, 0) != 1 or d.seq != s.seq
            or x not in s.uses):
        return False
    text = s.text
    if s.target is not None:
        cut = len(s.target) + 3
    elif text.startswith("return "):
        cut = 7
    else:
        return False
    rhs = text[cut:]
    if " if " in rhs:
        return False
    found = None
    for m in _NAME.finditer(rhs):
        if m.group(0) == x:
            if found is not None:
                return False
            found = m
    if found is None:
        return False
    at = found.start()
    if _UNSAFE.search(rhs, 0, at) is not None:
        return False
    e = d.text[len(x) + 3:]
    after = rhs[found.end():found.end() + 1]
    if after in ("[", "(") and _LITERAL.fullmatch(e):
        return False  # `None[0]`: CPython's compiler warns (the code fails either way)
    wrap = not _enclosed(e)
    nest = s.nest + d.nest + wrap  # at most (counting parentheses)
    if nest > MAX_NESTING:
        return False
    if wrap:
        e = f"({e})"
    s.text = text[:cut] + rhs[:at] + e + rhs[found.end():]
    s.nest = nest
    uses = list(s.uses)
    uses.remove(x)
    s.uses = uses + d.uses
    reads[x] = 0
    return True


def _enclosed(e: str) -> bool:
    """Whether e needs no parentheses to be an operand: an atom, or a name (a
    callee) followed by one parenthesised group, or one parenthesised group."""
    if e[-1] != ")":
        return _PURE_ATOM.fullmatch(e) is not None
    m = _CALLEE.match(e)
    start = m.end() if m is not None else 0
    if e[start] != "(":
        return False
    depth = 0
    for p in _PAREN.finditer(e, start):
        depth += 1 if p.group(0) == "(" else -1
        if depth == 0:
            return p.end() == len(e)
    return False


def _droppable(s: _Stmt, reads: dict[str, int], pinned: set[str]) -> bool:
    return (s.target is not None and s.target not in pinned and reads.get(s.target, 0) == 0
            and _PURE.fullmatch(s.text.split(" = ", 1)[1]) is not None)


def _position_in(parent, seq: int, index: int, home: int) -> int | None:
    """The index, in statement list `home`, of the statement containing the
    statement at (seq, index); None if it is not inside that list."""
    while seq != home:
        up = parent[seq]
        if up is None:
            return None
        seq, index = up
    return index
