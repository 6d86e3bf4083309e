"""The Python front end: `@chad.function` translates a typed subset of Python
into a chad program (docs/tutorial.md shows it; the subset is listed there).

One module per step: source.py (the function's `ast` from its file), names.py
(safe chad names), annotations.py (types from annotations), expressions.py,
calls.py and statements.py (the translation, to text with a position map:
emit.py; ex.py the translated expression and literals), scope.py (locals,
lambdas and nested defs), library.py (the math/numpy functions recognised),
values.py (Python values in and out), plans.py and plan_code.py (the call
plans: generated converters from Python values straight to the compiled
code's and back, per signature and kind of call), function.py (the
decorator), errors.py.
It follows no paper: it only produces programs of the language, whose
derivatives are Efficient CHAD's (Smeding & Vákár).
"""

from .annotations import Array
from .function import ChadFunction, Function, from_text, function, to_source

__all__ = ["Array", "ChadFunction", "Function", "from_text", "function", "to_source"]
