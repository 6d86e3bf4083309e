"""The Python functions a decorated function may call, found by identity (so
`from math import sin as s` works and a user's own `sin` is not mistaken for it):
elementwise functions of `math` and `numpy` and the builtins the front end
translates itself.

UNARY maps a function to the chad primitive it is; on an array argument the
numpy functions apply elementwise (`map`).
"""

from __future__ import annotations

import builtins
import math

import numpy as np

# function object -> chad prefix primitive
UNARY: dict[object, str] = {}
for _name, _prim in [("sin", "sin"), ("cos", "cos"), ("exp", "exp"), ("log", "log"),
                     ("tanh", "tanh"), ("sqrt", "sqrt"), ("atan", "atan"), ("log1p", "log1p"),
                     ("fabs", "abs")]:
    UNARY[getattr(math, _name)] = _prim
for _name, _prim in [("sin", "sin"), ("cos", "cos"), ("exp", "exp"), ("log", "log"),
                     ("tanh", "tanh"), ("sqrt", "sqrt"), ("arctan", "atan"), ("log1p", "log1p"),
                     ("abs", "abs"), ("absolute", "abs"), ("fabs", "abs")]:
    UNARY[getattr(np, _name)] = _prim

# functions written with the primitives: name -> how (see expressions.py)
DERIVED: dict[object, str] = {
    math.tan: "tan", np.tan: "tan", math.expm1: "expm1", np.expm1: "expm1",
    math.floor: "floor", math.ceil: "ceil", math.pow: "pow", np.power: "pow",
    np.maximum: "max", np.minimum: "min", np.square: "square", np.dot: "dot",
    np.sum: "sum",
}

BUILTINS: dict[object, str] = {
    builtins.abs: "abs", builtins.max: "max", builtins.min: "min", builtins.len: "len",
    builtins.sum: "sum", builtins.float: "float", builtins.int: "int", builtins.range: "range",
    builtins.bool: "bool",
}

# the builtins with an explanation of what to write instead
REFUSED: dict[object, str] = {
    builtins.print: "print has no effect in chad (no side effects): remove it",
    builtins.round: "round is not supported: write math.floor(x + 0.5)",
    builtins.enumerate: "enumerate is not supported: write for i in range(len(a)) and a[i]",
    builtins.zip: "zip is not supported: write for i in range(len(a)) and a[i], b[i]",
    builtins.map: "map is not supported: write a list comprehension [f(x) for x in a]",
    builtins.list: "list(...) is not supported: write a list comprehension",
    builtins.sorted: "sorted is not supported",
    builtins.isinstance: "isinstance is not supported: types are fixed by the annotations",
}
