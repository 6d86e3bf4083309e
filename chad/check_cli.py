"""`chad check`: the complexity criterion over generated programs (issue 6)."""

from __future__ import annotations


def add_check_parser(sub) -> None:
    sp = sub.add_parser("check", help="check the complexity criterion on generated programs")
    sp.add_argument("--transform", default="efficient", choices=("efficient", "naive"))
    sp.add_argument("--evm", default="array", choices=("map", "array", "parallel", "spec"))
    sp.add_argument("--programs", type=int, default=200)
    sp.add_argument("--max-depth", type=int, default=6)
    sp.add_argument("--seed", type=int, default=0)
    sp.add_argument("--json", action="store_true")


def cmd_check(args) -> int:
    from .errors import UsageError

    raise UsageError("chad check is not available yet")
