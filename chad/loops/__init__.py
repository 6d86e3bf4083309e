"""Loops: `iter n f x`, f applied n times to x (the loops extension). Efficient
CHAD (Smeding & Vákár) has no loop; its derivative follows the paper's `map`
(§7, per-element backpropagators run in scopes) with the steps chained through
the state. `register()` declares the nodes through chad/extend.py; the
composition root (chad/features.py) calls it. The source form `Iter` is a core
term (chad/terms.py), as the array forms are, so that the parser, the checker
and the printers know it; its rules are here.

    nodes.py       the target nodes of the derivative: IterFwd, IterBack
    evaluate.py    evaluation rules and costs (docs/cost-model.md, "Iteration")
    transform.py   efficient CHAD of iter
    show.py        `chad show` notation
See docs/language.md ("Iteration").
"""

from __future__ import annotations

from chad.extend import register_node
from chad.terms import Iter

from . import evaluate as E
from . import show
from . import transform as X
from .nodes import IterBack, IterFwd


def register() -> None:
    """Declare iter and the nodes of its derivative."""
    register_node(Iter, compiled="eval", eval=E.eval_iter, chad=X.chad_iter, show=show.show_iter)
    register_node(IterFwd, compiled="eval", eval=E.eval_iter_fwd, show=show.show_iter_fwd)
    register_node(IterBack, compiled="eval", eval=E.eval_iter_back, show=show.show_iter_back)
