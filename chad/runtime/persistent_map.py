"""A persistent (immutable) AVL tree map: the paper's `EMap` (Efficient CHAD (Smeding & Vákár), §4.2, Fig. 6).

Every update returns a new map that shares all untouched subtrees with the old
one (path copying); the old version is never modified. With the AVL balance
invariant (subtree heights differ by at most one) the height is at most
~1.44 log2(n + 2), so `get`, `set`, `update` and `delete` are O(log n).

Work accounting: every map carries a `counter` (a one-element list shared by all
versions derived from it). Each tree node visited or created adds one to
counter[0], so callers (chad/runtime/map_evm.py) can report the real work next to
the abstract cost of the formalisation.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

_MISSING = object()


class Node:
    """An immutable AVL node. Never mutated after construction."""

    __slots__ = ("key", "value", "left", "right", "height", "size")

    def __init__(self, key, value, left: "Node | None", right: "Node | None"):
        self.key = key
        self.value = value
        self.left = left
        self.right = right
        lh = left.height if left is not None else 0
        rh = right.height if right is not None else 0
        self.height = (lh if lh > rh else rh) + 1
        self.size = (left.size if left is not None else 0) + (right.size if right is not None else 0) + 1


def _h(n: Node | None) -> int:
    return n.height if n is not None else 0


def _balance(key, value, left, right, w) -> Node:
    """A node with these children, rotated so the AVL invariant holds again
    (children's heights differ by at most 2 on entry)."""
    lh, rh = _h(left), _h(right)
    if lh > rh + 1:
        if _h(left.left) >= _h(left.right):  # single right rotation
            w[0] += 2
            return Node(left.key, left.value, left.left, Node(key, value, left.right, right))
        lr = left.right  # double rotation
        w[0] += 3
        return Node(lr.key, lr.value, Node(left.key, left.value, left.left, lr.left),
                    Node(key, value, lr.right, right))
    if rh > lh + 1:
        if _h(right.right) >= _h(right.left):  # single left rotation
            w[0] += 2
            return Node(right.key, right.value, Node(key, value, left, right.left), right.right)
        rl = right.left
        w[0] += 3
        return Node(rl.key, rl.value, Node(key, value, left, rl.left),
                    Node(right.key, right.value, rl.right, right.right))
    w[0] += 1
    return Node(key, value, left, right)


def _insert(n: Node | None, key, value, w) -> Node:
    w[0] += 1
    if n is None:
        return Node(key, value, None, None)
    if key < n.key:
        return _balance(n.key, n.value, _insert(n.left, key, value, w), n.right, w)
    if n.key < key:
        return _balance(n.key, n.value, n.left, _insert(n.right, key, value, w), w)
    w[0] += 1
    return Node(key, value, n.left, n.right)


def _update(n: Node | None, key, f, w) -> Node:
    """Replace the value at an existing key by f(old value); the shape is unchanged."""
    if n is None:
        raise KeyError(key)
    w[0] += 2  # visit + copy
    if key < n.key:
        return Node(n.key, n.value, _update(n.left, key, f, w), n.right)
    if n.key < key:
        return Node(n.key, n.value, n.left, _update(n.right, key, f, w))
    return Node(key, f(n.value), n.left, n.right)


def _pop_min(n: Node, w) -> tuple[Node | None, Node]:
    """(tree without its minimum, the minimum node)."""
    w[0] += 1
    if n.left is None:
        return n.right, n
    rest, m = _pop_min(n.left, w)
    return _balance(n.key, n.value, rest, n.right, w), m


def _delete(n: Node | None, key, w) -> Node | None:
    if n is None:
        raise KeyError(key)
    w[0] += 1
    if key < n.key:
        return _balance(n.key, n.value, _delete(n.left, key, w), n.right, w)
    if n.key < key:
        return _balance(n.key, n.value, n.left, _delete(n.right, key, w), w)
    if n.left is None:
        return n.right
    if n.right is None:
        return n.left
    rest, m = _pop_min(n.right, w)
    return _balance(m.key, m.value, n.left, rest, w)


def _build(keys: list, values: list, lo: int, hi: int, w) -> Node | None:
    """A perfectly balanced tree of the sorted slice [lo, hi): O(hi - lo)."""
    if lo >= hi:
        return None
    mid = (lo + hi) // 2
    w[0] += 1
    return Node(keys[mid], values[mid], _build(keys, values, lo, mid, w), _build(keys, values, mid + 1, hi, w))


class PersistentMap:
    """An immutable sorted map. All "modifying" methods return a new map."""

    __slots__ = ("root", "counter")

    def __init__(self, root: Node | None = None, counter: list | None = None):
        self.root = root
        self.counter = counter if counter is not None else [0]

    # construction -----------------------------------------------------------
    @classmethod
    def from_items(cls, items, counter: list | None = None) -> "PersistentMap":
        """Build from (key, value) pairs; O(n) if the keys are already sorted."""
        pairs = list(items)
        if any(not (pairs[i][0] < pairs[i + 1][0]) for i in range(len(pairs) - 1)):
            d = dict(pairs)
            pairs = sorted(d.items())
        w = counter if counter is not None else [0]
        keys = [k for k, _ in pairs]
        values = [v for _, v in pairs]
        return cls(_build(keys, values, 0, len(keys), w), w)

    @classmethod
    def from_list(cls, values: list, counter: list | None = None) -> "PersistentMap":
        """The map {0: values[0], 1: values[1], ...}, built balanced in O(n)."""
        w = counter if counter is not None else [0]
        return cls(_build(range(len(values)), values, 0, len(values), w), w)

    def _new(self, root) -> "PersistentMap":
        return PersistentMap(root, self.counter)

    # queries ----------------------------------------------------------------
    def __len__(self) -> int:
        return self.root.size if self.root is not None else 0

    def get(self, key, default=_MISSING):
        w = self.counter
        n = self.root
        while n is not None:
            w[0] += 1
            if key < n.key:
                n = n.left
            elif n.key < key:
                n = n.right
            else:
                return n.value
        if default is _MISSING:
            raise KeyError(key)
        return default

    def __getitem__(self, key):
        return self.get(key)

    def __contains__(self, key) -> bool:
        sentinel = object()
        return self.get(key, sentinel) is not sentinel

    def items(self) -> Iterator[tuple[Any, Any]]:
        """In key order, iteratively (visits each node once)."""
        w = self.counter
        stack: list[Node] = []
        n = self.root
        while stack or n is not None:
            while n is not None:
                stack.append(n)
                n = n.left
            n = stack.pop()
            w[0] += 1
            yield n.key, n.value
            n = n.right

    def keys(self) -> list:
        return [k for k, _ in self.items()]

    def values(self) -> list:
        return [v for _, v in self.items()]

    def __iter__(self):
        return iter(self.keys())

    def to_dict(self) -> dict:
        return dict(self.items())

    @property
    def height(self) -> int:
        return _h(self.root)

    def max_key(self):
        n = self.root
        if n is None:
            raise KeyError("max_key of an empty map")
        while n.right is not None:
            n = n.right
        return n.key

    # persistent updates -------------------------------------------------------
    def set(self, key, value) -> "PersistentMap":
        return self._new(_insert(self.root, key, value, self.counter))

    def update(self, key, f: Callable[[Any], Any]) -> "PersistentMap":
        """A new map with map[key] replaced by f(map[key]); KeyError if absent."""
        return self._new(_update(self.root, key, f, self.counter))

    def delete(self, key) -> "PersistentMap":
        return self._new(_delete(self.root, key, self.counter))

    # invariants (for tests) ------------------------------------------------------
    def check(self) -> None:
        """Assert the BST order, AVL balance and cached heights/sizes."""

        def go(n, lo, hi):
            if n is None:
                return 0, 0
            assert lo is _MISSING or lo < n.key, "order"
            assert hi is _MISSING or n.key < hi, "order"
            lh, ls = go(n.left, lo, n.key)
            rh, rs = go(n.right, n.key, hi)
            assert abs(lh - rh) <= 1, "balance"
            assert n.height == max(lh, rh) + 1, "height"
            assert n.size == ls + rs + 1, "size"
            return n.height, n.size

        go(self.root, _MISSING, _MISSING)

    def __repr__(self) -> str:
        return f"PersistentMap({self.to_dict()!r})"
