"""`python -m experiments` (`make experiments`): the complexity experiments of
docs/complexity-checker.md, written as markdown tables and PNG plots under experiments/out/.

  (a) families.md, family_<name>.png
      naive vs efficient on each program family (op_fst, t_magic, nested_lambdas,
      build_index): step counts against n, exact fits, z3 verdicts.
  (b) runtimes.md, runtimes.png
      the persistent-map EVM against the mutable-array EVM, in the runtimes' own
      work counts (`evm.work`), as |Γ| grows: the paper's log factor (§5).
  (c) ratios.md, ratios.png
      the distribution of gradient/primal step ratios, and of the constant c each
      program needs, over generated programs, per language fragment and transform;
      z3's smallest c per fragment.

Options: --out DIR (default experiments/out), --quick (fewer programs and sizes;
for tests), --only a,b,c.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from chad.proofs.statements import TH2_C, TH2_C1, TH2_C2  # noqa: E402

K_TEXT = f"{TH2_C}/{TH2_C1}/{TH2_C2}"  # TH2's c/c'/c''

HERE = os.path.dirname(os.path.abspath(__file__))
COLORS = {"efficient": "tab:blue", "naive": "tab:orange", "naive-ho": "tab:red"}


def _table(header: list[str], rows: list[list]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---:" for _ in header) + "|"]
    out += ["| " + " | ".join(str(x) for x in r) + " |" for r in rows]
    return "\n".join(out)


# ----------------------------------------------------------------- (a) families


def families(out: str, quick: bool = False) -> str:
    from chad.costmodel.families import FAMILIES, study

    md = ["# (a) Program families: naive vs efficient CHAD", "",
          "Step counts of each family member (primal = the program, gradient = TH2's left "
          "side), exact fits as functions of n (verified on the held-back n, marked *), "
          "and z3's verdict on `exists c, c' >= 0. forall n: gradient(n) <= c*primal(n) + "
          "c' + size(ctg)(n) + 4*|params|(n)`.", ""]
    for fam in FAMILIES.values():
        results = [study(fam, t) for t in fam.transforms]
        md += [f"## {fam.name}", "", f"`{fam.description}` — {fam.reference}", ""]
        header = ["n", "primal"] + [f"gradient ({r.transform})" for r in results] + \
                 [f"bound ({K_TEXT})"]
        rows = []
        for i, n in enumerate(results[0].ns):
            o0 = results[0].points[i]
            mark = "*" if n in fam.heldout else ""
            rows.append([f"{n}{mark}", o0.primal_steps]
                        + [r.points[i].gradient_steps
                           if r.points[i].holds(r.constants)
                           else f"**{r.points[i].gradient_steps}**" for r in results]
                        + [o0.bound(results[0].constants)])
        md += [_table(header, rows), "", "(bold: above the bound)", ""]
        fit_rows = []
        for r in results:
            if r.fit is None:
                fit_rows.append([r.transform, "-", "-", "-", f"fit failed: {r.error}"])
                continue
            v = r.verdict
            verdict = (f"bounded (sat), c = {v.witness[0]}, c' = {v.witness[1]}"
                       if v.status == "bounded" else f"{v.status} ({v.z3_result})")
            if v.status == "bounded" and not r.within:
                verdict += f" — **not with c = {r.constants.c}**"
            fit_rows.append([r.transform, f"`{r.fit.primal}`", f"`{r.fit.gradient}`",
                             f"`{r.fit.ctg_size}`; `{r.fit.params}`", verdict])
        md += [_table(["transform", "primal(n)", "gradient(n)", "size(ctg)(n); params(n)",
                       "z3 verdict"], fit_rows), ""]
        png = f"family_{fam.name}.png"
        _plot_family(os.path.join(out, png), fam, results)
        md += [f"![{fam.name}]({png})", ""]
    text = "\n".join(md)
    with open(os.path.join(out, "families.md"), "w") as f:
        f.write(text + "\n")
    return text


def _plot_family(path, fam, results) -> None:
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    ns = list(results[0].ns)
    for r in results:
        col = COLORS.get(r.transform)
        ax.plot(ns, [o.gradient_steps for o in r.points], "o-", color=col,
                label=f"gradient, {r.transform} ({r.status})")
    ax.plot(ns, [o.bound(results[0].constants) for o in results[0].points], "k--",
            label=f"bound {TH2_C1} + {TH2_C}·primal + size + {TH2_C2}·|Γ|")
    ax.plot(ns, [o.primal_steps for o in results[0].points], "k.:", label="primal")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("n")
    ax.set_ylabel("steps")
    ax.set_title(f"{fam.name}: {fam.description}", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ----------------------------------------------------------------- (b) runtimes


def _let_chain(n: int):
    """x : R ⊢ let y1 = x * x in let y2 = y1 * x in ... in y_n (|Γ| grows to n + 1)."""
    from chad.terms import Def, Let, Pair, Param, Prim, Program, Var
    from chad.types import Prod, R

    x = Var("x", ty=R)
    names = [f"y{i + 1}" for i in range(n)]
    body = Var(names[-1], ty=R)
    for i in reversed(range(n)):
        prev = x if i == 0 else Var(names[i - 1], ty=R)
        rhs = Prim("MUL", Pair(prev, x, ty=Prod(R, R)), ty=R)
        body = Let(names[i], rhs, body, ty=R)
    return Program((Def("f", (Param("x", R),), R, body),)), [1.0], 1.0


def runtimes(out: str, quick: bool = False) -> str:
    from chad.costmodel.families import t_magic
    from chad.costmodel.measure import measure

    ns = [8, 16, 32, 64, 128] if quick else [8, 16, 32, 64, 128, 256, 512, 1024]
    progs = {
        "t_magic (|Γ| = n parameters, n adds)": lambda n: (lambda i: (i.program, i.args, i.ctg))(
            t_magic(n)),
        "let chain (|Γ| grows to n + 1 by lets)": _let_chain,
    }
    md = ["# (b) Persistent map vs mutable array: the runtimes' own work", "",
          "The abstract cost (gradient steps, the formalisation's LACM costs) is the same for "
          "both EVMs. Their own work counts (`evm.work`: tree nodes visited or created by the "
          "persistent AVL map, chad/runtime/map_evm.py; cells touched by the mutable array, "
          "chad/runtime/array_evm.py) show the log factor that §5 of Efficient CHAD (Smeding & Vákár) removes.", ""]
    series = {}
    for label, make in progs.items():
        rows, xs, wm, wa = [], [], [], []
        for n in ns:
            prog, args, ctg = make(n)
            om = measure(prog, args, ctg, "efficient", "map", with_work=True)
            oa = measure(prog, args, ctg, "efficient", "array", with_work=True)
            assert om.gradient_steps == oa.gradient_steps
            work_map, work_arr = om.work, oa.work
            rows.append([n, om.gradient_steps, work_map, work_arr,
                         f"{work_map / work_arr:.2f}", f"{work_map / (n * math.log2(n)):.2f}",
                         f"{work_arr / n:.2f}"])
            xs.append(n)
            wm.append(work_map)
            wa.append(work_arr)
        series[label] = (xs, wm, wa)
        md += [f"## {label}", "",
               _table(["n", "gradient steps (both)", "map work", "array work", "map / array",
                       "map / (n log2 n)", "array / n"], rows), ""]
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    for (label, (xs, wm, wa)), ls in zip(series.items(), ["-", "--"]):
        short = label.split(" (")[0]
        ax.plot(xs, wm, "o" + ls, color="tab:purple", label=f"{short}: persistent map")
        ax.plot(xs, wa, "s" + ls, color="tab:green", label=f"{short}: mutable array")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("n")
    ax.set_ylabel("EVM work (own count)")
    ax.set_title("EVM work as |Γ| grows")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "runtimes.png"), dpi=110)
    plt.close(fig)
    md += ["![runtimes](runtimes.png)", ""]
    text = "\n".join(md)
    with open(os.path.join(out, "runtimes.md"), "w") as f:
        f.write(text + "\n")
    return text


# ----------------------------------------------------------------- (c) ratios


def ratios(out: str, quick: bool = False, seed: int = 0) -> str:
    from chad.costmodel.criterion import check_strategy, sample_observations
    from chad.costmodel.fit import smallest_c

    n = 60 if quick else 300
    fragments = [
        ("first-order", {"arrays": False, "functions": False}, ["efficient", "naive"]),
        ("arrays", {"arrays": True, "functions": False}, ["efficient"]),
        ("functions", {"arrays": False, "functions": True}, ["efficient", "naive-ho"]),
        ("chains", {"arrays": True, "functions": True, "shape": "chains"}, ["efficient"]),
    ]
    md = ["# (c) Gradient/primal step ratios over generated programs", "",
          f"{n} programs per fragment (`chad check`'s generator, seed {seed}), each measured "
          f"under every transform that applies. `c needed` is (gradient - {TH2_C1} - size(ctg) - "
          f"{TH2_C2}|Γ|) / primal, the constant the program needs with c' = {TH2_C1}, "
          f"c'' = {TH2_C2}; z3's "
          "smallest c is its maximum, rounded up. `chains` are `chad check --shape chains` "
          "programs (one construct nested up to 16 times, every feature on), sampled "
          "without targeting.", ""]
    rows, all_obs = [], {}
    for frag, fl, ts in fragments:
        obs = sample_observations(ts, n, seed, check_strategy(**fl))
        for t in ts:
            os_ = obs[t]
            if not os_:
                continue
            all_obs[(frag, t)] = os_
            r = sorted(o.ratio for o in os_)
            need = sorted(o.needed_c for o in os_)
            fit = smallest_c(os_)
            viol = sum(1 for o in os_ if not o.holds())
            rows.append([frag, t, len(os_), f"{r[0]:.1f}", f"{_q(r, .5):.1f}", f"{_q(r, .9):.1f}",
                         f"{r[-1]:.1f}", f"{_q(need, .5):.1f}", f"{need[-1]:.1f}", fit.c, viol])
    md += [_table(["fragment", "transform", "programs", "ratio min", "median", "p90", "max",
                   "c needed (median)", "c needed (max)", "z3 smallest c", f"violations of {K_TEXT}"],
                  rows), ""]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    needs = [o.needed_c for os_ in all_obs.values() for o in os_]
    lo_c, hi_c = min(min(needs), 0.0), max(max(needs), 40.0)
    for (frag, t), os_ in all_obs.items():
        label = f"{frag}, {t}"
        ls = {"first-order": "-", "arrays": "--", "functions": ":", "chains": "-."}[frag]
        col = "tab:green" if frag == "chains" else COLORS.get(t)
        kw = dict(histtype="step", linewidth=1.6, linestyle=ls, color=col, label=label)
        axes[0].hist([o.ratio for o in os_], bins=_bins([o.ratio for o in os_]), **kw)
        axes[1].hist([o.needed_c for o in os_], bins=60, range=(lo_c, hi_c), **kw)
    axes[0].set_xlabel("gradient steps / primal steps")
    axes[0].set_ylabel("programs")
    axes[0].set_xscale("log")
    axes[1].axvline(TH2_C, color="k", linewidth=1, label=f"c = {TH2_C} (proved)")
    axes[1].set_xlabel(f"c needed (c' = {TH2_C1}, c'' = {TH2_C2})")
    axes[1].set_yscale("log")
    for ax in axes:
        ax.legend(fontsize=7)
    fig.suptitle("Distribution over generated programs")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "ratios.png"), dpi=110)
    plt.close(fig)
    md += ["![ratios](ratios.png)", ""]
    text = "\n".join(md)
    with open(os.path.join(out, "ratios.md"), "w") as f:
        f.write(text + "\n")
    return text


def _q(xs, q):
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def _bins(xs):
    import numpy as np

    lo, hi = max(min(xs), 1e-2), max(xs)
    if hi <= lo:
        return 10
    if lo <= 0:
        return 30
    return np.geomspace(lo, hi * 1.01, 30)


# ----------------------------------------------------------------- main


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=os.path.join(HERE, "out"))
    p.add_argument("--quick", action="store_true", help="fewer programs and sizes")
    p.add_argument("--only", default="a,b,c", help="which experiments (a,b,c)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    which = {x.strip() for x in args.only.split(",")}
    index = ["# Complexity experiments (`python -m experiments`)", "",
             "Generated by experiments/__main__.py; see docs/complexity-checker.md.", ""]
    steps = [("a", "families.md", "(a) naive vs efficient on the program families",
              lambda: families(args.out, args.quick)),
             ("b", "runtimes.md", "(b) persistent map vs mutable array (EVM work)",
              lambda: runtimes(args.out, args.quick)),
             ("c", "ratios.md", "(c) distribution of gradient/primal ratios",
              lambda: ratios(args.out, args.quick, args.seed))]
    for key, fname, title, run in steps:
        if key not in which:
            continue
        t0 = time.perf_counter()
        print(f"experiment {title} ...", file=sys.stderr, flush=True)
        run()
        dt = time.perf_counter() - t0
        print(f"  done in {dt:.1f} s -> {os.path.join(args.out, fname)}", file=sys.stderr)
        index.append(f"* [{title}]({fname})")
    with open(os.path.join(args.out, "README.md"), "w") as f:
        f.write("\n".join(index) + "\n")
    print(os.path.join(args.out, "README.md"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
