"""Functions: lambdas, application and def calls (seed 000 §9, appendix C).
Importing this package registers their rules.

    types.py      closure-converted types, cotangent types, runtime values
    terms.py      the node classes of converted programs and derivatives
    convert.py    typed closure conversion
    efficient.py  efficient CHAD of closures (appendix C), on the fly after conversion
    calls.py      def calls: closed functions, derivatives called, not inlined
    naive_ho.py   naive higher-order CHAD (§9), its own TransformSpec "naive-ho"
    evaluate.py   evaluation rules and printing of the new nodes
    programs.py   t_n, and generated higher-order programs for the tests
"""

from . import calls, efficient, evaluate, types

types.register_types()
evaluate.register()
evaluate.register_printing()
efficient.register()
calls.register()

from . import naive_ho  # noqa: E402,F401  (registers the naive-ho Chad class)
