"""The command line (docs/language.md, "Command line"):

    chad run   FILE [--fn NAME] --args JSON [--json] [--strict]
    chad grad  FILE [--fn NAME] --args JSON [--ctg JSON] [--evm map|array|parallel] [--transform ...]
               [--backend compiled|interp] [--json] [--strict]
    chad jvp   FILE [--fn NAME] --args JSON --tangents JSON [--backend compiled|interp] [--json] [--strict]
    chad show  FILE [--fn NAME] [--transform naive|efficient] [--simplify | --source] [--json]
    chad compile FILE [--fn NAME] [--what grad|vjp|primal] [--transform ...] [--evm ...] [--no-simplify]
    chad cost  FILE [--fn NAME] --args JSON [--ctg JSON] [--transform ...] [--evm ...] [--json]
    chad check [--transform ...] [--evm ...] [--programs N] [--max-depth D] [--seed S] ...

    chad --version

Exit codes: 0 success, 1 a violated bound or failed check (or, with --strict, a
value or gradient that is not finite), 2 bad input (a message on stderr and
nothing on stdout). No input ever produces a traceback. Messages on stderr have
their control characters escaped (chad.errors.escape_control); JSON in and out
follows the policy of chad/values.py (strict JSON; "inf", "-inf", "nan").

Reals follow IEEE 754 (chad/primitives.py): `run` and `grad` print an infinity
or NaN in a value or gradient and warn about it on stderr, naming the def (and
the parameter: `chad grad: warning: the gradient of f with respect to x is not
finite (inf)`), exit 0; `--strict` makes each an error, exit 1, the result
still printed. numpy's own RuntimeWarnings are not shown.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import sys
import warnings

from . import features
from .api import BACKENDS, UNSET, cost, load, run, vjp
from .compile import backend as compiled
from .costmodel.measure import C_CONST, C_PARAMS, C_PRIMAL
from .check_cli import add_check_parser, cmd_check
from .proofs.cli import add_prove_parser, cmd_prove
from .cotangents import dense_to_json
from .deep import run_deep
from .errors import ChadError, UsageError, escape_control
from .forward_api import run_jvp
from .tangents import tangent_to_json
from .printer import print_program
from .target_printer import show_term, term_to_json
from .transform.registry import get_transform, transform_names
from .values import dumps, parse_json, value_to_json

EVM_CHOICES = ("map", "array", "parallel", "spec")


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # usage errors: exit 2, message on stderr
        self.print_usage(sys.stderr)
        raise SystemExit(_fail(f"usage error: {message}"))


def _fail(message: str, code: int = 2) -> int:
    # whatever the message echoes (file names, source lines, arguments), no control
    # character reaches the terminal
    print(escape_control(message, keep="\n"), file=sys.stderr)
    return code


def _version() -> str:
    try:
        return importlib.metadata.version("chad")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    features.load()  # the transforms and extensions: choices below list them
    p = _Parser(prog="chad", description="Efficient CHAD: reverse-mode AD with a cost guarantee.",
                epilog="Exit codes: 0 success, 1 a violated bound or failed check, 2 bad input. "
                       "See docs/language.md.")
    p.add_argument("--version", action="version", version=f"%(prog)s {_version()}",
                   help="print the version of chad and exit")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser,
                           metavar="COMMAND",
                           help="one of the commands below; `chad COMMAND --help` for its options")

    def common(sp, args=True, ctg=False, evm=False, transform=False,
               json_help="machine-readable output: one JSON object on stdout"):
        sp.add_argument("file", help="the program file (UTF-8 source of the language)")
        sp.add_argument("--fn", metavar="NAME", help="the def to use (default: the last one)")
        if args:
            sp.add_argument("--args", required=True, metavar="JSON",
                            help="JSON list with one value per parameter, e.g. '[2.0, [1, 2]]'; "
                                 'non-finite reals are the strings "inf", "-inf", "nan"; '
                                 "@FILE reads it from a file, @- from standard input")
        if ctg:
            sp.add_argument("--ctg", metavar="JSON",
                            help="JSON cotangent of the result (default 1.0 for a result of "
                                 "type R; null is the sparse zero); @FILE or @- as for --args")
        if evm:
            sp.add_argument("--evm", default="array", choices=EVM_CHOICES,
                            help="the EVM runtime accumulating the cotangents: array (mutable "
                                 "array, default), map (persistent map), parallel "
                                 "(thread-parallel), spec (the formalisation's LACM)")
        if transform:
            sp.add_argument("--transform", default="efficient", choices=transform_names(),
                            help="the CHAD transform (default efficient; naive keeps dense "
                                 "environment vectors, see docs/naive-chad.md)")
        sp.add_argument("--json", action="store_true", help=json_help)

    def command(name, help, description):
        return sub.add_parser(name, help=help, description=description)

    common(command("run", "evaluate a def",
                   "Evaluate a def on JSON arguments: prints its value (with --json, "
                   "the value and the step count)."))
    common(command("grad", "value and gradient",
                   "Evaluate a def and differentiate it by reverse-mode CHAD: prints the "
                   "value and one dense gradient per parameter."),
           ctg=True, evm=True, transform=True)
    jp = command("jvp", "value and forward-mode derivative",
                 "Evaluate a def and differentiate it by forward-mode CHAD "
                 "(docs/forward-mode.md): prints the value and its tangent, the derivative "
                 "applied to the tangents of the arguments.")
    common(jp)
    jp.add_argument("--tangents", required=True, metavar="JSON",
                    help="JSON list with one tangent per parameter, in the shape of its value "
                         "(null for a parameter with no real in it: Z, Bool, Array Z, ...); "
                         "@FILE or @- as for --args")
    jp.add_argument("--backend", choices=BACKENDS, default=None,
                    help="compiled (the default; generated Python) or interp (the counting "
                         "evaluator)")
    for name in ("run", "grad", "jvp"):
        sub.choices[name].add_argument(
            "--strict", action="store_true",
            help="a value or gradient that is not finite (inf, -inf, nan) is an error, "
                 "exit 1 (the result is still printed); without it, a warning on stderr")
    sub.choices["grad"].add_argument(
        "--backend", choices=BACKENDS, default=None,
        help="compiled (the default; generated Python, docs/compiler.md) or interp (the "
             "counting evaluator, the reference; the default with --evm spec)")
    common(command("show", "print the derivative program",
                   "Print the CHAD derivative of a def (its forward pass, giving the primal "
                   "result and the backpropagator)."),
           args=False, transform=True,
           json_help="a JSON object: the def, its parameters and result type, the "
                     "transform, the program text and its term as a tree")
    sub.choices["show"].add_argument(
        "--source", action="store_true",
        help="print the checked program instead of a derivative: the source with every "
             "type the checker inferred written out (docs/type-checker.md)")
    sub.choices["show"].add_argument(
        "--simplify", action="store_true",
        help="print the derivative after the simplifier (docs/simplifier.md): what the "
             "compiler generates code from; step counts are always those of the unsimplified term")
    cp = command("compile", "print the generated Python",
                 "Print the Python source the compiled backend generates for a def "
                 "(docs/compiler.md): its gradient (value and cotangents from the "
                 "arguments and the output cotangent), its forward and backward passes "
                 "(--what vjp) or its primal (--what primal).")
    common(cp, args=False, evm=True, transform=True, json_help="a JSON object with the source")
    cp.add_argument("--what", choices=("grad", "vjp", "primal"), default="grad",
                    help="which function to compile (default grad)")
    cp.add_argument("--no-simplify", action="store_true",
                    help="generate code from the unsimplified derivative")
    common(command("cost", "step counts and the TH2 bound",
                   "Count the steps of the primal and of the gradient and check the bound "
                   f"{C_CONST} + {C_PRIMAL}*primal + size(ctg) + {C_PARAMS}*|params| "
                   "(exit 1 when it fails)."),
           ctg=True, evm=True, transform=True)
    add_check_parser(sub)
    add_prove_parser(sub)
    return p


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"cannot read {path}: {getattr(e, 'strerror', None) or e}") from None


# where --args / --ctg came from when read from a file ("@FILE", "@-"): error
# messages about their contents name it
_ORIGINS: dict[str, str] = {}


def _json(text: str | None, what: str):
    """The JSON of an option: the text itself, or with `@FILE` the file's
    contents (`@-`: standard input)."""
    if text is None:
        return None
    if text.startswith("@"):
        path = text[1:]
        if not path:
            raise UsageError(f"{what}: '@' needs a file name (@FILE, or @- for standard input)")
        if path == "-":
            where, source = "<stdin>", sys.stdin.read()
        else:
            where, source = path, _read(path)
        _ORIGINS[what.lstrip("-")] = where
        return parse_json(source, f"{what} ({where})")
    return parse_json(text, what)


def _name_origin(e: ChadError) -> ChadError:
    """An error about the contents of --args or --ctg read from a file names it."""
    if isinstance(e, UsageError) and e.loc is None:
        for key, where in _ORIGINS.items():
            if e.message.startswith((key + "[", key + ":", key + ".")) or \
                    e.message.startswith(f"--{key}:"):
                e.message = f"{where}: {e.message}"
                break
    return e


def _load(args):
    source = _read(args.file)
    try:
        return load(source, args.file)
    except ChadError as e:
        raise e.with_source(source)


def cmd_run(args) -> int:
    prog = _load(args)
    d = prog.find(args.fn)
    value, steps = run(prog, _json(args.args, "--args"), d.name)
    out = value_to_json(d.result, value)
    print(dumps({"value": out, "steps": steps}) if args.json else dumps(out))
    return _finite_check(args, [(f"the value of {d.name}", out)])


def cmd_grad(args) -> int:
    prog = _load(args)
    d = prog.find(args.fn)
    value, backprop = vjp(prog, d.name, args.evm, args.transform, args.backend)(
        *_arg_list(args, d))
    grads = backprop(_ctg(args))
    g = [dense_to_json(p.ty, x) for p, x in zip(d.params, grads)]
    v = value_to_json(d.result, value)
    if args.json:
        print(dumps({"value": v, "gradient": g}))
    else:
        print(f"value: {dumps(v)}")
        print(f"gradient: {dumps(g)}")
    return _finite_check(args, [(f"the value of {d.name}", v)] + [
        (f"the gradient of {d.name} with respect to {p.name}", x) for p, x in zip(d.params, g)])


def cmd_jvp(args) -> int:
    prog = _load(args)
    d = prog.find(args.fn)
    tangents = _json(args.tangents, "--tangents")
    if not isinstance(tangents, list):
        raise UsageError(f"--tangents: expected a JSON list of {len(d.params)} tangent(s)")
    value, tangent = run_jvp(prog, d.name, _arg_list(args, d), tangents, args.backend,
                             names=("args", "tangents"))
    v = value_to_json(d.result, value)
    t = tangent_to_json(d.result, value, tangent)
    if args.json:
        print(dumps({"value": v, "tangent": t}))
    else:
        print(f"value: {dumps(v)}")
        print(f"tangent: {dumps(t)}")
    return _finite_check(args, [(f"the value of {d.name}", v),
                                (f"the tangent of {d.name}", t)])


_NONFINITE = ("nan", "inf", "-inf")  # how value_to_json writes a non-finite real


def _first_nonfinite(j, path: str = ""):
    """(kind, path) of the first non-finite real in the JSON output j (a real is
    the only thing written as one of these strings), or None."""
    stack = [(j, path)]
    while stack:
        x, at = stack.pop()
        if isinstance(x, str):
            if x in _NONFINITE:
                return x, at
        elif isinstance(x, list):
            stack.extend((x[i], f"{at}[{i}]") for i in range(len(x) - 1, -1, -1))
        elif isinstance(x, dict):
            stack.extend((v, f"{at}.{k}") for k, v in reversed(list(x.items())))
    return None


def _finite_check(args, parts) -> int:
    """Warn on stderr about each part (what, JSON) holding a non-finite real; with
    --strict each is an error and the exit code is 1."""
    bad = False
    for what, j in parts:
        found = _first_nonfinite(j)
        if found is None:
            continue
        bad = True
        kind, at = found
        level = "error" if args.strict else "warning"
        where = f" at {at}" if at else ""
        _fail(f"chad {args.command}: {level}: {what} is not finite ({kind}{where})")
    return 1 if bad and args.strict else 0


def _ctg(args):
    return UNSET if args.ctg is None else _json(args.ctg, "--ctg")


def _arg_list(args, d):
    a = _json(args.args, "--args")
    if not isinstance(a, list):
        raise UsageError(f"--args: expected a JSON list of {len(d.params)} argument(s)")
    return a


def cmd_show(args) -> int:
    prog = _load(args)
    d = prog.find(args.fn)
    if args.source:
        if args.simplify:
            raise UsageError("--source prints the checked program, not a derivative: "
                             "it does not take --simplify")
        text = print_program(prog)
        print(dumps({"def": d.name, "source": text}) if args.json else text)
        return 0
    spec = get_transform(args.transform)
    term = run_deep(spec.forward_term, d)
    if args.simplify:
        from .simplify import simplify  # the simplifier layer, only when asked for

        term = simplify(term)
    text = run_deep(show_term, term)
    if args.json:
        print(dumps({"def": d.name,
                     "params": [{"name": p.name, "type": str(p.ty)} for p in d.params],
                     "result": str(d.result), "transform": args.transform,
                     "description": spec.description, "program": text,
                     "term": run_deep(term_to_json, term)}))
        return 0
    params = ", ".join(f"{p.name} : {p.ty}" for p in d.params)
    print(f"# {args.transform} CHAD of {d.name}({params}) : {d.result}"
          + (", simplified" if args.simplify else ""))
    print(f"# {spec.description}")
    print("# its value: (primal result, backpropagator)")
    print(text)
    return 0


def cmd_compile(args) -> int:
    prog = _load(args)
    d = prog.find(args.fn)
    simplify = not args.no_simplify
    if args.what == "primal":
        source = compiled.primal_module(prog, d, simplify).source
    else:
        if args.evm == "spec":
            raise UsageError("--evm spec is a model of the EVM for the counting evaluator; "
                             "compiled code runs on map, array or parallel")
        from .api import _check_first_order
        _check_first_order(d)
        if args.what == "grad":
            source = compiled.gradient_module(prog, d, args.transform, args.evm, simplify).source
        else:
            fwd, bwd = compiled.vjp_modules(prog, d, args.transform, args.evm, simplify)
            source = fwd.source + "\n" + bwd.source
    if args.json:
        print(dumps({"def": d.name, "what": args.what, "transform": args.transform,
                     "evm": args.evm, "simplified": simplify, "source": source}))
    else:
        sys.stdout.write(source)
    return 0


def cmd_cost(args) -> int:
    prog = _load(args)
    d = prog.find(args.fn)
    r = cost(prog, _arg_list(args, d), _ctg(args), d.name, args.transform, args.evm)
    if args.json:
        print(dumps(r.as_json()))
    else:
        print(f"primal_steps: {r.primal_steps}")
        print(f"gradient_steps: {r.gradient_steps}")
        print(f"ctg_size: {r.ctg_size}")
        print(f"params: {r.params}")
        print(f"bound: {r.bound}  (= {C_CONST} + {C_PRIMAL}*{r.primal_steps} + {r.ctg_size} "
              f"+ {C_PARAMS}*{r.params})")
        print(f"holds: {'yes' if r.holds else 'NO'}")
    return 0 if r.holds else 1


COMMANDS = {"run": cmd_run, "grad": cmd_grad, "jvp": cmd_jvp, "show": cmd_show,
            "cost": cmd_cost, "compile": cmd_compile}


def main(argv: list[str] | None = None) -> int:
    _ORIGINS.clear()
    try:
        args = build_parser().parse_args(argv)
        if args.command == "check":
            return cmd_check(args)
        if args.command == "prove":
            return cmd_prove(args)
        with warnings.catch_warnings():
            # an infinity or NaN is reported once, by _finite_check, not by numpy
            warnings.filterwarnings("ignore", category=RuntimeWarning,
                                    message="(overflow|invalid value|divide by zero) encountered")
            return COMMANDS[args.command](args)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else 2
    except ChadError as e:
        return _fail(str(_name_origin(e)), 2)
    except RecursionError:
        return _fail("error: the program is nested too deeply to process", 2)
    except KeyboardInterrupt:
        return _fail("interrupted", 130)
    except BrokenPipeError:  # e.g. `chad show ... | head`: the reader left, not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as e:  # a bug, not bad input: still no traceback for the user
        return _fail(f"internal error: {type(e).__name__}: {e} (please report this)", 2)


if __name__ == "__main__":
    sys.exit(main())
