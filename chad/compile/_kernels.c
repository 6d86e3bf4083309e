/* Loops numpy lacks, in C (chad/compile/kernels.py): running sums in the
 * evaluator's order, a select that does not branch, the fold trees of short
 * rows, the dense sums of bags (column sums of short rows, np.add.at's
 * additions, a chain of adds of rows at indices read from the rows), the
 * rows' sums of a block of products without the block (dots), and an
 * elementwise expression of +, -, *, / in one pass (fuse).
 *
 * The reverse pass of a vectorised loop adds every element's contributions to
 * a cell the elements share one after the other, element 0's first, each
 * element's in program order (chad/compile/vector_support.py, Pass.flush):
 * the sum is sequential, s = ((s + x0) + x1) + ..., and must be, to give the
 * evaluator's value bit for bit. numpy has no sequential reduction but its
 * running sum (np.cumsum), which stores every partial sum: about 3.4 ns per
 * element on the development machine, where this loop, one IEEE addition per
 * element and nothing stored, takes 0.9 ns. The additions are the same ones,
 * in the same order: plain C doubles, no reassociation (the file is compiled
 * without -ffast-math; see setup.py).
 *
 * np.where(c, a, b) of reals branches on every element: with a mask that
 * follows no pattern (`if x > 0.0` over random data) np.where took 3.0 ns an
 * element for 10^5 elements on the development machine, this loop 0.4 ns.
 * `select` takes each element's 64 bits from a or b with bit
 * operations (the bits themselves, NaN payloads and signed zeros included).
 *
 * Arrays come in through the buffer protocol (numpy arrays and memoryviews;
 * no numpy headers are needed to build this); the loops release the GIL, so
 * the parallel runtime's threads run them side by side.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* One 1-D strided view of doubles (format "d") or of bools (format "?"). */
typedef struct {
    Py_buffer view;
    const char *data;
    Py_ssize_t len, stride;
    int held;
} vec;

static void release(vec *v) {
    if (v->held) {
        PyBuffer_Release(&v->view);
        v->held = 0;
    }
}

static int get_vec(PyObject *obj, vec *v, char fmt, int writable) {
    int flags = PyBUF_STRIDES | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    memset(v, 0, sizeof(*v));
    if (PyObject_GetBuffer(obj, &v->view, flags) < 0)
        return -1;
    v->held = 1;
    const char *f = v->view.format ? v->view.format : "B";
    if (f[0] == '=' || f[0] == '<' || f[0] == '@')
        f++;
    Py_ssize_t size = fmt == 'd' ? (Py_ssize_t)sizeof(double) : 1;
    if (v->view.ndim != 1 || f[0] != fmt || f[1] != '\0' || v->view.itemsize != size) {
        PyErr_Format(PyExc_TypeError, "expected a 1-D array of format '%c'", fmt);
        release(v);
        return -1;
    }
    v->data = (const char *)v->view.buf;
    v->len = v->view.shape[0];
    v->stride = v->view.strides[0];
    return 0;
}

#define AT(v, i) (*(const double *)((v).data + (i) * (v).stride))

/* A loop GCC builds twice, for AVX2 and for the baseline, choosing one when
 * the module loads (as numpy's own loops): wider vectors where the machine
 * has them, the same operations in the same order. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define WIDE_LOOP __attribute__((target_clones("avx2", "default")))
#else
#define WIDE_LOOP
#endif

/* -x by its sign bit: the negation numpy's `negative` makes, which the
 * compiler may not fold into a subtraction (s + -x and s - x differ in the
 * sign of a NaN x) */
static inline double flip(double x) {
    uint64_t b;
    memcpy(&b, &x, 8);
    b ^= 0x8000000000000000ULL;
    memcpy(&x, &b, 8);
    return x;
}

/* running(parts, masks, n, start[, negs]) -> float or None
 *
 * parts: a tuple of 1-D arrays of doubles, part p holding n * w_p values (its
 * w_p adds of element 0, then element 1's, ...); masks: a tuple as long, each
 * None (every element added) or a 1-D bool array of n (the elements that ran
 * the add); start: the cell's value, or None (the sum starts at the first
 * value added); negs: None or a tuple as long of bools, true where the part's
 * adds are of its values negated (-x, as numpy's `negative`). The value after
 * element 0's adds (part 0's, then part 1's, ...), then element 1's, ...;
 * None when no value was added (start too). */
static PyObject *running(PyObject *self, PyObject *args) {
    PyObject *parts, *masks, *start, *negs = Py_None;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "O!O!nO|O", &PyTuple_Type, &parts, &PyTuple_Type, &masks, &n,
                          &start, &negs))
        return NULL;
    Py_ssize_t k = PyTuple_GET_SIZE(parts);
    if (PyTuple_GET_SIZE(masks) != k || n < 0) {
        PyErr_SetString(PyExc_ValueError,
                        n < 0 ? "running: n < 0" : "running: parts and masks differ in number");
        return NULL;
    }
    if (negs != Py_None && (!PyTuple_Check(negs) || PyTuple_GET_SIZE(negs) != k)) {
        PyErr_SetString(PyExc_ValueError, "running: negs is not None or a tuple as long as parts");
        return NULL;
    }
    double s = 0.0;
    int have = 0, added = 0;
    if (start != Py_None) {
        s = PyFloat_AsDouble(start);
        if (s == -1.0 && PyErr_Occurred())
            return NULL;
        have = 1;
    }
    vec *p = PyMem_Calloc(k ? k : 1, sizeof(vec));
    vec *m = PyMem_Calloc(k ? k : 1, sizeof(vec));
    Py_ssize_t *w = PyMem_Calloc(k ? k : 1, sizeof(Py_ssize_t));
    int *ng = PyMem_Calloc(k ? k : 1, sizeof(int));
    PyObject *result = NULL;
    if (!p || !m || !w || !ng) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t j = 0; j < k; j++) {
        if (negs != Py_None) {
            int t = PyObject_IsTrue(PyTuple_GET_ITEM(negs, j));
            if (t < 0)
                goto done;
            ng[j] = t;
        }
        if (get_vec(PyTuple_GET_ITEM(parts, j), &p[j], 'd', 0) < 0)
            goto done;
        if (n == 0 ? p[j].len != 0 : p[j].len % n != 0) {
            PyErr_SetString(PyExc_ValueError, "running: a part is not n rows");
            goto done;
        }
        w[j] = n ? p[j].len / n : 0;
        PyObject *mj = PyTuple_GET_ITEM(masks, j);
        if (mj != Py_None) {
            if (get_vec(mj, &m[j], '?', 0) < 0)
                goto done;
            if (m[j].len != n) {
                PyErr_SetString(PyExc_ValueError, "running: a mask is not n long");
                goto done;
            }
        }
    }
    Py_ssize_t width = 0;  /* the values of an element (no loop over n if none) */
    for (Py_ssize_t j = 0; j < k; j++)
        width += w[j];
    Py_BEGIN_ALLOW_THREADS
    if (width == 0) {
        /* nothing to add */
    } else if (k == 1 && !m[0].held) {  /* one part, every element: one run */
        Py_ssize_t len = p[0].len, i = 0;
        added = len > 0;
        if (!have && len) {
            s = ng[0] ? flip(AT(p[0], 0)) : AT(p[0], 0);
            have = 1;
            i = 1;
        }
        if (ng[0]) {
            for (; i < len; i++)
                s = s + flip(AT(p[0], i));
        } else if (p[0].stride == (Py_ssize_t)sizeof(double)) {
            const double *a = (const double *)p[0].data;
            for (; i < len; i++)
                s = s + a[i];
        } else {
            for (; i < len; i++)
                s = s + AT(p[0], i);
        }
    } else {
        for (Py_ssize_t i = 0; i < n; i++) {
            for (Py_ssize_t j = 0; j < k; j++) {
                int keep = !m[j].held || *(const char *)(m[j].data + i * m[j].stride);
                Py_ssize_t c = i * w[j], e = c + w[j];
                if (!have && keep && c < e) {  /* the first value added */
                    s = ng[j] ? flip(AT(p[j], c)) : AT(p[j], c);
                    c++;
                    have = added = 1;
                }
                if (!have)
                    continue;
                added |= keep && c < e;
                /* s + x where the element ran the add, else s: chosen by bits,
                 * not by a branch the mask's pattern would mispredict */
                uint64_t on = -(uint64_t)keep;
                for (; c < e; c++) {
                    double t = s + (ng[j] ? flip(AT(p[j], c)) : AT(p[j], c));
                    uint64_t sb, tb;
                    memcpy(&sb, &s, 8);
                    memcpy(&tb, &t, 8);
                    sb ^= (sb ^ tb) & on;
                    memcpy(&s, &sb, 8);
                }
            }
        }
    }
    Py_END_ALLOW_THREADS
    if (added) {
        result = PyFloat_FromDouble(s);
    } else {
        Py_INCREF(Py_None);
        result = Py_None;
    }
done:
    if (p && m) {
        for (Py_ssize_t j = 0; j < k; j++) {
            release(&p[j]);
            release(&m[j]);
        }
    }
    PyMem_Free(p);
    PyMem_Free(m);
    PyMem_Free(w);
    PyMem_Free(ng);
    return result;
}

/* rows(values, n, start, out) -> None
 *
 * values: a 1-D array of n * w doubles (row i: element i's w adds, in order);
 * start: None or a 1-D array of n doubles (each row's cell value); out: a
 * writable 1-D array of n doubles, given row i's sum: from start[i] (or from
 * the row's first value), one addition after the other. w must be >= 1 when
 * start is None. */
static PyObject *rows(PyObject *self, PyObject *args) {
    PyObject *values, *start, *out;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "OnOO", &values, &n, &start, &out))
        return NULL;
    vec a, st, o;
    memset(&st, 0, sizeof(st));
    if (get_vec(values, &a, 'd', 0) < 0)
        return NULL;
    if (get_vec(out, &o, 'd', 1) < 0) {
        release(&a);
        return NULL;
    }
    PyObject *result = NULL;
    if (start != Py_None && get_vec(start, &st, 'd', 0) < 0)
        goto done;
    if (n < 0 || o.len != n || (st.held && st.len != n) || (n ? a.len % n : a.len) != 0) {
        PyErr_SetString(PyExc_ValueError, "rows: the shapes do not match");
        goto done;
    }
    Py_ssize_t w = n ? a.len / n : 0;
    if (!st.held && w == 0 && n) {
        PyErr_SetString(PyExc_ValueError, "rows: no value and no start");
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t c = i * w, e = c + w;
        double s;
        if (st.held) {
            s = AT(st, i);
        } else {
            s = AT(a, c);
            c++;
        }
        for (; c < e; c++)
            s = s + AT(a, c);
        *(double *)((char *)o.data + i * o.stride) = s;
    }
    Py_END_ALLOW_THREADS
    Py_INCREF(Py_None);
    result = Py_None;
done:
    release(&a);
    release(&o);
    release(&st);
    return result;
}

/* An operand of select: a 1-D array of doubles, or a Python float (read as n
 * copies of it, from *k). */
static int get_real(PyObject *obj, vec *v, double *k, Py_ssize_t n) {
    if (PyFloat_CheckExact(obj)) {
        memset(v, 0, sizeof(*v));
        *k = PyFloat_AS_DOUBLE(obj);
        v->data = (const char *)k;
        v->len = n;
        v->stride = 0;
        return 0;
    }
    return get_vec(obj, v, 'd', 0);
}

/* select's loop (below), in AVX2 where the machine has it */
WIDE_LOOP static void select_loop(const vec *mkp, const vec *ap, const vec *bp, const vec *op,
                                  Py_ssize_t n) {
    const vec mk = *mkp, a = *ap, b = *bp, o = *op;
    uint64_t *out = (uint64_t *)o.data;
    const unsigned char *c = (const unsigned char *)mk.data;
    const uint64_t *x = (const uint64_t *)a.data, *y = (const uint64_t *)b.data;
    if (mk.stride == 1 && a.stride == 8 && b.stride == 8) {
        for (Py_ssize_t i = 0; i < n; i++)
            out[i] = y[i] ^ ((x[i] ^ y[i]) & -(uint64_t)(c[i] != 0));
    } else if (mk.stride == 1 && a.stride == 0 && b.stride == 8) {  /* one a for all */
        uint64_t x0 = x[0];
        for (Py_ssize_t i = 0; i < n; i++)
            out[i] = y[i] ^ ((x0 ^ y[i]) & -(uint64_t)(c[i] != 0));
    } else if (mk.stride == 1 && a.stride == 8 && b.stride == 0) {  /* one b for all */
        uint64_t y0 = y[0];
        for (Py_ssize_t i = 0; i < n; i++)
            out[i] = y0 ^ ((x[i] ^ y0) & -(uint64_t)(c[i] != 0));
    } else if (mk.stride == 1 && a.stride == 0 && b.stride == 0) {  /* two values */
        uint64_t x0 = x[0], y0 = y[0];
        for (Py_ssize_t i = 0; i < n; i++)
            out[i] = y0 ^ ((x0 ^ y0) & -(uint64_t)(c[i] != 0));
    } else {
        for (Py_ssize_t i = 0; i < n; i++) {
            uint64_t x, y;
            memcpy(&x, a.data + i * a.stride, 8);
            memcpy(&y, b.data + i * b.stride, 8);
            uint64_t on = -(uint64_t)(*(const unsigned char *)(mk.data + i * mk.stride) != 0);
            out[i] = y ^ ((x ^ y) & on);
        }
    }
}

/* select(mask, a, b, out) -> None
 *
 * out[i] = a[i] if mask[i] else b[i], bit for bit, for 1-D arrays of one
 * length (a and b may be broadcast, stride 0, or Python floats); out
 * contiguous and writable. */
static PyObject *select_(PyObject *self, PyObject *args) {
    PyObject *mo, *ao, *bo, *oo;
    if (!PyArg_ParseTuple(args, "OOOO", &mo, &ao, &bo, &oo))
        return NULL;
    vec mk, a, b, o;
    double ka = 0.0, kb = 0.0;
    memset(&a, 0, sizeof(a));
    memset(&b, 0, sizeof(b));
    memset(&o, 0, sizeof(o));
    PyObject *result = NULL;
    if (get_vec(mo, &mk, '?', 0) < 0)
        return NULL;
    if (get_vec(oo, &o, 'd', 1) < 0 || get_real(ao, &a, &ka, o.len) < 0 ||
        get_real(bo, &b, &kb, o.len) < 0)
        goto done;
    Py_ssize_t n = o.len;
    if (mk.len != n || a.len != n || b.len != n || o.stride != (Py_ssize_t)sizeof(double)) {
        PyErr_SetString(PyExc_ValueError, "select: the arrays differ in length");
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    select_loop(&mk, &a, &b, &o, n);
    Py_END_ALLOW_THREADS
    Py_INCREF(Py_None);
    result = Py_None;
done:
    release(&mk);
    release(&a);
    release(&b);
    release(&o);
    return result;
}

/* tree(x, is_max, vals, leaves) -> None
 *
 * `fold max` (is_max) or `fold min` of every row of a 2-D array of doubles
 * (any strides): the value and the leaf (its position in the row) of the
 * evaluator's balanced tree of combines (chad/arrays/evaluate.py
 * reduce_balanced: [lo, hi) splits at mid = (lo + hi) / 2), each combine
 * `b if b > a else a` (min: `b if b < a else a`): the right side wins only
 * when the comparison holds, so a tie (0.0 against -0.0) and a NaN on either
 * side keep the left. The value's bits are the winning element's. numpy's
 * argmax along a short row costs about 17 ns a row (folds.py's vtree2 of a
 * nested loop's rows of 5). The tree's combines are listed once (`schedule`)
 * and run over blocks of rows. */
/* The combines of the tree over [lo, hi) in the order of the evaluation
 * (left subtree, right subtree, then the node), as slots: leaves are 0 .. m-1,
 * combine c writes slot m + c; returns the slot of the node. */
static Py_ssize_t schedule(Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t m, Py_ssize_t *ops,
                           Py_ssize_t *count) {
    if (hi - lo == 1)
        return lo;
    Py_ssize_t mid = (lo + hi) / 2;
    Py_ssize_t a = schedule(lo, mid, m, ops, count);
    Py_ssize_t b = schedule(mid, hi, m, ops, count);
    Py_ssize_t c = (*count)++;
    ops[2 * c] = a;
    ops[2 * c + 1] = b;
    return m + c;
}

/* tree's loop (below), in AVX2 where the machine has it */
WIDE_LOOP static void tree_loop(const Py_buffer *xp, const Py_buffer *vp, const Py_buffer *kp,
                                int is_max, Py_ssize_t n, Py_ssize_t m, Py_ssize_t B,
                                const Py_ssize_t *ops, Py_ssize_t count, Py_ssize_t root,
                                uint64_t *sv, uint64_t *sk) {
    const Py_buffer x = *xp, v = *vp, k = *kp;
    char *vals = (char *)v.buf;
    int64_t *leaves = (int64_t *)k.buf;
    const Py_ssize_t rs = x.strides[0], es = x.strides[1];
    for (Py_ssize_t i0 = 0; i0 < n; i0 += B) {
        Py_ssize_t nb = n - i0 < B ? n - i0 : B;
        for (Py_ssize_t j = 0; j < m; j++)
            for (Py_ssize_t t = 0; t < nb; t++) {
                memcpy(&sv[j * B + t], (const char *)x.buf + (i0 + t) * rs + j * es, 8);
                sk[j * B + t] = (uint64_t)j;
            }
        for (Py_ssize_t c = 0; c < count; c++) {
            const uint64_t *xa = sv + ops[2 * c] * B, *xb = sv + ops[2 * c + 1] * B;
            const uint64_t *ka = sk + ops[2 * c] * B, *kb = sk + ops[2 * c + 1] * B;
            uint64_t *xd = sv + (m + c) * B, *kd = sk + (m + c) * B;
            for (Py_ssize_t t = 0; t < nb; t++) {
                double a, b;
                memcpy(&a, &xa[t], 8);
                memcpy(&b, &xb[t], 8);
                uint64_t on = -(uint64_t)(is_max ? b > a : b < a);
                xd[t] = xa[t] ^ ((xa[t] ^ xb[t]) & on);
                kd[t] = ka[t] ^ ((ka[t] ^ kb[t]) & on);
            }
        }
        memcpy(vals + i0 * 8, sv + root * B, (size_t)nb * 8);
        for (Py_ssize_t t = 0; t < nb; t++)
            leaves[i0 + t] = (int64_t)sk[root * B + t];
    }
}

static PyObject *tree(PyObject *self, PyObject *args) {
    PyObject *xo, *vo, *ko;
    int is_max;
    if (!PyArg_ParseTuple(args, "OpOO", &xo, &is_max, &vo, &ko))
        return NULL;
    Py_buffer x, v, k;
    if (PyObject_GetBuffer(xo, &x, PyBUF_RECORDS_RO) < 0)
        return NULL;
    if (PyObject_GetBuffer(vo, &v, PyBUF_WRITABLE | PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&x);
        return NULL;
    }
    if (PyObject_GetBuffer(ko, &k, PyBUF_WRITABLE | PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&x);
        PyBuffer_Release(&v);
        return NULL;
    }
    PyObject *result = NULL;
    if (x.ndim != 2 || strcmp(x.format, "d") != 0 || strcmp(v.format, "d") != 0 ||
        k.itemsize != 8 || (strcmp(k.format, "l") != 0 && strcmp(k.format, "q") != 0)) {
        PyErr_SetString(PyExc_ValueError, "tree: x a 2-D array of float64, vals float64, "
                                          "leaves int64");
        goto done;
    }
    Py_ssize_t n = x.shape[0], m = x.shape[1];
    if (m < 1 || v.len != n * 8 || k.len != n * 8) {
        PyErr_SetString(PyExc_ValueError, "tree: rows of no element, or outputs of another size");
        goto done;
    }
    /* one schedule for all rows; the rows in blocks of B, each slot an array
     * of B values (and leaves), so each combine runs over the block's rows
     * at once, without a branch: the winner's bits chosen by a mask, as
     * `select` (random data would mispredict a branch on every combine) */
    Py_ssize_t B = (Py_ssize_t)(1 << 15) / (2 * m);
    B = B < 1 ? 1 : (B > 256 ? 256 : B);
    Py_ssize_t *ops = PyMem_Malloc(sizeof(Py_ssize_t) * 2 * (size_t)m);
    uint64_t *sv = PyMem_Malloc(sizeof(uint64_t) * (size_t)(2 * m * B));
    uint64_t *sk = PyMem_Malloc(sizeof(uint64_t) * (size_t)(2 * m * B));
    if (ops == NULL || sv == NULL || sk == NULL) {
        PyMem_Free(ops);
        PyMem_Free(sv);
        PyMem_Free(sk);
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t count = 0;
    Py_ssize_t root = schedule(0, m, m, ops, &count);
    Py_BEGIN_ALLOW_THREADS
    tree_loop(&x, &v, &k, is_max, n, m, B, ops, count, root, sv, sk);
    Py_END_ALLOW_THREADS
    PyMem_Free(ops);
    PyMem_Free(sv);
    PyMem_Free(sk);
    Py_INCREF(Py_None);
    result = Py_None;
done:
    PyBuffer_Release(&x);
    PyBuffer_Release(&v);
    PyBuffer_Release(&k);
    return result;
}

/* One 2-D strided view of doubles or of int64 (fmt 'q'). */
typedef struct {
    Py_buffer view;
    const char *data;
    Py_ssize_t rows, cols, rstride, cstride;
    int held;
} mat;

static int get_mat(PyObject *obj, mat *a, char fmt) {
    memset(a, 0, sizeof(*a));
    if (PyObject_GetBuffer(obj, &a->view, PyBUF_STRIDES | PyBUF_FORMAT) < 0)
        return -1;
    a->held = 1;
    const char *f = a->view.format ? a->view.format : "B";
    if (f[0] == '=' || f[0] == '<' || f[0] == '@')
        f++;
    int ok = fmt == 'd' ? f[0] == 'd' : (f[0] == 'l' || f[0] == 'q');
    if (a->view.ndim != 2 || !ok || f[1] != '\0' || a->view.itemsize != 8) {
        PyErr_SetString(PyExc_TypeError, fmt == 'd' ? "expected a 2-D array of doubles"
                                                    : "expected a 2-D array of int64");
        PyBuffer_Release(&a->view);
        a->held = 0;
        return -1;
    }
    a->data = (const char *)a->view.buf;
    a->rows = a->view.shape[0];
    a->cols = a->view.shape[1];
    a->rstride = a->view.strides[0];
    a->cstride = a->view.strides[1];
    return 0;
}

/* The real added to every product of a block (None: no add): into *add. */
static int get_add(PyObject *addo, double *add) {
    if (addo == Py_None)
        return 0;
    *add = PyFloat_AsDouble(addo);
    return *add == -1.0 && PyErr_Occurred() ? -1 : 0;
}

/* colsum's loop (below), in AVX2 where the machine has it: its rows are
 * added a vector of columns at a time (each column's additions in the same
 * order), 1.7 times as fast as SSE2's width from memory at 1000 x 1000 */
WIDE_LOOP static void colsum_loop(const mat *ap, const vec *cp, const vec *stp, const vec *op,
                                  int have_col, int have_add, double add) {
    const mat a = *ap;
    const vec c = *cp, st = *stp, o = *op;
    Py_ssize_t m = a.cols;
    char *od = (char *)o.data;
    for (Py_ssize_t j = 0; j < m; j++)
        *(double *)(od + j * o.stride) = st.held ? AT(st, j) : 0.0;
    for (Py_ssize_t r = 0; r < a.rows; r++) {
        const char *row = a.data + r * a.rstride;
        if (o.stride == 8 && a.cstride == 8) {
            double *restrict acc = (double *)od;
            const double *restrict x = (const double *)row;
            /* rows going down in memory (the reverse pass's last row first)
             * are read down too: one descending stream, which the prefetcher
             * follows (each row read upwards was 2 to 3 times slower from
             * memory at 1000 x 1000). The order of each column's additions is
             * the same either way. */
#define COLSUM_ROW(P)                                      \
            if (a.rstride < 0)                             \
                for (Py_ssize_t j = m - 1; j >= 0; j--)    \
                    acc[j] = acc[j] + (P);                 \
            else                                           \
                for (Py_ssize_t j = 0; j < m; j++)         \
                    acc[j] = acc[j] + (P);
            if (!have_col) {
                COLSUM_ROW(x[j])
                continue;
            }
            const double k = AT(c, r);
            if (have_add) {
                COLSUM_ROW(k * x[j] + add)
            } else {
                COLSUM_ROW(k * x[j])
            }
#undef COLSUM_ROW
            continue;
        }
        for (Py_ssize_t j = 0; j < m; j++) {
            double *s = (double *)(od + j * o.stride);
            double p = *(const double *)(row + j * a.cstride);
            if (have_col) {
                p = AT(c, r) * p;
                if (have_add)
                    p = p + add;
            }
            *s = *s + p;
        }
    }
}

/* colsum(col, block, add, start, out) -> None
 *
 * The column sums of a block of n x m doubles (any strides), row after row:
 * out[j] = start[j] (or +0.0 when start is None) + b[0][j] + b[1][j] + ...,
 * one addition after the other (chad/compile/order.py: column_sums,
 * add_rows). With col (a 1-D array of n doubles, else None) and add (a
 * float, else None) the block is that of the products col[i] * block[i][j]
 * (+ add), never made (chad/compile/scaled.py): each product and sum an IEEE
 * operation in that order (no fused multiply-add: the file is compiled with
 * -ffp-contract=off). out may be start itself. */
static PyObject *colsum(PyObject *self, PyObject *args) {
    PyObject *colo, *block, *addo, *start, *out;
    if (!PyArg_ParseTuple(args, "OOOOO", &colo, &block, &addo, &start, &out))
        return NULL;
    double add = 0.0;
    int have_add = addo != Py_None, have_col = colo != Py_None;
    if (get_add(addo, &add) < 0)
        return NULL;
    mat a;
    vec c, st, o;
    memset(&c, 0, sizeof(c));
    memset(&st, 0, sizeof(st));
    memset(&o, 0, sizeof(o));
    if (get_mat(block, &a, 'd') < 0)
        return NULL;
    PyObject *result = NULL;
    if ((have_col && get_vec(colo, &c, 'd', 0) < 0) || get_vec(out, &o, 'd', 1) < 0 ||
        (start != Py_None && get_vec(start, &st, 'd', 0) < 0))
        goto done;
    if (o.len != a.cols || (st.held && st.len != a.cols) || (have_col && c.len != a.rows)) {
        PyErr_SetString(PyExc_ValueError, "colsum: the shapes do not match");
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    colsum_loop(&a, &c, &st, &o, have_col, have_add, add);
    Py_END_ALLOW_THREADS
    Py_INCREF(Py_None);
    result = Py_None;
done:
    PyBuffer_Release(&a.view);
    release(&c);
    release(&o);
    release(&st);
    return result;
}

/* scaled's loop (below), in AVX2 where the machine has it */
WIDE_LOOP static void scaled_loop(const mat *ap, const vec *cp, double *dst, int have_add,
                                  double add) {
    const mat a = *ap;
    const vec c = *cp;
    Py_ssize_t m = a.cols;
    for (Py_ssize_t r = 0; r < a.rows; r++) {
        const double k = AT(c, r);
        const char *row = a.data + r * a.rstride;
        double *d = dst + r * m;
        for (Py_ssize_t j = 0; j < m; j++) {
            double p = k * *(const double *)(row + j * a.cstride);
            d[j] = have_add ? p + add : p;
        }
    }
}

/* scaled(col, block, add, out) -> None
 *
 * The block of products itself: out[i][j] = col[i] * block[i][j] (+ add),
 * out a writable C-ordered 2-D array of the block's shape (chad/compile/
 * scaled.py: numpy's multiply and then its add of the real, in one pass). */
static PyObject *scaled(PyObject *self, PyObject *args) {
    PyObject *colo, *block, *addo, *out;
    if (!PyArg_ParseTuple(args, "OOOO", &colo, &block, &addo, &out))
        return NULL;
    double add = 0.0;
    int have_add = addo != Py_None;
    if (get_add(addo, &add) < 0)
        return NULL;
    mat a;
    vec c;
    Py_buffer o;
    if (get_mat(block, &a, 'd') < 0)
        return NULL;
    if (get_vec(colo, &c, 'd', 0) < 0) {
        PyBuffer_Release(&a.view);
        return NULL;
    }
    if (PyObject_GetBuffer(out, &o, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE) < 0) {
        PyBuffer_Release(&a.view);
        release(&c);
        return NULL;
    }
    PyObject *result = NULL;
    const char *f = o.format ? o.format : "B";
    if (f[0] == '=' || f[0] == '<' || f[0] == '@')
        f++;
    if (f[0] != 'd' || f[1] != '\0' || o.ndim != 2 || o.shape[0] != a.rows ||
        o.shape[1] != a.cols || c.len != a.rows) {
        PyErr_SetString(PyExc_ValueError, "scaled: the shapes do not match");
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    scaled_loop(&a, &c, (double *)o.buf, have_add, add);
    Py_END_ALLOW_THREADS
    Py_INCREF(Py_None);
    result = Py_None;
done:
    PyBuffer_Release(&a.view);
    release(&c);
    PyBuffer_Release(&o);
    return result;
}

/* numpy's pairwise sum (its DOUBLE_pairwise_sum) of the n products
 * a[j] * b[j] of two rows of doubles: under 8 values left to right from +0.0;
 * up to 128, eight running sums of every eighth value, paired at the end,
 * then the rest left to right; longer rows split in two at a multiple of 8
 * below the middle, each half summed so and the halves added. The products
 * are made as they are read (IEEE multiplications, as numpy's multiply of the
 * two arrays; no fused multiply-add: -ffp-contract=off). */
WIDE_LOOP static double pairwise_dot(const char *a, Py_ssize_t sa, const char *b,
                                       Py_ssize_t sb, Py_ssize_t n) {
#define P(i) (*(const double *)(a + (i) * sa) * *(const double *)(b + (i) * sb))
    if (n < 8) {
        double res = 0.0;
        for (Py_ssize_t i = 0; i < n; i++)
            res = res + P(i);
        return res;
    }
    if (n <= 128) {
        double r[8], res;
        Py_ssize_t i, stop = n - n % 8;
        if (sa == 8 && sb == 8) {
            const double *restrict x = (const double *)a, *restrict y = (const double *)b;
            for (int k = 0; k < 8; k++)
                r[k] = x[k] * y[k];
            for (i = 8; i < stop; i += 8)
                for (int k = 0; k < 8; k++)
                    r[k] = r[k] + x[i + k] * y[i + k];
        } else {
            for (int k = 0; k < 8; k++)
                r[k] = P(k);
            for (i = 8; i < stop; i += 8)
                for (int k = 0; k < 8; k++)
                    r[k] = r[k] + P(i + k);
        }
        res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++)
            res = res + P(i);
        return res;
    }
#undef P
    Py_ssize_t n2 = n / 2;
    n2 -= n2 % 8;
    return pairwise_dot(a, sa, b, sb, n2) +
           pairwise_dot(a + n2 * sa, sa, b + n2 * sb, sb, n - n2);
}

/* dots(a, b, out) -> None
 *
 * a, b: 2-D arrays of doubles of one shape n x m (any strides, 0 too: a
 * broadcast row), or of shapes that broadcast to it (a dimension of 1 read
 * with a stride of 0); out: n doubles. out[i] = 0.0 + the pairwise sum of the
 * products a[i][j] * b[i][j]: np.sum of row i of a * b, numpy's reduce of a
 * contiguous row (from its identity +0.0, pairwise: chad/compile/order.py
 * checks that numpy sums so), without the block of products. */
static PyObject *dots(PyObject *self, PyObject *args) {
    PyObject *ao, *bo, *out;
    if (!PyArg_ParseTuple(args, "OOO", &ao, &bo, &out))
        return NULL;
    mat a, b;
    vec o;
    if (get_mat(ao, &a, 'd') < 0)
        return NULL;
    if (get_mat(bo, &b, 'd') < 0) {
        PyBuffer_Release(&a.view);
        return NULL;
    }
    PyObject *result = NULL;
    if (get_vec(out, &o, 'd', 1) < 0)
        goto done;
    /* numpy's broadcasting: a dimension of 1 takes the other's (0 too) */
    Py_ssize_t rows = a.rows == 1 ? b.rows : a.rows, cols = a.cols == 1 ? b.cols : a.cols;
    if ((a.rows != rows && a.rows != 1) || (b.rows != rows && b.rows != 1) ||
        (a.cols != cols && a.cols != 1) || (b.cols != cols && b.cols != 1) || o.len != rows) {
        PyErr_SetString(PyExc_ValueError, "dots: the shapes do not match");
        goto done;
    }
    Py_ssize_t ars = a.rows == rows ? a.rstride : 0, brs = b.rows == rows ? b.rstride : 0;
    Py_ssize_t acs = a.cols == cols ? a.cstride : 0, bcs = b.cols == cols ? b.cstride : 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < rows; i++)
        *(double *)((char *)o.data + i * o.stride) =
            0.0 + pairwise_dot(a.data + i * ars, acs, b.data + i * brs, bcs, cols);
    Py_END_ALLOW_THREADS
    Py_INCREF(Py_None);
    result = Py_None;
done:
    PyBuffer_Release(&a.view);
    PyBuffer_Release(&b.view);
    release(&o);
    return result;
}

/* scatter(out, idx, vals) -> bool
 *
 * out: a writable 1-D array of doubles; idx: a 1-D array of int64; vals: a
 * 1-D array of doubles as long. out[idx[k]] += vals[k] for k = 0, 1, ... in
 * order (np.add.at's additions); False at the first index outside
 * [0, len(out)) (out then holds the adds before it), else True. */
static PyObject *scatter(PyObject *self, PyObject *args) {
    PyObject *out, *idx, *vals;
    if (!PyArg_ParseTuple(args, "OOO", &out, &idx, &vals))
        return NULL;
    vec o, v;
    Py_buffer ix;
    if (get_vec(out, &o, 'd', 1) < 0)
        return NULL;
    if (get_vec(vals, &v, 'd', 0) < 0) {
        release(&o);
        return NULL;
    }
    if (PyObject_GetBuffer(idx, &ix, PyBUF_STRIDES | PyBUF_FORMAT) < 0) {
        release(&o);
        release(&v);
        return NULL;
    }
    PyObject *result = NULL;
    const char *f = ix.format ? ix.format : "B";
    if (f[0] == '=' || f[0] == '<' || f[0] == '@')
        f++;
    if (ix.ndim != 1 || ix.itemsize != 8 || (f[0] != 'l' && f[0] != 'q') || f[1] != '\0') {
        PyErr_SetString(PyExc_TypeError, "scatter: expected a 1-D array of int64 indices");
        goto done;
    }
    if (ix.shape[0] != v.len) {
        PyErr_SetString(PyExc_ValueError, "scatter: indices and values differ in length");
        goto done;
    }
    int ok = 1;
    Py_BEGIN_ALLOW_THREADS
    const char *id = (const char *)ix.buf;
    Py_ssize_t is = ix.strides[0], n = o.len;
    char *od = (char *)o.data;
    for (Py_ssize_t k = 0; k < v.len; k++) {
        int64_t i = *(const int64_t *)(id + k * is);
        if (i < 0 || i >= n) {
            ok = 0;
            break;
        }
        double *x = (double *)(od + i * o.stride);
        *x = *x + AT(v, k);
    }
    Py_END_ALLOW_THREADS
    result = PyBool_FromLong(ok);
done:
    PyBuffer_Release(&ix);
    release(&o);
    release(&v);
    return result;
}

/* chain(out, vals, idx) -> bool
 *
 * The pairs of a chain of adds of rows at indices to one cell, added into out
 * in the order the chain's bag lists them (chad/arrays/bag.py, BChain): vals
 * and idx are tuples of P 2-D arrays of n x m (doubles; int64 indices), part
 * p's row i element i's p-th add; element n-1's adds first, its part P-1
 * first, each row's m pairs in order: out[idx[p][i][j]] += vals[p][i][j].
 * False, and out unchanged, when an index is outside [0, len(out)); else
 * True. (Indices are tested again as they are used: nothing is written
 * outside out, even if another thread changes them meanwhile.) */
#define CHAIN_COLUMNS 64

static PyObject *chain(PyObject *self, PyObject *args) {
    PyObject *out, *vals, *idx;
    if (!PyArg_ParseTuple(args, "OO!O!", &out, &PyTuple_Type, &vals, &PyTuple_Type, &idx))
        return NULL;
    Py_ssize_t P = PyTuple_GET_SIZE(vals);
    if (PyTuple_GET_SIZE(idx) != P) {
        PyErr_SetString(PyExc_ValueError, "chain: values and indices differ in number");
        return NULL;
    }
    vec o;
    if (get_vec(out, &o, 'd', 1) < 0)
        return NULL;
    mat *v = PyMem_Calloc(P ? P : 1, sizeof(mat));
    mat *x = PyMem_Calloc(P ? P : 1, sizeof(mat));
    PyObject *result = NULL;
    if (!v || !x) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t p = 0; p < P; p++) {
        if (get_mat(PyTuple_GET_ITEM(vals, p), &v[p], 'd') < 0 ||
            get_mat(PyTuple_GET_ITEM(idx, p), &x[p], 'q') < 0)
            goto done;
        if (v[p].rows != v[0].rows || v[p].cols != v[0].cols || x[p].rows != v[0].rows ||
            x[p].cols != v[0].cols) {
            PyErr_SetString(PyExc_ValueError, "chain: the parts differ in shape");
            goto done;
        }
    }
    int ok = 1;
    Py_BEGIN_ALLOW_THREADS
    Py_ssize_t n = P ? v[0].rows : 0, m = P ? v[0].cols : 0, len = o.len;
    char *od = (char *)o.data;
    /* every index checked first (a part's one row, when every element's are
     * the same): the loop below adds without a test */
    for (Py_ssize_t p = 0; p < P && ok; p++) {
        Py_ssize_t rows = x[p].rstride == 0 ? (n > 0) : n;
        for (Py_ssize_t i = 0; i < rows && ok; i++) {
            const char *xr = x[p].data + i * x[p].rstride;
            for (Py_ssize_t j = 0; j < m; j++) {
                int64_t k = *(const int64_t *)(xr + j * x[p].cstride);
                if (k < 0 || k >= len) {
                    ok = 0;
                    break;
                }
            }
        }
    }
    /* every element's adds at the same indices (each part's index rows one
     * broadcast row), no cell twice among them: each cell's adds are its one
     * column's values, element n-1's first, so the chain is column sums of
     * the rows taken last first, each column's running sum kept apart (the
     * same additions in the same order, without a load and a store of the
     * cell per add: gmm's chains, 10^5 rows of 5) */
    int columns = ok && n > 1 && P * m <= CHAIN_COLUMNS && o.stride == 8;
    for (Py_ssize_t p = 0; p < P && columns; p++)
        columns = x[p].rstride == 0;
    int64_t cell[CHAIN_COLUMNS];
    for (Py_ssize_t p = 0; p < P && columns; p++)
        for (Py_ssize_t j = 0; j < m && columns; j++) {
            cell[p * m + j] = *(const int64_t *)(x[p].data + j * x[p].cstride);
            for (Py_ssize_t q = 0; q < p * m + j; q++)
                if (cell[q] == cell[p * m + j])
                    columns = 0;
        }
    if (columns) {
        double *oo = (double *)od, acc[CHAIN_COLUMNS];
        for (Py_ssize_t p = 0; p < P; p++) {
            int64_t *c = cell + p * m;
            for (Py_ssize_t j = 0; j < m; j++)
                acc[j] = oo[c[j]];
            for (Py_ssize_t i = n - 1; i >= 0; i--) {
                const char *vr = v[p].data + i * v[p].rstride;
                for (Py_ssize_t j = 0; j < m; j++)
                    acc[j] = acc[j] + *(const double *)(vr + j * v[p].cstride);
            }
            for (Py_ssize_t j = 0; j < m; j++)
                oo[c[j]] = acc[j];
        }
        n = 0;  /* (done) */
    }
    for (Py_ssize_t i = n - 1; i >= 0 && ok; i--) {
        for (Py_ssize_t p = P - 1; p >= 0; p--) {
            const char *vr = v[p].data + i * v[p].rstride;
            const char *xr = x[p].data + i * x[p].rstride;
            /* (each index tested again as it is used, an unsigned compare: the
             * arrays are the caller's, and the GIL is released, so nothing
             * written outside out even if another thread changed them) */
            if (x[p].cstride == 0 && m > 0) {
                /* the row's m adds all to one cell (an index of the element,
                 * broadcast along its row: gmm's adds to xs): the cell's sum
                 * kept in a register across them, stored once */
                int64_t k = *(const int64_t *)xr;
                if ((uint64_t)k >= (uint64_t)len) {
                    ok = 0;
                    break;
                }
                double *d = (double *)(od + k * o.stride), acc = *d;
                for (Py_ssize_t j = 0; j < m; j++)
                    acc = acc + *(const double *)(vr + j * v[p].cstride);
                *d = acc;
            } else if (v[p].cstride == 8 && x[p].cstride == 8 && o.stride == 8) {
                const double *vv = (const double *)vr;
                const int64_t *xx = (const int64_t *)xr;
                double *oo = (double *)od;
                for (Py_ssize_t j = 0; j < m; j++) {
                    int64_t k = xx[j];
                    if ((uint64_t)k >= (uint64_t)len) {
                        ok = 0;
                        break;
                    }
                    oo[k] = oo[k] + vv[j];
                }
            } else {
                for (Py_ssize_t j = 0; j < m; j++) {
                    int64_t k = *(const int64_t *)(xr + j * x[p].cstride);
                    if ((uint64_t)k >= (uint64_t)len) {
                        ok = 0;
                        break;
                    }
                    double *d = (double *)(od + k * o.stride);
                    *d = *d + *(const double *)(vr + j * v[p].cstride);
                }
            }
            if (!ok)
                break;
        }
    }
    Py_END_ALLOW_THREADS
    result = PyBool_FromLong(ok);
done:
    for (Py_ssize_t p = 0; p < P && v && x; p++) {
        if (v[p].held)
            PyBuffer_Release(&v[p].view);
        if (x[p].held)
            PyBuffer_Release(&x[p].view);
    }
    PyMem_Free(v);
    PyMem_Free(x);
    release(&o);
    return result;
}

/* fuse(prog, leaves) -> a new array, or None (the caller evaluates the
 * expression with numpy's operators instead)
 *
 * An elementwise expression of float64 arrays and reals, evaluated in one
 * pass (chad/compile/fusion.py): prog is its postfix code, one byte an
 * instruction (printable, so that its repr is the bytes themselves): '0' + k
 * pushes leaf k, '~' negates the value on top (-x, by the sign bit, as numpy's
 * `negative`), '+', '-', '*', '/' make x OP y of the two values on top. leaves: a tuple of floats and numpy float64 arrays
 * (ndarray itself, aligned, native byte order, at least one of them), of
 * shapes numpy broadcasts. The result is numpy's for the same operations one
 * after the other: each element is computed by the same IEEE operations in
 * the same order (plain C doubles, no contraction: see setup.py), only
 * without an array per operation: blocks of FUSE_BLOCK elements go through
 * every operation while they are in the cache (a block of rows: a leaf that
 * broadcasts along them is laid out once). None for anything else (an
 * integer, an array of another type, shapes that do not broadcast). */
enum { FUSE_LEAF = '0', FUSE_NEG = '~', FUSE_ADD = '+', FUSE_SUB = '-', FUSE_MUL = '*',
       FUSE_DIV = '/' };
#define FUSE_BLOCK 256
#define FUSE_LEAVES 40  /* leaf k is the byte '0' + k: '0' .. 'W' */
#define FUSE_DEPTH 16
#define FUSE_DIMS 16

static PyObject *fuse_ndarray = NULL;  /* numpy.ndarray */
static PyObject *fuse_empty = NULL;    /* numpy.empty */

static PyObject *fuse_setup(PyObject *self, PyObject *args) {
    PyObject *nd, *empty;
    if (!PyArg_ParseTuple(args, "OO", &nd, &empty))
        return NULL;
    Py_XDECREF(fuse_ndarray);
    Py_XDECREF(fuse_empty);
    Py_INCREF(nd);
    Py_INCREF(empty);
    fuse_ndarray = nd;
    fuse_empty = empty;
    Py_RETURN_NONE;
}

typedef struct {
    int array;                       /* else a real */
    double value;
    Py_buffer view;
    int held;
    const char *data;
    Py_ssize_t st[FUSE_DIMS];        /* its stride along each axis of the result (0: broadcast) */
    const double *ptr;               /* the block's values */
    double *buf;                     /* its own block (copied, or the real repeated) */
    int pattern;                     /* every block of rows reads the same values */
    Py_ssize_t off;                  /* the current row's offset */
} fuse_leaf;

static inline void fuse_copy(double *dst, const char *src, Py_ssize_t stride, Py_ssize_t len) {
    if (stride == (Py_ssize_t)sizeof(double)) {
        memcpy(dst, src, (size_t)len * sizeof(double));
    } else if (stride == 0) {
        double v = *(const double *)src;
        for (Py_ssize_t i = 0; i < len; i++)
            dst[i] = v;
    } else {
        for (Py_ssize_t i = 0; i < len; i++)
            dst[i] = *(const double *)(src + i * stride);
    }
}

/* The instructions on one block of len elements; the last one's values into out. */
/* numpy's loops use the widest vectors the machine has; so does this one
 * (GCC's clones of it, chosen when the module loads; the same IEEE
 * operations whatever the width) */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define FUSE_WIDEST __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define FUSE_WIDEST
#endif

FUSE_WIDEST
static void fuse_block(const unsigned char *code, Py_ssize_t ncode, fuse_leaf *lv,
                       double **pool, Py_ssize_t len, double *out) {
    const double *stack[FUSE_DEPTH];
    int own[FUSE_DEPTH];             /* the pool buffer a stack entry is in, or -1 */
    int free_[FUSE_DEPTH], nfree = 0, sp = 0;
    for (int b = FUSE_DEPTH - 1; b >= 0; b--)
        free_[nfree++] = b;
    for (Py_ssize_t c = 0; c < ncode; c++) {
        unsigned char op = code[c];
        if (op >= FUSE_LEAF && op < FUSE_LEAF + FUSE_LEAVES) {
            stack[sp] = lv[op - FUSE_LEAF].ptr;
            own[sp++] = -1;
            continue;
        }
        int last = c == ncode - 1;
        if (op == FUSE_NEG) {
            const double *a = stack[sp - 1];
            int o = own[sp - 1];
            if (o < 0 && !last)
                o = free_[--nfree];
            double *d = last ? out : pool[o];
            for (Py_ssize_t i = 0; i < len; i++)
                d[i] = flip(a[i]);
            stack[sp - 1] = d;
            own[sp - 1] = last ? -1 : o;
            continue;
        }
        const double *y = stack[--sp];
        const double *x = stack[sp - 1];
        int ox = own[sp - 1], oy = own[sp], o;
        if (last) {
            o = -1;
        } else if (ox >= 0) {
            o = ox;
        } else if (oy >= 0) {
            o = oy;
        } else {
            o = free_[--nfree];
        }
        double *d = last ? out : pool[o];
        switch (op) {
        case FUSE_ADD:
            for (Py_ssize_t i = 0; i < len; i++)
                d[i] = x[i] + y[i];
            break;
        case FUSE_SUB:
            for (Py_ssize_t i = 0; i < len; i++)
                d[i] = x[i] - y[i];
            break;
        case FUSE_MUL:
            for (Py_ssize_t i = 0; i < len; i++)
                d[i] = x[i] * y[i];
            break;
        default:  /* FUSE_DIV */
            for (Py_ssize_t i = 0; i < len; i++)
                d[i] = x[i] / y[i];
            break;
        }
        if (ox >= 0 && ox != o)
            free_[nfree++] = ox;
        if (oy >= 0 && oy != o)
            free_[nfree++] = oy;
        stack[sp - 1] = d;
        own[sp - 1] = o;
    }
}

static PyObject *fuse(PyObject *self, PyObject *args) {
    PyObject *prog, *leaves;
    if (!PyArg_ParseTuple(args, "O!O!", &PyBytes_Type, &prog, &PyTuple_Type, &leaves))
        return NULL;
    if (fuse_ndarray == NULL)
        Py_RETURN_NONE;
    const unsigned char *code = (const unsigned char *)PyBytes_AS_STRING(prog);
    Py_ssize_t ncode = PyBytes_GET_SIZE(prog), nl = PyTuple_GET_SIZE(leaves);
    /* the code: every leaf it pushes given, the stack within bounds, one value left */
    int depth = 0, ops = 0;
    for (Py_ssize_t c = 0; c < ncode; c++) {
        unsigned char op = code[c];
        if (op >= FUSE_LEAF && op < FUSE_LEAF + FUSE_LEAVES) {
            if (op - FUSE_LEAF >= nl || ++depth > FUSE_DEPTH)
                goto bad_code;
        } else if (op == FUSE_NEG) {
            if (depth < 1)
                goto bad_code;
            ops++;
        } else if (op == FUSE_ADD || op == FUSE_SUB || op == FUSE_MUL || op == FUSE_DIV) {
            if (depth-- < 2)
                goto bad_code;
            ops++;
        } else {
            goto bad_code;
        }
    }
    if (depth != 1 || ops == 0 || nl > FUSE_LEAVES) {
bad_code:
        PyErr_SetString(PyExc_ValueError, "fuse: not the code of an expression of its leaves");
        return NULL;
    }
    fuse_leaf lv[FUSE_LEAVES];
    memset(lv, 0, sizeof(fuse_leaf) * (size_t)nl);
    PyObject *result = NULL, *out = NULL;
    Py_buffer ov;
    int oheld = 0;
    double *mem = NULL;
    int nd = 0, arrays = 0, fallback = 0;
    Py_ssize_t shape[FUSE_DIMS];
    for (Py_ssize_t j = 0; j < nl && !fallback; j++) {
        PyObject *o = PyTuple_GET_ITEM(leaves, j);
        if (PyFloat_Check(o)) {
            lv[j].value = PyFloat_AS_DOUBLE(o);
            continue;
        }
        if ((PyObject *)Py_TYPE(o) != fuse_ndarray) {
            fallback = 1;
            break;
        }
        if (PyObject_GetBuffer(o, &lv[j].view, PyBUF_STRIDES | PyBUF_FORMAT) < 0) {
            PyErr_Clear();
            fallback = 1;
            break;
        }
        lv[j].held = 1;
        const char *f = lv[j].view.format ? lv[j].view.format : "B";
        if (f[0] == '=' || f[0] == '<' || f[0] == '@')
            f++;
        int ndim = lv[j].view.ndim;
        if (f[0] != 'd' || f[1] != '\0' || lv[j].view.itemsize != (Py_ssize_t)sizeof(double)
            || ndim < 1 || ndim > FUSE_DIMS || ((uintptr_t)lv[j].view.buf) % sizeof(double)) {
            fallback = 1;
            break;
        }
        for (int k = 0; k < ndim; k++)
            if (lv[j].view.strides[k] % (Py_ssize_t)sizeof(double)) {
                fallback = 1;
                break;
            }
        lv[j].array = 1;
        lv[j].data = (const char *)lv[j].view.buf;
        arrays++;
        if (ndim > nd) {  /* numpy's broadcasting: the shapes aligned at their ends */
            for (int k = nd - 1; k >= 0; k--)
                shape[k + ndim - nd] = shape[k];
            for (int k = 0; k < ndim - nd; k++)
                shape[k] = 1;
            nd = ndim;
        }
        for (int k = 0; k < ndim && !fallback; k++) {
            Py_ssize_t s = lv[j].view.shape[k], *t = &shape[k + nd - ndim];
            if (*t == 1)
                *t = s;
            else if (s != 1 && s != *t)
                fallback = 1;
        }
    }
    if (fallback || arrays == 0)
        goto none;
    Py_ssize_t total = 1;
    for (int k = 0; k < nd; k++)
        total *= shape[k];
    for (Py_ssize_t j = 0; j < nl; j++) {
        if (!lv[j].array)
            continue;
        int ndim = lv[j].view.ndim;
        for (int k = 0; k < nd; k++) {
            int a = k - (nd - ndim);
            lv[j].st[k] = a < 0 || lv[j].view.shape[a] == 1 ? 0 : lv[j].view.strides[a];
        }
    }
    /* the result: numpy.empty(shape), C-ordered */
    PyObject *dims = PyTuple_New(nd);
    if (dims == NULL)
        goto done;
    for (int k = 0; k < nd; k++)
        PyTuple_SET_ITEM(dims, k, PyLong_FromSsize_t(shape[k]));
    out = PyObject_CallOneArg(fuse_empty, dims);
    Py_DECREF(dims);
    if (out == NULL)
        goto done;
    if (PyObject_GetBuffer(out, &ov, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0)
        goto done;
    oheld = 1;
    if (total == 0)
        goto finish;
    /* axes merged where every leaf steps through them as through one */
    Py_ssize_t sh[FUSE_DIMS];
    int m = 0;
    for (int k = 0; k < nd; k++) {
        if (shape[k] == 1)
            continue;
        int merge = m > 0;
        for (Py_ssize_t j = 0; j < nl && merge; j++)
            if (lv[j].array && lv[j].st[m - 1] != lv[j].st[k] * shape[k])
                merge = 0;
        if (merge) {
            sh[m - 1] *= shape[k];
            for (Py_ssize_t j = 0; j < nl; j++)
                if (lv[j].array)
                    lv[j].st[m - 1] = lv[j].st[k];
        } else {
            for (Py_ssize_t j = 0; j < nl; j++)
                if (lv[j].array)
                    lv[j].st[m] = lv[j].st[k];
            sh[m++] = shape[k];
        }
    }
    if (m == 0) {  /* one element */
        sh[0] = 1;
        for (Py_ssize_t j = 0; j < nl; j++)
            lv[j].st[0] = 0;
        m = 1;
    }
    Py_ssize_t cols = sh[m - 1], rows = total / cols;
    Py_ssize_t per = cols < FUSE_BLOCK ? FUSE_BLOCK / cols : 1;  /* rows in a block */
    Py_ssize_t width = cols < FUSE_BLOCK ? cols : FUSE_BLOCK;
    mem = PyMem_Malloc(sizeof(double) * FUSE_BLOCK * (size_t)(FUSE_DEPTH + nl));
    if (mem == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    double *pool[FUSE_DEPTH];
    for (int b = 0; b < FUSE_DEPTH; b++)
        pool[b] = mem + (size_t)b * FUSE_BLOCK;
    for (Py_ssize_t j = 0; j < nl; j++) {
        lv[j].buf = mem + (size_t)(FUSE_DEPTH + j) * FUSE_BLOCK;
        lv[j].ptr = lv[j].buf;
        if (!lv[j].array) {
            for (Py_ssize_t i = 0; i < FUSE_BLOCK; i++)
                lv[j].buf[i] = lv[j].value;
            continue;
        }
        int pattern = cols < FUSE_BLOCK;  /* whole rows a block, each row the same */
        for (int k = 0; k < m - 1; k++)
            if (lv[j].st[k] != 0)
                pattern = 0;
        lv[j].pattern = pattern;
        if (pattern)
            for (Py_ssize_t q = 0; q < per; q++)
                fuse_copy(lv[j].buf + q * cols, lv[j].data, lv[j].st[m - 1], cols);
    }
    double *res = (double *)ov.buf;
    Py_ssize_t idx[FUSE_DIMS];
    memset(idx, 0, sizeof(idx));
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t r = 0; r < rows;) {
        Py_ssize_t hr = per < rows - r ? per : rows - r;  /* rows in this block */
        for (Py_ssize_t c0 = 0; c0 < cols; c0 += width) {
            Py_ssize_t w = cols - c0 < width ? cols - c0 : width, len = hr * w;
            for (Py_ssize_t j = 0; j < nl; j++) {
                fuse_leaf *l = &lv[j];
                if (!l->array || l->pattern)
                    continue;
                Py_ssize_t s = l->st[m - 1];
                if (hr == 1 && s == (Py_ssize_t)sizeof(double)) {
                    l->ptr = (const double *)(l->data + l->off + c0 * s);
                } else if (m == 2 && s == (Py_ssize_t)sizeof(double) && l->st[0] == cols * s) {
                    l->ptr = (const double *)(l->data + l->off);  /* rows one after another */
                } else if (m == 2) {  /* rows one stride apart (an (n, 1) leaf: s = 0) */
                    const char *src = l->data + l->off + c0 * s;
                    for (Py_ssize_t q = 0; q < hr; q++, src += l->st[0])
                        fuse_copy(l->buf + q * w, src, s, w);
                    l->ptr = l->buf;
                } else {
                    /* row by row, from this block's first row: offsets advanced below */
                    Py_ssize_t off = l->off, id2[FUSE_DIMS];
                    memcpy(id2, idx, sizeof(Py_ssize_t) * (size_t)m);
                    for (Py_ssize_t q = 0; q < hr; q++) {
                        fuse_copy(l->buf + q * w, l->data + off + c0 * s, s, w);
                        for (int k = m - 2; k >= 0; k--) {  /* the next row */
                            off += l->st[k];
                            if (++id2[k] < sh[k])
                                break;
                            off -= l->st[k] * sh[k];
                            id2[k] = 0;
                        }
                    }
                    l->ptr = l->buf;
                }
            }
            fuse_block(code, ncode, lv, pool, len, res + r * cols + c0);
        }
        for (Py_ssize_t q = 0; q < hr; q++) {  /* every leaf's offset to the next block's row */
            for (int k = m - 2; k >= 0; k--) {
                for (Py_ssize_t j = 0; j < nl; j++)
                    lv[j].off += lv[j].st[k];
                if (++idx[k] < sh[k])
                    break;
                for (Py_ssize_t j = 0; j < nl; j++)
                    lv[j].off -= lv[j].st[k] * sh[k];
                idx[k] = 0;
            }
        }
        r += hr;
    }
    Py_END_ALLOW_THREADS
finish:
    result = out;
    out = NULL;
    goto done;
none:
    Py_INCREF(Py_None);
    result = Py_None;
done:
    if (oheld)
        PyBuffer_Release(&ov);
    Py_XDECREF(out);
    for (Py_ssize_t j = 0; j < nl; j++)
        if (lv[j].held)
            PyBuffer_Release(&lv[j].view);
    PyMem_Free(mem);
    return result;
}

static PyMethodDef methods[] = {
    {"fuse", fuse, METH_VARARGS,
     "fuse(prog, leaves): an elementwise expression of float64 arrays and reals in one "
     "pass (None: not such leaves)."},
    {"fuse_setup", fuse_setup, METH_VARARGS,
     "fuse_setup(ndarray, empty): numpy's array type and its numpy.empty, for fuse."},
    {"running", running, METH_VARARGS,
     "running(parts, masks, n, start[, negs]): the sequential sum of the parts' values "
     "(negated where negs says), element by element (None: nothing added)."},
    {"rows", rows, METH_VARARGS,
     "rows(values, n, start, out): each of the n rows' sequential sum, into out."},
    {"select", select_, METH_VARARGS,
     "select(mask, a, b, out): out[i] = a[i] if mask[i] else b[i], without branching."},
    {"tree", tree, METH_VARARGS,
     "tree(x, is_max, vals, leaves): each row's value and leaf of the evaluator's "
     "balanced fold tree of max (min)."},
    {"colsum", colsum, METH_VARARGS,
     "colsum(col, block, add, start, out): each column's sequential sum, row by row, "
     "into out (of the products col[i] * block[i][j] (+ add) when col is not None)."},
    {"scaled", scaled, METH_VARARGS,
     "scaled(col, block, add, out): out[i][j] = col[i] * block[i][j] (+ add)."},
    {"dots", dots, METH_VARARGS,
     "dots(a, b, out): out[i] = numpy's pairwise sum of the products a[i][j] * b[i][j]."},
    {"scatter", scatter, METH_VARARGS,
     "scatter(out, idx, vals): out[idx[k]] += vals[k] in order; False at an index "
     "out of range."},
    {"chain", chain, METH_VARARGS,
     "chain(out, vals, idx): a chain of adds of rows at indices, added into out in "
     "its bag's order; False at an index out of range."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_kernels",
    "Loops numpy lacks, in C (chad/compile/kernels.py).", -1, methods,
};

PyMODINIT_FUNC PyInit__kernels(void) { return PyModule_Create(&module); }
