"""Loops (the loops extension): `iter n f x`, f applied n times to x, and
`scan f x a`, the array of the states after each element of a (the state
updated by f (state, element)). Efficient CHAD (Smeding & Vákár) has no loop;
their derivatives follow the paper's `map` (§7, per-element backpropagators run
in scopes) with the steps chained through the state. `register()` declares the
nodes through chad/extend.py; the composition root (chad/features.py) calls it.
The source forms `Iter` and `Scan` are core terms (chad/terms.py), as the array
forms are, so that the parser, the checker and the printers know them; their
rules are here. `scan` uses the arrays extension's Bags (chad/arrays/).

    nodes.py       the target nodes of the derivatives: IterFwd, IterBack,
                   ScanFwd, ScanBack
    evaluate.py    evaluation rules and costs (docs/cost-model.md, "Iteration",
                   "Scan")
    transform.py   efficient CHAD of iter and scan
    forward.py     forward-mode CHAD of iter and scan
    show.py        `chad show` notation
See docs/language.md ("Iteration", "Scan").
"""

from __future__ import annotations

from chad.extend import register_node
from chad.terms import Iter, Scan

from . import evaluate as E
from . import show
from . import forward as FW
from . import transform as X
from .nodes import IterBack, IterFwd, ScanBack, ScanFwd


def register() -> None:
    """Declare iter and scan and the nodes of their derivatives."""
    register_node(Iter, compiled="eval", eval=E.eval_iter, chad=X.chad_iter,
                  forward=FW.forward_iter, show=show.show_iter)
    register_node(IterFwd, compiled="eval", eval=E.eval_iter_fwd, show=show.show_iter_fwd)
    register_node(IterBack, compiled="eval", eval=E.eval_iter_back, show=show.show_iter_back)
    register_node(Scan, compiled="eval", eval=E.eval_scan, chad=X.chad_scan,
                  forward=FW.forward_scan, show=show.show_scan)
    register_node(ScanFwd, compiled="eval", eval=E.eval_scan_fwd, show=show.show_scan_fwd)
    register_node(ScanBack, compiled="eval", eval=E.eval_scan_back, show=show.show_scan_back)
