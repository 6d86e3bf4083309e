"""Fork points of the parallel runtime's compiled code: where the code
generator (chad/compile/codegen.py, `Gen(fork=True)`) emits calls of
chad/compile/parallel_support.py instead of straight-line code.

With `evm="parallel"` the generated code is the array runtime's (the EVM
inlined, array bodies vectorised) but for two kinds of places where the term
itself says that heavy parts are independent:

* a run of consecutive `let`s with at least two heavy right-hand sides, none
  using a variable bound by an earlier heavy one (the forward passes of two
  maps over different arrays), light lets between them only if they cannot
  fail: the light ones are computed first, each heavy right-hand side becomes a
  function of no argument and `_pvals` computes them, the heavy halves on two
  threads. Values are pure, so this is the sequential computation.
* a `>>` chain of actions (`a >> b >> c`, the backward pass: Efficient CHAD
  (Smeding & Vákár) keeps the source's independent sub-terms as `then` of
  their backpropagators) with at least two heavy actions: the chain is cut
  into segments, each starting at a heavy action (light actions go with the
  heavy one before them), each segment becomes an action function of the
  cells, and `_pseq` runs them in order, forking heavy halves, the forked
  half's adds logged and replayed at the join (bit-identical results).

A term is *heavy* when it contains an array operation whose work grows with
an array's size (a build, map, fold, scan, iteration, a call, one of the
arrays extension's loops, `sum`); whether a fork really happens is decided at
run time from the sizes of the values each part reads (parallel_support.GRAIN).
"""

from __future__ import annotations

from chad import tables
from chad.terms import Build, Call, Fold, Iter, Let, MapA, Prim, Scan, ThenEVM, children, free_vars

from .failing import safe

# extension nodes with a loop over an array, by name: chad/compile does not
# import the extensions (their vectorised ones are found in tables.VECTORISE)
_HEAVY_NAMES = frozenset({"ScatterBag", "Scatter", "Gather", "Collect", "IterBack", "IterFwd",
                          "ScanBack", "ScanFwd", "DCall", "LogFold", "SequenceScoped", "UnzipMap",
                          "Unzip", "FoldTree", "UnTree"})
_HEAVY_CORE = (Build, MapA, Fold, Iter, Scan, Call)
_HEAVY_PRIMS = frozenset({"SUM", "ISUM"})


def _heavy_node(node) -> bool:
    cls = type(node)
    if cls is Prim:
        return node.op in _HEAVY_PRIMS
    return cls in _HEAVY_CORE or cls in tables.VECTORISE or cls.__name__ in _HEAVY_NAMES


def heavy(gen, t) -> bool:
    """t contains a heavy node (memoised per sub-term in gen.heavy_memo)."""
    memo = gen.heavy_memo
    r = memo.get(id(t))
    if r is not None:
        return r
    stack = [(t, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if key in memo:
            continue
        kids = children(node)
        if done:
            memo[key] = _heavy_node(node) or any(memo[id(c)] for c in kids)
        else:
            stack.append((node, True))
            stack.extend((c, False) for c in kids if id(c) not in memo)
    return memo[id(t)]


def _size_expr(gen, t) -> str:
    """An expression of psize of the values t reads (its free variables)."""
    atoms = []
    for x in sorted(free_vars(t)):
        a = gen.env.get(x)
        if a is not None and a not in atoms and a[:1].isalpha():
            atoms.append(a)
    if not atoms:
        return "0"
    return gen.atom(f"_psize({', '.join(atoms)})", "s")


def let_group(gen, t: Let) -> list | None:
    """The run of lets from t whose heavy right-hand sides (at least two) are
    independent of each other, or None. Light lets may come between them if they
    cannot fail (chad/compile/failing.py: `length b`, arithmetic) and read no variable
    of the run's heavy lets: they are computed first (a pure value that cannot
    fail may move), and a heavy one may read them. No let of the run rebinds a
    name read by an earlier one."""
    if not heavy(gen, t.rhs):
        return None
    group = [t]
    heavies = 1
    names = {t.name}           # every name the run binds
    heavy_names = {t.name}     # the names of its heavy lets
    heavy_reads = set(free_vars(t.rhs))  # what its heavy right-hand sides read
    node = t.body
    last = 1                   # the run ends at its last heavy let
    while type(node) is Let and node.name not in names and node.name not in heavy_reads:
        reads = free_vars(node.rhs)
        if not heavy_names.isdisjoint(reads):
            break
        if heavy(gen, node.rhs):
            heavies += 1
            heavy_names.add(node.name)
            heavy_reads.update(reads)
            group.append(node)
            last = len(group)
        elif safe(node.rhs):
            group.append(node)
        else:
            break
        names.add(node.name)
        node = node.body
    return group[:last] if heavies >= 2 else None


def emit_lets(gen, group: list, bind) -> None:
    """Compute the group's lets: the light ones first, in order, then the
    heavy ones by `_pvals`; bind(name, atom) binds each."""
    heavies = []
    for node in group:
        if heavy(gen, node.rhs):
            heavies.append(node)
        else:
            bind(node.name, gen.value(node.rhs))
    fns = [gen.local_def([], node.rhs, "h") for node in heavies]
    sizes = [_size_expr(gen, node.rhs) for node in heavies]
    r = gen.fresh("v")
    gen.emit(f"{r} = _pvals(({', '.join(fns)},), ({', '.join(sizes)},))")
    for i, node in enumerate(heavies):
        bind(node.name, gen.atom(f"{r}[{i}]"))


def then_chain(gen, t: ThenEVM) -> list | None:
    """The segments of the `>>` chain t (lists of actions in program order, each
    but the first starting at a heavy action), if it has two heavy actions;
    else None. Then every `>>` node of the chain is remembered (gen.then_seen):
    the chain is looked at once, not again from each of its tails."""
    items = []
    nodes = []
    stack = [t]
    while stack:
        node = stack.pop()
        if type(node) is ThenEVM:
            nodes.append(id(node))
            stack.append(node.second)
            stack.append(node.first)
        else:
            items.append(node)
    segments: list[list] = []
    for item in items:
        if heavy(gen, item) and segments and any(heavy(gen, x) for x in segments[-1]):
            segments.append([item])
        elif segments:
            segments[-1].append(item)
        else:
            segments.append([item])
    if len(segments) >= 2:
        return segments
    gen.then_seen.update(nodes)
    return None


def _chain(items: list):
    """The `>>` chain of the actions (right-nested)."""
    term = items[-1]
    for item in reversed(items[:-1]):
        term = ThenEVM(item, term, loc=getattr(item, "loc", None))
    return term


def emit_seq(gen, segments: list, cells: str) -> str:
    """Run the segments on the list `cells` by `_pseq`: the last one's result."""
    terms = [_chain(seg) for seg in segments]
    for term in terms:
        gen.then_seen.add(id(term))  # a segment has one heavy action: no fork inside
    fns = [gen.local_def([], term, "m", execute=True) for term in terms]
    sizes = [_size_expr(gen, term) for term in terms]
    return gen.atom(f"_pseq({cells}, ({', '.join(fns)},), ({', '.join(sizes)},))")
