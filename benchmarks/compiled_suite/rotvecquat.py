"""Program 2 of the compiled-gradient benchmark: rotating a 3-vector by a
quaternion, the `frotvecquat` benchmark of tomsmeding/ad-dualrev-th
(bench/Main.hs; "the example function from Krawiec et al. 2022", i.e. Krawiec,
Peyton Jones, Krishnaswami, Ellis, Eisenberg and Fitzgibbon, *Provably correct,
asymptotically efficient, higher-order reverse-mode automatic differentiation*):

    rotate_vec_by_quat v q =
      let u = q_to_vec q                -- Quaternion x y z w  ->  Vec3 x y z
          s = w
      in scale (2.0 * dot u v) u `vadd` scale (s * s - dot u u) v
           `vadd` scale (2.0 * s) (cross u v)

copied exactly, including its `cross`, whose second component is written
`az*bz - ax*bz` (the textbook cross product has `az*bx - ax*bz`): the benchmark
is that function, as its authors timed it. Its input there is
v = Vec3 1 2 3, q = Quaternion 4 5 6 7 (no normalisation); so here.

The language has pairs, not triples: a Vec3 is `R * R * R` = `(x, (y, z))` and a
quaternion `R * R * R * R` = `(x, (y, (z, w)))`. The result is a Vec3, so the
gradient is a vector-Jacobian product with the fixed cotangent `CTG`; every
peer computes that product (torch.autograd.grad with grad_outputs, jax.vjp,
autograd.make_vjp). The peers keep the scalar formulation (seven scalar
inputs), as ad-dualrev-th does.
"""

from __future__ import annotations

from . import common
from .common import Case, Impl

TEXT = """\
# frotvecquat of tomsmeding/ad-dualrev-th (bench/Main.hs), its cross included
def dot3(p : R * R * R, q : R * R * R) : R =
  let (px, pyz) = p in let (py, pz) = pyz in
  let (qx, qyz) = q in let (qy, qz) = qyz in
  px * qx + py * qy + pz * qz

def vadd(p : R * R * R, q : R * R * R) : R * R * R =
  let (px, pyz) = p in let (py, pz) = pyz in
  let (qx, qyz) = q in let (qy, qz) = qyz in
  (px + qx, (py + qy, pz + qz))

def scale(k : R, p : R * R * R) : R * R * R =
  let (x, yz) = p in let (y, z) = yz in
  (k * x, (k * y, k * z))

def cross(a : R * R * R, b : R * R * R) : R * R * R =
  let (ax, ayz) = a in let (ay, az) = ayz in
  let (bx, byz) = b in let (by, bz) = byz in
  (ay * bz - az * by, (az * bz - ax * bz, ax * by - ay * bx))

def rotvecquat(v : R * R * R, q : R * R * R * R) : R * R * R =
  let (qx, qyzw) = q in let (qy, qzw) = qyzw in let (qz, s) = qzw in
  let u = (qx, (qy, qz)) in
  vadd(vadd(scale(2.0 * dot3(u, v), u), scale(s * s - dot3(u, u), v)),
       scale(2.0 * s, cross(u, v)))
"""

ARGS = ((1.0, (2.0, 3.0)), (4.0, (5.0, (6.0, 7.0))))
CTG = (0.3, (-0.7, 1.1))


def rotate(vx, vy, vz, qx, qy, qz, s):
    """The formula on any numbers with + - * (floats, 0-d tensors, tracers,
    autograd boxes), in the order of evaluation of the Haskell (and chad) text."""
    def dot(p, q):
        return p[0] * q[0] + p[1] * q[1] + p[2] * q[2]

    def vadd(p, q):
        return (p[0] + q[0], p[1] + q[1], p[2] + q[2])

    def scale(k, p):
        return (k * p[0], k * p[1], k * p[2])

    def cross(a, b):
        return (a[1] * b[2] - a[2] * b[1], a[2] * b[2] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])

    u, v = (qx, qy, qz), (vx, vy, vz)
    return vadd(vadd(scale(2.0 * dot(u, v), u), scale(s * s - dot(u, u), v)),
                scale(2.0 * s, cross(u, v)))


def _flat_args():
    (vx, (vy, vz)), (qx, (qy, (qz, w))) = ARGS
    return vx, vy, vz, qx, qy, qz, w


def _flat_ctg():
    c0, (c1, c2) = CTG
    return c0, c1, c2


def _nest(g):
    """Seven flat gradients to chad's shape ((v), (q))."""
    return ((g[0], (g[1], g[2])), (g[3], (g[4], (g[5], g[6]))))


def numpy_impl() -> Impl:
    """The vector-Jacobian product written out by hand in Python floats."""
    vx, vy, vz, ux, uy, uz, s = _flat_args()
    g0, g1, g2 = _flat_ctg()

    def grad():
        duv = ux * vx + uy * vy + uz * vz
        duu = ux * ux + uy * uy + uz * uz
        a, b, c = 2.0 * duv, s * s - duu, 2.0 * s
        cr0, cr1, cr2 = uy * vz - uz * vy, uz * vz - ux * vz, ux * vy - uy * vx
        value = (a * ux + b * vx + c * cr0, a * uy + b * vy + c * cr1,
                 a * uz + b * vz + c * cr2)
        ga = g0 * ux + g1 * uy + g2 * uz
        gb = g0 * vx + g1 * vy + g2 * vz
        gc = g0 * cr0 + g1 * cr1 + g2 * cr2
        h0, h1, h2 = c * g0, c * g1, c * g2          # into the cross product
        gduv, gduu = 2.0 * ga, -gb
        gux = a * g0 + gduv * vx + 2.0 * gduu * ux - h1 * vz + h2 * vy
        guy = a * g1 + gduv * vy + 2.0 * gduu * uy + h0 * vz - h2 * vx
        guz = a * g2 + gduv * vz + 2.0 * gduu * uz - h0 * vy + h1 * vz
        gvx = b * g0 + gduv * ux - h2 * uy
        gvy = b * g1 + gduv * uy - h0 * uz + h2 * ux
        gvz = b * g2 + gduv * uz + h0 * uy + h1 * (uz - ux)
        gs = 2.0 * s * gb + 2.0 * gc
        return value, ((gvx, (gvy, gvz)), (gux, (guy, (guz, gs))))

    def primal():
        return rotate(vx, vy, vz, ux, uy, uz, s)

    return Impl(grad=grad, primal=primal)


def torch_impl() -> Impl:
    t = common.torch()
    leaves = tuple(common.torch_leaf(t, a) for a in _flat_args())
    ctg = common.torch_ctg(t, CTG)

    def grad():
        out = rotate(*leaves)
        return out, t.autograd.grad(out, leaves, grad_outputs=ctg)

    def primal():
        with t.no_grad():
            return rotate(*leaves)

    return Impl(grad=grad, primal=primal, unpack=lambda r: (r[0], _nest(r[1])))


def jax_impl() -> Impl:
    jax, jnp = common.jax()

    def g(args, ctg):
        out, back = jax.vjp(lambda *a: rotate(*a), *args)
        return out, back(ctg)

    gj, pj = jax.jit(g), jax.jit(lambda args: rotate(*args))
    args = tuple(jnp.asarray(a) for a in _flat_args())
    ctg = tuple(jnp.asarray(c) for c in _flat_ctg())
    return Impl(grad=lambda: jax.block_until_ready(gj(args, ctg)),
                primal=lambda: jax.block_until_ready(pj(args)),
                unpack=lambda r: (r[0], _nest(r[1])))


def autograd_impl() -> Impl:
    ag, _anp = common.autograd()
    from autograd.builtins import tuple as boxed_tuple

    def f(*a):
        return boxed_tuple(rotate(*a))  # a boxed tuple: a differentiable output

    vjp = ag.make_vjp(f, argnum=tuple(range(7)))
    args, ctg = _flat_args(), _flat_ctg()

    def grad():
        back, out = vjp(*args)
        return out, back(ctg)

    return Impl(grad=grad, primal=lambda: rotate(*args),
                unpack=lambda r: (r[0], _nest(r[1])))


def case(quick: bool = False) -> Case:
    return Case("rotvecquat", "rotate vec by quat", TEXT, "rotvecquat", ARGS, CTG, True,
                {"torch": torch_impl, "jax": jax_impl, "autograd": autograd_impl,
                 "numpy": numpy_impl})
