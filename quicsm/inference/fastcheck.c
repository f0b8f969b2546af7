/* Model checking of Synoptic invariants on a partition graph: the loops refinement and coarsening run
 * thousands of times (quicsm/inference/checker.py holds the pure-Python twin of every function here, and
 * tests/inference/test_check_c.py holds the two equal).
 *
 * Graphs come as CSR arrays (int32): the successors of node u are indices[indptr[u]:indptr[u+1]], in the
 * order the walks must try them; ptype[u] is u's event type (negative: an empty slot, never reached).
 * Invariant kinds: 0 AFby, 1 NFby, 2 AP.
 *
 * violations(indptr, indices, rindptr, rindices, ptype, size, nfby, ap, afby, out_nfby, out_ap, out_afby)
 *     The mined invariants (size x size uint8 matrices) that fail on the graph, written into the out_*
 *     matrices: one breadth-first search per type row instead of matrix closures (whose cost grows with the
 *     graph's diameter).
 * shortest(indptr, indices, ptype, kind, a, b, initial, terminal_type) -> list | None
 *     checker.counterexample: the shortest INITIAL -> TERMINAL walk breaking `a kind b`.
 * synoptic_walk(indptr, indices, ptype, kind, a, b, initial, terminal_type) -> list | None
 *     checker.synoptic_counterexample's search (Synoptic's FsmModelChecker), the walk before its cut.
 * stitch(part, terminal_type, types, start, walk) -> (prev, cur, nxt)
 *     synoptic._stitch_splits's walk of the events taking a counterexample until none goes on.
 * split_steps(part, has_succ, has_pred, members, moving, p, seen) -> int
 *     partitions.PartitionGraph.successors_if_split's steps touching partition p if it were split by
 *     `moving`: one pass over p's events instead of numpy's gathers, masks and counts over millions of them.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    Py_buffer view;
    Py_ssize_t n;
} Arr;

static int get_arr(PyObject *obj, Arr *out, Py_ssize_t itemsize, int writable, const char *what) {
    if (PyObject_GetBuffer(obj, &out->view, PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0)) < 0) return -1;
    if (out->view.itemsize != itemsize) {
        PyErr_Format(PyExc_TypeError, "%s: items of %zd bytes expected, got %zd", what, itemsize, out->view.itemsize);
        PyBuffer_Release(&out->view);
        return -1;
    }
    out->n = out->view.len / itemsize;
    return 0;
}

#define I32(a) ((const int32_t *)(a).view.buf)

/* ---- violations ---------------------------------------------------------------------------------- */

typedef struct {
    const int32_t *ptr, *idx;
} Csr;

/* Breadth-first from the queue's first `head_end` nodes (already marked), entering only nodes whose type is
 * not `avoid` (avoid < -1: no restriction), marking types reached. */
static void grow(Csr g, const int32_t *ptype, int32_t avoid, int32_t *queue, Py_ssize_t qlen, uint8_t *seen,
                 uint8_t *types) {
    Py_ssize_t head = 0;
    while (head < qlen) {
        int32_t u = queue[head++];
        for (int32_t e = g.ptr[u]; e < g.ptr[u + 1]; e++) {
            int32_t v = g.idx[e];
            if (seen[v] || ptype[v] == avoid) continue;
            seen[v] = 1;
            if (ptype[v] >= 0) types[ptype[v]] = 1;
            queue[qlen++] = v;
        }
    }
}

/* The types of the nodes reachable in >= 1 step from the nodes of type `from`, through nodes not of type
 * `avoid`, into `types`. */
static void reach_after(Csr g, const int32_t *ptype, Py_ssize_t n, int32_t from, int32_t avoid, int32_t *queue,
                        uint8_t *seen, uint8_t *types, Py_ssize_t size) {
    memset(seen, 0, (size_t)n);
    memset(types, 0, (size_t)size);
    Py_ssize_t q = 0;
    for (Py_ssize_t u = 0; u < n; u++) {
        if (ptype[u] != from) continue;
        for (int32_t e = g.ptr[u]; e < g.ptr[u + 1]; e++) {
            int32_t v = g.idx[e];
            if (seen[v] || ptype[v] == avoid) continue;
            seen[v] = 1;
            if (ptype[v] >= 0) types[ptype[v]] = 1;
            queue[q++] = v;
        }
    }
    grow(g, ptype, avoid, queue, q, seen, types);
}

static PyObject *violations(PyObject *self, PyObject *args) {
    PyObject *o[12];
    Py_ssize_t size;
    if (!PyArg_ParseTuple(args, "OOOOOnOOOOOO", &o[0], &o[1], &o[2], &o[3], &o[4], &size, &o[5], &o[6], &o[7],
                          &o[8], &o[9], &o[10]))
        return NULL;
    Arr a[11];
    int got = 0, ok = 1;
    const char *names[11] = {"indptr", "indices", "rindptr", "rindices", "ptype", "nfby",
                             "ap",     "afby",    "out_nfby", "out_ap",  "out_afby"};
    for (; got < 11; got++) {
        if (get_arr(o[got], &a[got], got < 5 ? 4 : 1, got >= 8, names[got]) < 0) {
            ok = 0;
            break;
        }
    }
    if (ok) {
        Py_ssize_t n = a[4].n;
        for (int i = 5; i < 11; i++)
            if (a[i].n != size * size) {
                PyErr_SetString(PyExc_ValueError, "invariant matrices must be size x size");
                ok = 0;
            }
        if (ok && (a[0].n != n + 1 || a[2].n != n + 1)) {
            PyErr_SetString(PyExc_ValueError, "indptr must have one entry more than ptype");
            ok = 0;
        }
        int32_t *queue = NULL;
        uint8_t *seen = NULL, *types = NULL;
        if (ok) {
            queue = malloc(sizeof(int32_t) * (size_t)(n + 1));
            seen = malloc((size_t)n + 1);
            types = malloc((size_t)size);
            if (!queue || !seen || !types) {
                PyErr_NoMemory();
                ok = 0;
            }
        }
        if (ok) {
            Csr fwd = {I32(a[0]), I32(a[1])}, bwd = {I32(a[2]), I32(a[3])};
            const int32_t *ptype = I32(a[4]);
            const uint8_t *nfby = a[5].view.buf, *ap = a[6].view.buf, *afby = a[7].view.buf;
            uint8_t *out_nfby = a[8].view.buf, *out_ap = a[9].view.buf, *out_afby = a[10].view.buf;
            int32_t initial = (int32_t)size - 2, terminal = (int32_t)size - 1;
            Py_BEGIN_ALLOW_THREADS
            for (Py_ssize_t x = 0; x < size; x++) {
                int any_nfby = 0, any_ap = 0, any_afby = 0;
                for (Py_ssize_t y = 0; y < size; y++) {
                    any_nfby |= nfby[x * size + y];
                    any_ap |= ap[x * size + y];
                    any_afby |= afby[y * size + x];
                }
                if (any_nfby) { /* x NFby y fails iff a y-node is reachable (>= 1 step) from an x-node */
                    reach_after(fwd, ptype, n, (int32_t)x, -2, queue, seen, types, size);
                    for (Py_ssize_t y = 0; y < size; y++) out_nfby[x * size + y] = types[y] & nfby[x * size + y];
                }
                if (any_ap) { /* x AP y fails iff a y-node is reachable from INITIAL through no x-node */
                    reach_after(fwd, ptype, n, initial, (int32_t)x, queue, seen, types, size);
                    for (Py_ssize_t y = 0; y < size; y++) out_ap[x * size + y] = types[y] & ap[x * size + y];
                }
                if (any_afby) { /* y AFby x fails iff a y-node steps into a node reaching TERMINAL avoiding x */
                    memset(seen, 0, (size_t)n);
                    memset(types, 0, (size_t)size);
                    Py_ssize_t q = 0;
                    for (Py_ssize_t u = 0; u < n; u++) {
                        if (ptype[u] != terminal || ptype[u] == x) continue;
                        seen[u] = 1;
                        queue[q++] = u;
                    }
                    grow(bwd, ptype, (int32_t)x, queue, q, seen, types); /* the types of co itself are not needed */
                    memset(types, 0, (size_t)size);
                    for (Py_ssize_t u = 0; u < n; u++) {
                        if (!seen[u]) continue;
                        for (int32_t e = bwd.ptr[u]; e < bwd.ptr[u + 1]; e++) {
                            int32_t v = bwd.idx[e];
                            if (ptype[v] >= 0) types[ptype[v]] = 1;
                        }
                    }
                    for (Py_ssize_t y = 0; y < size; y++) out_afby[y * size + x] = types[y] & afby[y * size + x];
                }
            }
            Py_END_ALLOW_THREADS
        }
        free(queue);
        free(seen);
        free(types);
    }
    for (int i = 0; i < got; i++) PyBuffer_Release(&a[i].view);
    if (!ok) return NULL;
    Py_RETURN_NONE;
}

/* ---- the invariant automata ---------------------------------------------------------------------- */

/* checker._step: state 0/1, 2 = violated (kept). */
static int step(int kind, int32_t a, int32_t b, int state, int32_t typ) {
    if (state == 2) return 2;
    if (kind == 0) {
        if (typ == b) return 0;
        return typ == a ? 1 : state;
    }
    if (kind == 1) {
        if (state == 1 && typ == b) return 2;
        return typ == a ? 1 : state;
    }
    if (state == 0 && typ == b) return 2;
    return typ == a ? 1 : state;
}

static PyObject *walk_list(const int32_t *nodes, Py_ssize_t len) {
    PyObject *out = PyList_New(len);
    if (!out) return NULL;
    for (Py_ssize_t i = 0; i < len; i++) {
        PyObject *v = PyLong_FromLong(nodes[i]);
        if (!v) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, v);
    }
    return out;
}

typedef struct {
    Arr ptr, idx, ptype;
    int kind;
    int32_t a, b, initial, terminal_type;
} WalkArgs;

static int walk_args(PyObject *args, WalkArgs *w) {
    PyObject *p, *i, *t;
    if (!PyArg_ParseTuple(args, "OOOiiiii", &p, &i, &t, &w->kind, &w->a, &w->b, &w->initial, &w->terminal_type))
        return -1;
    if (get_arr(p, &w->ptr, 4, 0, "indptr") < 0) return -1;
    if (get_arr(i, &w->idx, 4, 0, "indices") < 0) {
        PyBuffer_Release(&w->ptr.view);
        return -1;
    }
    if (get_arr(t, &w->ptype, 4, 0, "ptype") < 0) {
        PyBuffer_Release(&w->ptr.view);
        PyBuffer_Release(&w->idx.view);
        return -1;
    }
    if (w->ptr.n != w->ptype.n + 1 || w->initial < 0 || w->initial >= w->ptype.n || w->kind < 0 || w->kind > 2) {
        PyErr_SetString(PyExc_ValueError, "bad graph or walk arguments");
        PyBuffer_Release(&w->ptr.view);
        PyBuffer_Release(&w->idx.view);
        PyBuffer_Release(&w->ptype.view);
        return -1;
    }
    return 0;
}

static void walk_release(WalkArgs *w) {
    PyBuffer_Release(&w->ptr.view);
    PyBuffer_Release(&w->idx.view);
    PyBuffer_Release(&w->ptype.view);
}

static PyObject *shortest(PyObject *self, PyObject *args) {
    WalkArgs w;
    if (walk_args(args, &w) < 0) return NULL;
    const int32_t *ptr = I32(w.ptr), *idx = I32(w.idx), *ptype = I32(w.ptype);
    Py_ssize_t n = w.ptype.n;
    int32_t *parent = malloc(sizeof(int32_t) * (size_t)(3 * n));
    int32_t *queue = malloc(sizeof(int32_t) * (size_t)(3 * n));
    PyObject *result = NULL;
    if (!parent || !queue) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t k = 0; k < 3 * n; k++) parent[k] = -1;
    int32_t start = w.initial * 3 + step(w.kind, w.a, w.b, 0, ptype[w.initial]);
    parent[start] = -2;
    Py_ssize_t head = 0, tail = 0;
    queue[tail++] = start;
    int32_t end = -1;
    while (head < tail) {
        int32_t key = queue[head++], node = key / 3, state = key % 3;
        if (ptype[node] == w.terminal_type && (state == 2 || (w.kind == 0 && state == 1))) {
            end = key;
            break;
        }
        for (int32_t e = ptr[node]; e < ptr[node + 1]; e++) {
            int32_t nxt = idx[e];
            int32_t k2 = nxt * 3 + step(w.kind, w.a, w.b, state, ptype[nxt]);
            if (parent[k2] == -1) {
                parent[k2] = key;
                queue[tail++] = k2;
            }
        }
    }
    if (end < 0) {
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    Py_ssize_t len = 0;
    for (int32_t k = end; k != -2; k = parent[k]) queue[len++] = k / 3;
    for (Py_ssize_t i = 0; i < len / 2; i++) {
        int32_t t = queue[i];
        queue[i] = queue[len - 1 - i];
        queue[len - 1 - i] = t;
    }
    result = walk_list(queue, len);
done:
    free(parent);
    free(queue);
    walk_release(&w);
    return result;
}

/* Synoptic's HistoryNode in an arena: (walk length, node, index of the history before it), -1 = none. */
typedef struct {
    int32_t len, node, prev;
} Hist;

typedef struct {
    Hist *h;
    Py_ssize_t n, cap;
} Arena;

static int32_t arena_add(Arena *ar, int32_t len, int32_t node, int32_t prev) {
    if (ar->n == ar->cap) {
        Py_ssize_t cap = ar->cap ? ar->cap * 2 : 1024;
        Hist *h = realloc(ar->h, sizeof(Hist) * (size_t)cap);
        if (!h) return -2;
        ar->h = h;
        ar->cap = cap;
    }
    ar->h[ar->n] = (Hist){len, node, prev};
    return (int32_t)ar->n++;
}

/* preferShorter(old, new): the shorter history, new on a tie. */
static int32_t prefer(const Arena *ar, int32_t old, int32_t nw) {
    if (nw < 0) return old;
    if (old < 0) return nw;
    return ar->h[old].len < ar->h[nw].len ? old : nw;
}

static PyObject *synoptic_walk(PyObject *self, PyObject *args) {
    WalkArgs w;
    if (walk_args(args, &w) < 0) return NULL;
    const int32_t *ptr = I32(w.ptr), *idx = I32(w.idx), *ptype = I32(w.ptype);
    Py_ssize_t n = w.ptype.n;
    int width = w.kind == 0 ? 2 : 3, fail = w.kind == 0 ? 0 : 2;
    int32_t *states = malloc(sizeof(int32_t) * (size_t)(width * n));
    int32_t *queue = malloc(sizeof(int32_t) * (size_t)(n + 1));
    uint8_t *queued = calloc((size_t)n, 1);
    Arena ar = {NULL, 0, 0};
    PyObject *result = NULL;
    int32_t *walk = NULL;
    if (!states || !queue || !queued) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t k = 0; k < width * n; k++) states[k] = -1;
    int32_t start = arena_add(&ar, 1, w.initial, -1);
    if (start < 0) {
        PyErr_NoMemory();
        goto done;
    }
    int32_t typ = ptype[w.initial], *init = states + (Py_ssize_t)w.initial * width;
    if (w.kind == 0)
        init[typ == w.a ? 0 : 1] = start;
    else if (w.kind == 1)
        init[typ == w.a ? 1 : 0] = start;
    else
        init[typ == w.a ? 1 : typ == w.b ? 2 : 0] = start;
    /* the worklist is a ring of at most n queued nodes */
    Py_ssize_t head = 0, count = 0;
    queue[0] = w.initial;
    count = 1;
    queued[w.initial] = 1;
    int32_t found = -1;
    while (count > 0 && found < 0) {
        int32_t node = queue[head];
        head = (head + 1) % n;
        count--;
        queued[node] = 0;
        for (int32_t e = ptr[node]; e < ptr[node + 1]; e++) {
            int32_t target = idx[e], tt = ptype[target];
            int32_t *cur = states + (Py_ssize_t)node * width, *old = states + (Py_ssize_t)target * width;
            int32_t h0 = cur[0], h1 = cur[1], h2 = width == 3 ? cur[2] : -1;
            if (w.kind == 0) {
                if (tt == w.a) {
                    h0 = prefer(&ar, h1, h0);
                    h1 = -1;
                } else if (tt == w.b) {
                    h1 = prefer(&ar, h0, h1);
                    h0 = -1;
                }
            } else if (w.kind == 1) {
                if (tt == w.b) {
                    h2 = prefer(&ar, h1, h2);
                    h1 = -1;
                }
                if (tt == w.a) {
                    h1 = prefer(&ar, h0, h1);
                    h0 = -1;
                }
            } else {
                if (tt == w.a) {
                    h1 = prefer(&ar, h0, h1);
                    h0 = -1;
                } else if (tt == w.b) {
                    h2 = prefer(&ar, h0, h2);
                    h0 = -1;
                }
            }
            int32_t upd[3] = {h0, h1, h2};
            for (int i = 0; i < width; i++) {
                if (upd[i] >= 0) {
                    upd[i] = arena_add(&ar, ar.h[upd[i]].len + 1, target, upd[i]);
                    if (upd[i] == -2) {
                        PyErr_NoMemory();
                        goto done;
                    }
                }
            }
            int grows = 0;
            for (int i = 0; i < width; i++) grows |= old[i] < 0 && upd[i] >= 0;
            for (int i = 0; i < width; i++) old[i] = prefer(&ar, old[i], upd[i]);
            if (old[fail] >= 0 && tt == w.terminal_type) {
                found = old[fail];
                break;
            }
            if (grows && !queued[target]) {
                queue[(head + count) % n] = target;
                count++;
                queued[target] = 1;
            }
        }
    }
    if (found < 0) {
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    Py_ssize_t len = ar.h[found].len;
    walk = malloc(sizeof(int32_t) * (size_t)len);
    if (!walk) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t i = len;
    for (int32_t k = found; k >= 0 && i > 0; k = ar.h[k].prev) walk[--i] = ar.h[k].node;
    result = walk_list(walk + i, len - i);
done:
    free(states);
    free(queue);
    free(queued);
    free(ar.h);
    free(walk);
    walk_release(&w);
    return result;
}

/* ---- stitch -------------------------------------------------------------------------------------- */

static PyObject *stitch(PyObject *self, PyObject *args) {
    PyObject *po, *to, *so, *wo;
    int terminal_type;
    if (!PyArg_ParseTuple(args, "OiOOO", &po, &terminal_type, &to, &so, &wo)) return NULL;
    Arr part, types, start, walk;
    if (get_arr(po, &part, 4, 0, "part") < 0) return NULL;
    if (get_arr(to, &types, 4, 0, "types") < 0) {
        PyBuffer_Release(&part.view);
        return NULL;
    }
    if (get_arr(so, &start, 4, 0, "start") < 0) {
        PyBuffer_Release(&part.view);
        PyBuffer_Release(&types.view);
        return NULL;
    }
    if (get_arr(wo, &walk, 4, 0, "walk") < 0) {
        PyBuffer_Release(&part.view);
        PyBuffer_Release(&types.view);
        PyBuffer_Release(&start.view);
        return NULL;
    }
    PyObject *result = NULL;
    int32_t *hot = malloc(sizeof(int32_t) * (size_t)(start.n + 1));
    if (!hot) {
        PyErr_NoMemory();
        goto done;
    }
    const int32_t *p = I32(part), *ty = I32(types), *wk = I32(walk);
    memcpy(hot, start.view.buf, sizeof(int32_t) * (size_t)start.n);
    Py_ssize_t nhot = start.n;
    int32_t prev = -1, cur = -1, nxt = -1;
    int ended = 0;
    for (Py_ssize_t s = 0; s < walk.n; s++) {
        prev = cur;
        cur = nxt;
        nxt = wk[s];
        Py_ssize_t k = 0;
        for (Py_ssize_t i = 0; i < nhot; i++)
            if (hot[i] >= 0 && hot[i] < part.n && p[hot[i]] == nxt) hot[k++] = hot[i];
        if (k == 0) {
            ended = 1;
            break;
        }
        nhot = 0;
        for (Py_ssize_t i = 0; i < k; i++)
            if (ty[hot[i]] != terminal_type) hot[nhot++] = hot[i] + 1;
    }
    if (!ended) {
        result = Py_None;
        Py_INCREF(result);
    } else {
        result = Py_BuildValue("(iii)", prev, cur, nxt);
    }
done:
    free(hot);
    PyBuffer_Release(&part.view);
    PyBuffer_Release(&types.view);
    PyBuffer_Release(&start.view);
    PyBuffer_Release(&walk.view);
    return result;
}

/* ---- split_steps --------------------------------------------------------------------------------- */

/* The steps touching p's events if the events with moving[i] set went to a new partition q: seen (uint8,
 * 4 x width) gets row 0 / 1 [d] = 1 for a step from the staying / moving side out to partition d, row 2 / 3
 * [s] = 1 for a step from partition s into the staying / moving side; the return value has bit
 * 2 * from + to set for a step within p (0 staying, 1 moving side). Members are sorted, so a step within p
 * goes to the next member. */
static PyObject *split_steps(PyObject *self, PyObject *args) {
    PyObject *po, *so, *ro, *mo, *vo, *out;
    int p;
    if (!PyArg_ParseTuple(args, "OOOOOiO", &po, &so, &ro, &mo, &vo, &p, &out)) return NULL;
    Arr part, succ, pred, members, moving, seen;
    Arr *got[6] = {&part, &succ, &pred, &members, &moving, &seen};
    PyObject *objs[6] = {po, so, ro, mo, vo, out};
    const Py_ssize_t sizes[6] = {4, 1, 1, 4, 1, 1};
    const char *names[6] = {"part", "has_succ", "has_pred", "members", "moving", "seen"};
    int k = 0;
    for (; k < 6; k++)
        if (get_arr(objs[k], got[k], sizes[k], k == 5, names[k]) < 0) break;
    PyObject *result = NULL;
    if (k < 6) goto done;
    if (moving.n != members.n || succ.n != part.n || pred.n != part.n || seen.n % 4) {
        PyErr_SetString(PyExc_ValueError, "split_steps: array sizes disagree");
        goto done;
    }
    const int32_t *pt = I32(part), *mem = I32(members);
    const uint8_t *hs = (const uint8_t *)succ.view.buf, *hp = (const uint8_t *)pred.view.buf;
    const uint8_t *mv = (const uint8_t *)moving.view.buf;
    uint8_t *sn = (uint8_t *)seen.view.buf;
    const Py_ssize_t width = seen.n / 4, n = members.n;
    long inner = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        const int32_t e = mem[i];
        const int side = mv[i] != 0;
        if (e < 0 || e >= part.n) {
            PyErr_SetString(PyExc_IndexError, "split_steps: member outside the log");
            goto done;
        }
        if (hs[e] && e + 1 < part.n) {
            const int32_t d = pt[e + 1];
            if (d == p) {
                if (i + 1 < n) inner |= 1L << (2 * side + (mv[i + 1] != 0));
            } else if (d >= 0 && d < width) {
                sn[side * width + d] = 1;
            }
        }
        if (hp[e] && e > 0) {
            const int32_t s = pt[e - 1];
            if (s != p && s >= 0 && s < width) sn[(2 + side) * width + s] = 1;
        }
    }
    result = PyLong_FromLong(inner);
done:
    for (int j = 0; j < k; j++) PyBuffer_Release(&got[j]->view);
    return result;
}

static PyMethodDef methods[] = {
    {"violations", violations, METH_VARARGS, "Write the failing mined invariants into the out matrices."},
    {"shortest", shortest, METH_VARARGS, "Shortest counterexample walk, or None."},
    {"synoptic_walk", synoptic_walk, METH_VARARGS, "Synoptic's counterexample walk before its cut, or None."},
    {"stitch", stitch, METH_VARARGS, "(prev, cur, nxt) where the events taking a walk stop, or None."},
    {"split_steps", split_steps, METH_VARARGS, "The steps touching a partition if it were split (see above)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "fastcheck", NULL, -1, methods};

PyMODINIT_FUNC PyInit_fastcheck(void) { return PyModule_Create(&module); }
