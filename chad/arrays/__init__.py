"""Arrays: build, index, fold, length, sum, map (seed 000 §7-8). Importing this
package registers the array rules with the evaluator, the transform and the
cotangent conversions.

    bag.py          Bag (BEmpty, BOne, BPlus, BArray), collect, scatter, fold trees
    nodes.py        the target-only array operations
    evaluate.py     evaluation rules and costs (source and target), prim SUM
    transform.py    efficient CHAD of build / ! / length / fold / map, gathers
    cotangents.py   JSON in, dense out
    show.py         `chad show` notation
See docs/arrays.md.
"""

from . import bag, nodes  # noqa: F401
from . import evaluate  # noqa: F401
from . import transform  # noqa: F401
from . import cotangents  # noqa: F401
from . import show  # noqa: F401
