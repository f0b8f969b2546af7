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
 *
 * The replay of one seed (replay.py) makes every split and merge Synoptic makes, thousands of rounds each
 * over the whole graph, so its per-round work is here too:
 * holds_if_split(indptr, indices, ptype, part, has_succ, has_pred, members, events, mark, p, kind, a, b,
 *                initial, terminal_type) -> bool
 *     would `a kind b` hold if `events` (of p) stayed and p's other members moved to a new partition: the
 *     search of `shortest` on the split graph, built on the fly from the graph's CSR and split_steps' pass.
 *     With a last argument `witness` (int32, writable): -1 if it holds, else the length of a walk breaking
 *     it written there (INITIAL first; 0 when it does not fit), node ids of the split graph (q = nodes).
 * walk_in_graph(indptr, indices, walks, bounds, avoid) -> index | -1
 *     the first walk whose every step is an edge and no node `avoid`: a walk breaking an invariant found
 *     once still breaks it on any later graph where this holds (replay.py's trials).
 * ordered_successors(part, has_succ, rank, indptr, indices) -> edges
 *     every partition's successors in the order its events (by rank within the partition) first reach them.
 * ordered_successors_update(part, has_succ, old_indptr, old_indices, touched, touched_ptr, touched_events,
 *                           indptr, indices) -> edges
 *     the same after a round, made again only for the partitions whose lists can have changed.
 * split_masks(part, has_succ, has_pred, order, prev, nxt, out_mask, in_mask) -> bits
 *     replay.split_masks: a stitch's outgoing and incoming candidate splits.
 * coarsen(src, dst, ptype, plist, nfpred, appred, afsucc, initial, terminal, merges) -> (merges, trials)
 *     replay.replay_coarsen's scan with each merge trial checked incrementally (see there).
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

/* Synoptic's HistoryNode in an arena: (node, index of the history before it, -1 = none); its length is
 * kept where the search holds it (HL below). */
typedef struct {
    int32_t node, prev;
} Hist;

typedef struct {
    Hist *h;
    Py_ssize_t n, cap;
} Arena;

static int32_t arena_add(Arena *ar, int32_t node, int32_t prev) {
    if (ar->n == ar->cap) {
        Py_ssize_t cap = ar->cap ? ar->cap * 2 : 1024;
        Hist *h = realloc(ar->h, sizeof(Hist) * (size_t)cap);
        if (!h) return -2;
        ar->h = h;
        ar->cap = cap;
    }
    ar->h[ar->n] = (Hist){node, prev};
    return (int32_t)ar->n++;
}

/* A history as the search holds it: its arena index (-1: none) and its length, kept beside the index so
 * comparing two histories reads no arena entry. */
typedef struct {
    int32_t h, len;
} HL;

static const HL NO_HISTORY = {-1, 0};

/* preferShorter(old, new): the shorter history, new on a tie. */
static inline HL prefer(HL old, HL nw) {
    if (nw.h < 0) return old;
    if (old.h < 0) return nw;
    return old.len < nw.len ? old : nw;
}

/* The search of synoptic_walk. */
static PyObject *synoptic_search(WalkArgs w) {
    const int32_t *ptr = I32(w.ptr), *idx = I32(w.idx), *ptype = I32(w.ptype);
    Py_ssize_t n = w.ptype.n;
    int width = w.kind == 0 ? 2 : 3, fail = w.kind == 0 ? 0 : 2;
    HL *states = malloc(sizeof(HL) * (size_t)(width * n));
    int32_t *queue = malloc(sizeof(int32_t) * (size_t)(n + 1));
    uint8_t *queued = calloc((size_t)n, 1);
    Arena ar = {NULL, 0, 0};
    PyObject *result = NULL;
    int32_t *walk = NULL;
    if (!states || !queue || !queued) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t k = 0; k < width * n; k++) states[k] = NO_HISTORY;
    int32_t start = arena_add(&ar, w.initial, -1);
    if (start < 0) {
        PyErr_NoMemory();
        goto done;
    }
    const HL first = {start, 1};
    int32_t typ = ptype[w.initial];
    HL *init = states + (Py_ssize_t)w.initial * width;
    if (w.kind == 0)
        init[typ == w.a ? 0 : 1] = first;
    else if (w.kind == 1)
        init[typ == w.a ? 1 : 0] = first;
    else
        init[typ == w.a ? 1 : typ == w.b ? 2 : 0] = first;
    /* the worklist is a ring of at most n queued nodes */
    Py_ssize_t head = 0, count = 0;
    queue[0] = w.initial;
    count = 1;
    queued[w.initial] = 1;
    HL found = NO_HISTORY;
    while (count > 0 && found.h < 0) {
        int32_t node = queue[head];
        head = (head + 1) % n;
        count--;
        queued[node] = 0;
        for (int32_t e = ptr[node]; e < ptr[node + 1]; e++) {
            int32_t target = idx[e], tt = ptype[target];
            const HL *cur = states + (Py_ssize_t)node * width;
            HL *old = states + (Py_ssize_t)target * width;
            HL h0 = cur[0], h1 = cur[1], h2 = width == 3 ? cur[2] : NO_HISTORY;
            if (w.kind == 0) {
                if (tt == w.a) {
                    h0 = prefer(h1, h0);
                    h1 = NO_HISTORY;
                } else if (tt == w.b) {
                    h1 = prefer(h0, h1);
                    h0 = NO_HISTORY;
                }
            } else if (w.kind == 1) {
                if (tt == w.b) {
                    h2 = prefer(h1, h2);
                    h1 = NO_HISTORY;
                }
                if (tt == w.a) {
                    h1 = prefer(h0, h1);
                    h0 = NO_HISTORY;
                }
            } else {
                if (tt == w.a) {
                    h1 = prefer(h0, h1);
                    h0 = NO_HISTORY;
                } else if (tt == w.b) {
                    h2 = prefer(h0, h2);
                    h0 = NO_HISTORY;
                }
            }
            const HL upd[3] = {h0, h1, h2};
            int grows = 0;
            for (int i = 0; i < width; i++) {
                if (upd[i].h < 0) continue;
                /* a history that would lose to the one kept (shorter wins, a tie goes to the new one) is not
                 * made; one that is made replaces it */
                if (old[i].h >= 0 && old[i].len < upd[i].len + 1) continue;
                const int32_t made = arena_add(&ar, target, upd[i].h);
                if (made == -2) {
                    PyErr_NoMemory();
                    goto done;
                }
                grows |= old[i].h < 0;
                old[i] = (HL){made, upd[i].len + 1};
            }
            if (old[fail].h >= 0 && tt == w.terminal_type) {
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
    if (found.h < 0) {
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    Py_ssize_t len = found.len;
    walk = malloc(sizeof(int32_t) * (size_t)len);
    if (!walk) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t i = len;
    for (int32_t k = found.h; k >= 0 && i > 0; k = ar.h[k].prev) walk[--i] = ar.h[k].node;
    result = walk_list(walk + i, len - i);
done:
    free(states);
    free(queue);
    free(queued);
    free(ar.h);
    free(walk);
    return result;
}

static PyObject *synoptic_walk(PyObject *self, PyObject *args) {
    WalkArgs w;
    if (walk_args(args, &w) < 0) return NULL;
    PyObject *result = synoptic_search(w);
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
/* The split preview's pass over p's members (see split_steps below); -1 with an exception set when a member
 * lies outside the log. */
static long split_pass(const int32_t *pt, Py_ssize_t len, const uint8_t *hs, const uint8_t *hp, const int32_t *mem,
                       Py_ssize_t n, const uint8_t *mv, int32_t p, uint8_t *sn, Py_ssize_t width) {
    long inner = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        const int32_t e = mem[i];
        const int side = mv[i] != 0;
        if (e < 0 || e >= len) {
            PyErr_SetString(PyExc_IndexError, "split_steps: member outside the log");
            return -1;
        }
        if (hs[e] && e + 1 < len) {
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
    return inner;
}

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
    long inner = split_pass(I32(part), part.n, (const uint8_t *)succ.view.buf, (const uint8_t *)pred.view.buf,
                            I32(members), members.n, (const uint8_t *)moving.view.buf, p, (uint8_t *)seen.view.buf,
                            seen.n / 4);
    if (inner >= 0) result = PyLong_FromLong(inner);
done:
    for (int j = 0; j < k; j++) PyBuffer_Release(&got[j]->view);
    return result;
}

/* Does `a kind b` hold on the graph if p were split as split_steps says (the moving side a new node q =
 * nodes)? The breadth-first search of `shortest` on that graph, built on the fly from the graph's CSR and
 * the split's steps, so a candidate split costs p's events plus one search, not a new graph. */
static PyObject *holds_if_split(PyObject *self, PyObject *args) {
    PyObject *ipo, *ixo, *tyo, *po, *so, *ro, *mo, *eo, *ko, *wo = NULL;
    int p, kind, a, b, initial, terminal_type;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOiiiiii|O", &ipo, &ixo, &tyo, &po, &so, &ro, &mo, &eo, &ko, &p, &kind, &a,
                          &b, &initial, &terminal_type, &wo))
        return NULL;
    Arr wit = {0};
    if (wo && get_arr(wo, &wit, 4, 1, "witness") < 0) return NULL;
    Arr ptr, idx, ptype, part, succ, pred, members, events, mark;
    Arr *got[9] = {&ptr, &idx, &ptype, &part, &succ, &pred, &members, &events, &mark};
    PyObject *objs[9] = {ipo, ixo, tyo, po, so, ro, mo, eo, ko};
    const Py_ssize_t sizes[9] = {4, 4, 4, 4, 1, 1, 4, 4, 1};
    const char *names[9] = {"indptr", "indices", "ptype", "part", "has_succ", "has_pred", "members", "events", "mark"};
    int k = 0;
    for (; k < 9; k++)
        if (get_arr(objs[k], got[k], sizes[k], k == 8, names[k]) < 0) break;
    PyObject *result = NULL;
    uint8_t *sn = NULL, *visited = NULL, *moving = NULL;
    int32_t *queue = NULL, *parent = NULL;
    if (k < 9) goto done;
    const Py_ssize_t nodes = ptype.n, width = nodes + 1;
    if (ptr.n != nodes + 1 || mark.n != part.n || succ.n != part.n || pred.n != part.n || p < 0 || p >= nodes ||
        initial < 0 || initial >= nodes || kind < 0 || kind > 2) {
        PyErr_SetString(PyExc_ValueError, "holds_if_split: bad arguments");
        goto done;
    }
    const int32_t *ip = I32(ptr), *ix = I32(idx), *ty = I32(ptype), *ev = I32(events), *mem = I32(members);
    uint8_t *mk = (uint8_t *)mark.view.buf;
    sn = calloc((size_t)(4 * width), 1);
    visited = calloc((size_t)(3 * width), 1);
    queue = malloc(sizeof(int32_t) * (size_t)(3 * width));
    moving = malloc((size_t)members.n + 1);
    if (wo) parent = malloc(sizeof(int32_t) * (size_t)(3 * width));
    if (!sn || !visited || !queue || !moving || (wo && !parent)) {
        PyErr_NoMemory();
        goto done;
    }
    /* the members not among `events` move */
    for (Py_ssize_t i = 0; i < events.n; i++) {
        if (ev[i] < 0 || ev[i] >= part.n) {
            PyErr_SetString(PyExc_IndexError, "holds_if_split: event outside the log");
            goto done;
        }
        mk[ev[i]] = 1;
    }
    for (Py_ssize_t i = 0; i < members.n; i++) moving[i] = mem[i] >= 0 && mem[i] < part.n ? !mk[mem[i]] : 1;
    for (Py_ssize_t i = 0; i < events.n; i++) mk[ev[i]] = 0;
    long inner = split_pass(I32(part), part.n, (const uint8_t *)succ.view.buf, (const uint8_t *)pred.view.buf, mem,
                            members.n, moving, p, sn, width);
    if (inner < 0) goto done;
    const int32_t q = (int32_t)nodes, tp = ty[p];
#define TYPE_OF(u) ((u) == q ? tp : ty[u])
    int32_t start = initial * 3 + step(kind, a, b, 0, ty[initial]);
    visited[start] = 1;
    if (parent) parent[start] = -1;
    Py_ssize_t head = 0, tail = 0;
    queue[tail++] = start;
    int found = 0;
    int32_t end = -1;
#define VISIT(v)                                                    \
    do {                                                            \
        int32_t k2 = (v) * 3 + step(kind, a, b, state, TYPE_OF(v)); \
        if (!visited[k2]) {                                         \
            visited[k2] = 1;                                        \
            if (parent) parent[k2] = key;                           \
            queue[tail++] = k2;                                     \
        }                                                           \
    } while (0)
    while (head < tail) {
        int32_t key = queue[head++], node = key / 3, state = key % 3;
        if (TYPE_OF(node) == terminal_type && (state == 2 || (kind == 0 && state == 1))) {
            found = 1;
            end = key;
            break;
        }
        if (node == p || node == q) {
            const int side = node == q;
            for (int32_t e = ip[p]; e < ip[p + 1]; e++) {
                int32_t v = ix[e];
                if (v != p && sn[side * width + v]) VISIT(v);
            }
            if (inner >> (2 * side) & 1) VISIT(p);
            if (inner >> (2 * side + 1) & 1) VISIT(q);
        } else {
            for (int32_t e = ip[node]; e < ip[node + 1]; e++) {
                int32_t v = ix[e];
                if (v != p) {
                    VISIT(v);
                } else {
                    if (sn[2 * width + node]) VISIT(p);
                    if (sn[3 * width + node]) VISIT(q);
                }
            }
        }
    }
#undef VISIT
#undef TYPE_OF
    if (!wo) {
        result = PyBool_FromLong(!found);
    } else if (!found) {
        result = PyLong_FromLong(-1);
    } else { /* the violating walk, INITIAL first, when it fits */
        Py_ssize_t len = 0;
        for (int32_t key = end; key >= 0; key = parent[key]) len++;
        int32_t *out = (int32_t *)wit.view.buf;
        if (len > wit.n) {
            len = 0;
        } else {
            Py_ssize_t i = len;
            for (int32_t key = end; key >= 0; key = parent[key]) out[--i] = key / 3;
        }
        result = PyLong_FromSsize_t(len);
    }
done:
    free(sn);
    free(visited);
    free(queue);
    free(moving);
    free(parent);
    for (int j = 0; j < k; j++) PyBuffer_Release(&got[j]->view);
    if (wo) PyBuffer_Release(&wit.view);
    return result;
}

/* walk_in_graph(indptr, indices, walks, bounds, avoid) -> index | -1: the first of the walks (walk i is
 * walks[bounds[i]:bounds[i + 1]]) whose every step is an edge of the graph and no node of which is `avoid`. */
static PyObject *walk_in_graph(PyObject *self, PyObject *args) {
    PyObject *ipo, *ixo, *wo, *bo;
    int avoid;
    if (!PyArg_ParseTuple(args, "OOOOi", &ipo, &ixo, &wo, &bo, &avoid)) return NULL;
    Arr ptr, idx, walks, bounds;
    Arr *got[4] = {&ptr, &idx, &walks, &bounds};
    PyObject *objs[4] = {ipo, ixo, wo, bo};
    const char *names[4] = {"indptr", "indices", "walks", "bounds"};
    int k = 0;
    for (; k < 4; k++)
        if (get_arr(objs[k], got[k], 4, 0, names[k]) < 0) break;
    PyObject *result = NULL;
    if (k < 4) goto done;
    const int32_t *ip = I32(ptr), *ix = I32(idx), *all = I32(walks), *bd = I32(bounds);
    const Py_ssize_t nodes = ptr.n - 1;
    long first = -1;
    for (Py_ssize_t wi = 0; wi + 1 < bounds.n && first < 0; wi++) {
        if (bd[wi] < 0 || bd[wi + 1] < bd[wi] || bd[wi + 1] > walks.n) {
            PyErr_SetString(PyExc_ValueError, "walk_in_graph: bad bounds");
            goto done;
        }
        const int32_t *w = all + bd[wi];
        const Py_ssize_t len = bd[wi + 1] - bd[wi];
        int ok = len > 0;
        for (Py_ssize_t i = 0; ok && i < len; i++) {
            const int32_t u = w[i];
            if (u < 0 || u >= nodes || u == avoid) {
                ok = 0;
                break;
            }
            if (i + 1 == len) break;
            int has = 0;
            for (int32_t e = ip[u]; e < ip[u + 1]; e++)
                if (e >= 0 && e < idx.n && ix[e] == w[i + 1]) {
                    has = 1;
                    break;
                }
            ok = has;
        }
        if (ok) first = (long)wi;
    }
    result = PyLong_FromLong(first);
done:
    for (int j = 0; j < k; j++) PyBuffer_Release(&got[j]->view);
    return result;
}

/* Successors of every partition in the order its events, taken in `rank` order (rank[e]: e's place in its
 * partition, 0 .. size - 1), first step into them: indptr (nparts + 1) and indices (>= the steps) filled,
 * returns the number of edges. One pass over the log instead of sorting every step's edge key. */
static PyObject *ordered_successors(PyObject *self, PyObject *args) {
    PyObject *po, *so, *ro, *ipo, *ixo;
    if (!PyArg_ParseTuple(args, "OOOOO", &po, &so, &ro, &ipo, &ixo)) return NULL;
    Arr part, succ, rank, ptr, idx;
    Arr *got[5] = {&part, &succ, &rank, &ptr, &idx};
    PyObject *objs[5] = {po, so, ro, ipo, ixo};
    const Py_ssize_t sizes[5] = {4, 1, 8, 4, 4};
    const char *names[5] = {"part", "has_succ", "rank", "indptr", "indices"};
    int k = 0;
    for (; k < 5; k++)
        if (get_arr(objs[k], got[k], sizes[k], k >= 3, names[k]) < 0) break;
    PyObject *result = NULL;
    int32_t *slot = NULL, *start = NULL, *stamp = NULL;
    if (k < 5) goto done;
    const Py_ssize_t n = part.n, nparts = ptr.n - 1;
    if (succ.n != n || rank.n != n || nparts < 0) {
        PyErr_SetString(PyExc_ValueError, "ordered_successors: array sizes disagree");
        goto done;
    }
    const int32_t *pt = I32(part);
    const int64_t *rk = (const int64_t *)rank.view.buf;
    const uint8_t *hs = (const uint8_t *)succ.view.buf;
    int32_t *out_ptr = (int32_t *)ptr.view.buf, *out_idx = (int32_t *)idx.view.buf;
    slot = malloc(sizeof(int32_t) * (size_t)(n ? n : 1));
    start = calloc((size_t)nparts + 1, sizeof(int32_t));
    stamp = malloc(sizeof(int32_t) * (size_t)(nparts ? nparts : 1));
    if (!slot || !start || !stamp) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t e = 0; e < n; e++) {
        if (pt[e] < 0 || pt[e] >= nparts) {
            PyErr_SetString(PyExc_IndexError, "ordered_successors: partition out of range");
            goto done;
        }
        start[pt[e] + 1]++;
    }
    for (Py_ssize_t u = 0; u < nparts; u++) start[u + 1] += start[u];
    for (Py_ssize_t e = 0; e < n; e++) {
        const int32_t u = pt[e];
        if (rk[e] < 0 || rk[e] >= start[u + 1] - start[u]) {
            PyErr_SetString(PyExc_IndexError, "ordered_successors: rank outside its partition");
            goto done;
        }
        slot[start[u] + rk[e]] = (int32_t)e;
    }
    for (Py_ssize_t u = 0; u < nparts; u++) stamp[u] = -1;
    Py_ssize_t edges = 0;
    int32_t lo = 0;
    for (Py_ssize_t u = 0; u < nparts; u++) {
        const int32_t hi = start[u + 1];
        out_ptr[u] = (int32_t)edges;
        for (int32_t i = lo; i < hi; i++) {
            const int32_t e = slot[i];
            if (!hs[e] || e + 1 >= n) continue;
            const int32_t d = pt[e + 1];
            if (stamp[d] == (int32_t)u) continue;
            stamp[d] = (int32_t)u;
            if (edges >= idx.n) {
                PyErr_SetString(PyExc_ValueError, "ordered_successors: indices too short");
                goto done;
            }
            out_idx[edges++] = d;
        }
        lo = hi;
    }
    out_ptr[nparts] = (int32_t)edges;
    result = PyLong_FromSsize_t(edges);
done:
    free(slot);
    free(start);
    free(stamp);
    for (int j = 0; j < k; j++) PyBuffer_Release(&got[j]->view);
    return result;
}

/* ordered_successors after a round, made again only where it can differ: `touched` (ascending partition
 * ids, with `tptr` bounding each one's events in `tevents`, in the partition's order) get their lists from
 * their events as ordered_successors makes them; every other partition's list is the old graph's
 * (old_indptr / old_indices; a partition there must exist in it). Fills indptr / indices, returns the edges. */
static PyObject *ordered_successors_update(PyObject *self, PyObject *args) {
    PyObject *objs[9];
    if (!PyArg_ParseTuple(args, "OOOOOOOOO", &objs[0], &objs[1], &objs[2], &objs[3], &objs[4], &objs[5], &objs[6],
                          &objs[7], &objs[8]))
        return NULL;
    Arr part, succ, optr, oidx, touched, tptr, tev, ptr, idx;
    Arr *got[9] = {&part, &succ, &optr, &oidx, &touched, &tptr, &tev, &ptr, &idx};
    const Py_ssize_t sizes[9] = {4, 1, 4, 4, 4, 4, 4, 4, 4};
    const char *names[9] = {"part", "has_succ", "old_indptr", "old_indices", "touched",
                            "touched_ptr", "touched_events", "indptr", "indices"};
    int k = 0;
    for (; k < 9; k++)
        if (get_arr(objs[k], got[k], sizes[k], k >= 7, names[k]) < 0) break;
    PyObject *result = NULL;
    int32_t *stamp = NULL;
    if (k < 9) goto done;
    const Py_ssize_t n = part.n, nparts = ptr.n - 1, old_n = optr.n - 1;
    if (succ.n != n || nparts < 0 || old_n < 0 || tptr.n != touched.n + 1) {
        PyErr_SetString(PyExc_ValueError, "ordered_successors_update: array sizes disagree");
        goto done;
    }
    const int32_t *pt = I32(part), *op = I32(optr), *oi = I32(oidx), *tu = I32(touched), *tp = I32(tptr),
                  *te = I32(tev);
    const uint8_t *hs = (const uint8_t *)succ.view.buf;
    int32_t *out_ptr = (int32_t *)ptr.view.buf, *out_idx = (int32_t *)idx.view.buf;
    stamp = malloc(sizeof(int32_t) * (size_t)(nparts ? nparts : 1));
    if (!stamp) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t u = 0; u < nparts; u++) stamp[u] = -1;
    Py_ssize_t edges = 0, t = 0;
    for (Py_ssize_t u = 0; u < nparts; u++) {
        out_ptr[u] = (int32_t)edges;
        if (t < touched.n && tu[t] == u) {
            if (tp[t] < 0 || tp[t + 1] < tp[t] || tp[t + 1] > tev.n) {
                PyErr_SetString(PyExc_ValueError, "ordered_successors_update: bad touched_ptr");
                goto done;
            }
            for (int32_t i = tp[t]; i < tp[t + 1]; i++) {
                const int32_t e = te[i];
                if (e < 0 || e >= n) {
                    PyErr_SetString(PyExc_IndexError, "ordered_successors_update: event outside the log");
                    goto done;
                }
                if (!hs[e] || e + 1 >= n) continue;
                const int32_t d = pt[e + 1];
                if (d < 0 || d >= nparts) {
                    PyErr_SetString(PyExc_IndexError, "ordered_successors_update: partition out of range");
                    goto done;
                }
                if (stamp[d] == (int32_t)u) continue;
                stamp[d] = (int32_t)u;
                if (edges >= idx.n) {
                    PyErr_SetString(PyExc_ValueError, "ordered_successors_update: indices too short");
                    goto done;
                }
                out_idx[edges++] = d;
            }
            t++;
        } else {
            if (u >= old_n || op[u] < 0 || op[u + 1] < op[u] || op[u + 1] > oidx.n) {
                PyErr_SetString(PyExc_ValueError, "ordered_successors_update: partition not in the old graph");
                goto done;
            }
            const int32_t len = op[u + 1] - op[u];
            if (edges + len > idx.n) {
                PyErr_SetString(PyExc_ValueError, "ordered_successors_update: indices too short");
                goto done;
            }
            memcpy(out_idx + edges, oi + op[u], sizeof(int32_t) * (size_t)len);
            edges += len;
        }
    }
    if (t != touched.n) {
        PyErr_SetString(PyExc_ValueError, "ordered_successors_update: touched not ascending or out of range");
        goto done;
    }
    out_ptr[nparts] = (int32_t)edges;
    result = PyLong_FromSsize_t(edges);
done:
    free(stamp);
    for (int j = 0; j < k; j++) PyBuffer_Release(&got[j]->view);
    return result;
}

/* ---- coarsening, as Synoptic's mergePartitions(pGraph, invs, 1) with a seed ---------------------------- */

typedef struct {
    int32_t *v;
    int32_t n, cap;
} Vec;

static int vec_push(Vec *a, int32_t x) {
    if (a->n == a->cap) {
        int32_t cap = a->cap ? 2 * a->cap : 4;
        int32_t *v = realloc(a->v, sizeof(int32_t) * (size_t)cap);
        if (!v) return -1;
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = x;
    return 0;
}

typedef struct { /* failed merge pairs, keyed (min << 32 | max); 0 = empty slot (pairs of node 0 never merge) */
    uint64_t *k;
    size_t cap, n;
} PairSet;

static size_t pair_slot(const PairSet *s, uint64_t key) {
    size_t h = (size_t)((key * 0x9E3779B97F4A7C15ULL) >> 17) & (s->cap - 1);
    while (s->k[h] && s->k[h] != key) h = (h + 1) & (s->cap - 1);
    return h;
}

static uint64_t pair_key(int32_t a, int32_t b) {
    return a < b ? ((uint64_t)(a + 1) << 32) | (uint32_t)(b + 1) : ((uint64_t)(b + 1) << 32) | (uint32_t)(a + 1);
}

static int pair_has(const PairSet *s, uint64_t key) { return s->k[pair_slot(s, key)] == key; }

static int pair_add(PairSet *s, uint64_t key) {
    if (2 * (s->n + 1) > s->cap) {
        PairSet g = {calloc(2 * s->cap, sizeof(uint64_t)), 2 * s->cap, 0};
        if (!g.k) return -1;
        for (size_t i = 0; i < s->cap; i++)
            if (s->k[i]) {
                g.k[pair_slot(&g, s->k[i])] = s->k[i];
                g.n++;
            }
        free(s->k);
        *s = g;
    }
    size_t h = pair_slot(s, key);
    if (!s->k[h]) {
        s->k[h] = key;
        s->n++;
    }
    return 0;
}

typedef struct {
    Py_ssize_t nodes;
    const int32_t *ty;
    int32_t initial, terminal;
    const uint64_t *nfpred, *appred, *afsucc;
    Vec *out, *in, *group;
    int32_t *rep; /* flat: every node's partition as last merged; during a trial tq counts as tp */
    int32_t tp, tq;
    uint64_t *A, *R, *N;
    /* undo log of one trial: node, which mask (0 A, 1 R, 2 N), old value */
    int32_t *log_node;
    uint8_t *log_which;
    uint64_t *log_old;
    Py_ssize_t log_n, log_cap;
    int32_t *queue;
    Py_ssize_t queue_cap;
} Coarse;

static int32_t find(const Coarse *c, int32_t u) {
    int32_t r = c->rep[u];
    return r == c->tq ? c->tp : r;
}

static int set_mask(Coarse *c, int32_t u, int which, uint64_t value) {
    if (c->log_n == c->log_cap) {
        Py_ssize_t cap = c->log_cap ? 2 * c->log_cap : 1024;
        int32_t *n1 = realloc(c->log_node, sizeof(int32_t) * (size_t)cap);
        if (n1) c->log_node = n1;
        uint8_t *n2 = realloc(c->log_which, (size_t)cap);
        if (n2) c->log_which = n2;
        uint64_t *n3 = realloc(c->log_old, sizeof(uint64_t) * (size_t)cap);
        if (n3) c->log_old = n3;
        if (!n1 || !n2 || !n3) return -1;
        c->log_cap = cap;
    }
    uint64_t *m = which == 0 ? c->A : which == 1 ? c->R : c->N;
    c->log_node[c->log_n] = u;
    c->log_which[c->log_n] = (uint8_t)which;
    c->log_old[c->log_n++] = m[u];
    m[u] = value;
    return 0;
}

static void undo(Coarse *c) {
    while (c->log_n > 0) {
        c->log_n--;
        uint64_t *m = c->log_which[c->log_n] == 0 ? c->A : c->log_which[c->log_n] == 1 ? c->R : c->N;
        m[c->log_node[c->log_n]] = c->log_old[c->log_n];
    }
}

#define ALL_TYPES (~(uint64_t)0)
#define BIT(t) ((uint64_t)1 << (t))

/* Does node u break an invariant through its A / R masks? */
static int breaks_forward(const Coarse *c, int32_t u) {
    int32_t t = c->ty[u];
    return (c->A[u] & c->nfpred[t]) || (c->R[u] & c->appred[t]);
}

/* Does node x break an AFby invariant: a successor from which TERMINAL is reached through no b-node, for
 * a mined x-type AFby b? (p's successors include q's while the two are being merged.) */
static int breaks_after(const Coarse *c, int32_t x, int32_t p, int32_t q) {
    uint64_t want = c->afsucc[c->ty[x]];
    if (!want) return 0;
    for (int side = 0; side < (x == p && q >= 0 ? 2 : 1); side++) {
        const Vec *o = &c->out[side ? q : x];
        for (int32_t e = 0; e < o->n; e++)
            if (c->N[find(c, o->v[e])] & want) return 1;
    }
    return 0;
}

/* Does some predecessor of y break an AFby invariant (see breaks_after)? */
static int pred_breaks_after(const Coarse *c, int32_t y, int32_t p, int32_t q) {
    for (int side = 0; side < (y == p && q >= 0 ? 2 : 1); side++) {
        const Vec *o = &c->in[side ? q : y];
        for (int32_t e = 0; e < o->n; e++)
            if (breaks_after(c, find(c, o->v[e]), p, q)) return 1;
    }
    return 0;
}

/* Grow A (types some walk of >= 1 step comes from) and R (rows a: reached from INITIAL through no a-node)
 * forward from the queue's nodes; u == p also steps along q's edges (p and q being merged). With `check`,
 * stop at the first node the growth makes break an invariant: returns 1 then, -1 out of memory, else 0. */
static int grow_forward(Coarse *c, Py_ssize_t head, Py_ssize_t tail, int32_t p, int32_t q, int check) {
    while (head < tail) {
        int32_t u = c->queue[head++ % c->queue_cap];
        int32_t tu = c->ty[u];
        uint64_t ca = c->A[u] | BIT(tu), cr = tu == c->initial ? ALL_TYPES : c->R[u];
        for (int side = 0; side < (u == p && q >= 0 ? 2 : 1); side++) {
            Vec *o = &c->out[side ? q : u];
            for (int32_t e = 0; e < o->n; e++) {
                int32_t v = find(c, o->v[e]);
                uint64_t na = c->A[v] | ca, nr = c->R[v] | (cr & ~BIT(c->ty[v]));
                if (na == c->A[v] && nr == c->R[v]) continue;
                if (na != c->A[v] && set_mask(c, v, 0, na) < 0) return -1;
                if (nr != c->R[v] && set_mask(c, v, 1, nr) < 0) return -1;
                if (check && breaks_forward(c, v)) return 1;
                c->queue[tail++ % c->queue_cap] = v;
            }
        }
    }
    return 0;
}

/* N (columns b: TERMINAL reached through no b-node, this one included) grown backward, as above. */
static int grow_backward(Coarse *c, Py_ssize_t head, Py_ssize_t tail, int32_t p, int32_t q, int check) {
    while (head < tail) {
        int32_t v = c->queue[head++ % c->queue_cap];
        uint64_t cn = c->N[v];
        for (int side = 0; side < (v == p && q >= 0 ? 2 : 1); side++) {
            Vec *o = &c->in[side ? q : v];
            for (int32_t e = 0; e < o->n; e++) {
                int32_t u = find(c, o->v[e]);
                uint64_t nn = c->N[u] | (cn & ~BIT(c->ty[u]));
                if (nn == c->N[u]) continue;
                if (set_mask(c, u, 2, nn) < 0) return -1;
                if (check && pred_breaks_after(c, u, p, q)) return 1;
                c->queue[tail++ % c->queue_cap] = u;
            }
        }
    }
    return 0;
}

/* Merge q into p for a trial: 1 if every invariant still holds (masks left grown, q counted as p), 0 if
 * not (everything rewound), -1 out of memory. The graph before holds every invariant, so only what the
 * merge adds can break one: the merged node's masks and edges, and what their growth reaches. */
static int try_merge(Coarse *c, int32_t p, int32_t q) {
    c->log_n = 0;
    c->tp = p;
    c->tq = q;
    int broken = 0;
    if (set_mask(c, p, 0, c->A[p] | c->A[q]) < 0 || set_mask(c, p, 1, c->R[p] | c->R[q]) < 0 ||
        set_mask(c, p, 2, c->N[p] | c->N[q]) < 0)
        return -1;
    broken = breaks_forward(c, p) || breaks_after(c, p, p, q) || pred_breaks_after(c, p, p, q);
    if (!broken) {
        c->queue[0] = p;
        broken = grow_forward(c, 0, 1, p, q, 1);
    }
    if (!broken) {
        c->queue[0] = p;
        broken = grow_backward(c, 0, 1, p, q, 1);
    }
    if (broken < 0) return -1;
    if (broken) undo(c);
    c->tq = c->tp = -1;
    return !broken;
}

/* q's edges become p's (duplicates dropped by the stamp), q's group p's. */
static int commit_merge(Coarse *c, int32_t p, int32_t q, int32_t *stamp, int32_t *clock) {
    for (int32_t i = 0; i < c->group[q].n; i++) {
        c->rep[c->group[q].v[i]] = p;
        if (vec_push(&c->group[p], c->group[q].v[i]) < 0) return -1;
    }
    free(c->group[q].v);
    c->group[q] = (Vec){NULL, 0, 0};
    for (int dir = 0; dir < 2; dir++) {
        Vec *lists = dir ? c->in : c->out;
        Vec merged = {NULL, 0, 0};
        (*clock)++;
        for (int side = 0; side < 2; side++) {
            Vec *o = &lists[side ? q : p];
            for (int32_t e = 0; e < o->n; e++) {
                int32_t v = find(c, o->v[e]);
                if (stamp[v] == *clock) continue;
                stamp[v] = *clock;
                if (vec_push(&merged, v) < 0) return -1;
            }
        }
        free(lists[p].v);
        free(lists[q].v);
        lists[p] = merged;
        lists[q] = (Vec){NULL, 0, 0};
    }
    return 0;
}

/* coarsen(src, dst, ptype, plist, nfpred, appred, afsucc, initial, terminal, merges) -> (merges, trials)
 * replay.replay_coarsen's scan (see there) with its merge trials done incrementally: per node bit masks
 * (types <= 64) of what reaches it and what it reaches, grown from the merged node only. merges (int32,
 * 2 x nodes) gets (kept, merged) pairs in order. */
static PyObject *coarsen(PyObject *self, PyObject *args) {
    PyObject *so, *do_, *to, *lo, *nfo, *apo, *afo, *mo;
    int initial, terminal;
    if (!PyArg_ParseTuple(args, "OOOOOOOiiO", &so, &do_, &to, &lo, &nfo, &apo, &afo, &initial, &terminal, &mo))
        return NULL;
    Arr src, dst, ptype, plist, nf, ap, af, merges;
    Arr *got[8] = {&src, &dst, &ptype, &plist, &nf, &ap, &af, &merges};
    PyObject *objs[8] = {so, do_, to, lo, nfo, apo, afo, mo};
    const Py_ssize_t sizes[8] = {4, 4, 4, 4, 8, 8, 8, 4};
    const char *names[8] = {"src", "dst", "ptype", "plist", "nfpred", "appred", "afsucc", "merges"};
    int k = 0;
    for (; k < 8; k++)
        if (get_arr(objs[k], got[k], sizes[k], k == 7, names[k]) < 0) break;
    PyObject *result = NULL;
    Coarse c;
    memset(&c, 0, sizeof c);
    PairSet failed = {NULL, 0, 0};
    int32_t *list = NULL, *next = NULL, *tstart = NULL, *tpos = NULL, *tlist = NULL, *stamp = NULL, *moved = NULL;
    uint8_t *gone = NULL;
    if (k < 8) goto done;
    const Py_ssize_t nodes = ptype.n, types = nf.n;
    const int32_t *ty = I32(ptype);
    if (src.n != dst.n || ap.n != types || af.n != types || types > 64 || merges.n < 2 * nodes ||
        initial < 0 || initial >= types || terminal < 0 || terminal >= types) {
        PyErr_SetString(PyExc_ValueError, "coarsen: bad arguments");
        goto done;
    }
    for (Py_ssize_t u = 0; u < nodes; u++)
        if (ty[u] >= types) {
            PyErr_SetString(PyExc_ValueError, "coarsen: type out of range");
            goto done;
        }
    c.nodes = nodes;
    c.ty = ty;
    c.initial = initial;
    c.terminal = terminal;
    c.nfpred = (const uint64_t *)nf.view.buf;
    c.appred = (const uint64_t *)ap.view.buf;
    c.afsucc = (const uint64_t *)af.view.buf;
    c.queue_cap = 64 * 3 * (nodes + 1) + 16; /* each push is a strict growth of one of three 64-bit masks */
    c.out = calloc((size_t)nodes + 1, sizeof(Vec));
    c.in = calloc((size_t)nodes + 1, sizeof(Vec));
    c.group = calloc((size_t)nodes + 1, sizeof(Vec));
    c.tp = c.tq = -1;
    c.rep = malloc(sizeof(int32_t) * (size_t)(nodes + 1));
    c.A = calloc((size_t)nodes + 1, sizeof(uint64_t));
    c.R = calloc((size_t)nodes + 1, sizeof(uint64_t));
    c.N = calloc((size_t)nodes + 1, sizeof(uint64_t));
    c.queue = malloc(sizeof(int32_t) * (size_t)c.queue_cap);
    failed.cap = 1024;
    failed.k = calloc(failed.cap, sizeof(uint64_t));
    list = malloc(sizeof(int32_t) * (size_t)(plist.n + 1));
    next = malloc(sizeof(int32_t) * (size_t)(plist.n + 1));
    tstart = malloc(sizeof(int32_t) * (size_t)(types + 2));
    tpos = malloc(sizeof(int32_t) * (size_t)(plist.n + 1));
    tlist = malloc(sizeof(int32_t) * (size_t)(plist.n + 1));
    moved = malloc(sizeof(int32_t) * (size_t)(plist.n + 1));
    stamp = calloc((size_t)nodes + 1, sizeof(int32_t));
    gone = calloc((size_t)nodes + 1, 1);
    if (!c.out || !c.in || !c.group || !c.rep || !c.A || !c.R || !c.N || !c.queue || !failed.k || !list || !next ||
        !tstart || !tpos || !tlist || !moved || !stamp || !gone)
        goto nomem;
    const int32_t *sv = I32(src), *dv = I32(dst);
    for (Py_ssize_t u = 0; u < nodes; u++) {
        c.rep[u] = (int32_t)u;
        if (vec_push(&c.group[u], (int32_t)u) < 0) goto nomem;
    }
    for (Py_ssize_t e = 0; e < src.n; e++) {
        if (sv[e] < 0 || sv[e] >= nodes || dv[e] < 0 || dv[e] >= nodes || ty[sv[e]] < 0 || ty[dv[e]] < 0) {
            PyErr_SetString(PyExc_ValueError, "coarsen: edge outside the graph");
            goto done;
        }
        if (vec_push(&c.out[sv[e]], dv[e]) < 0 || vec_push(&c.in[dv[e]], sv[e]) < 0) goto nomem;
    }
    /* the masks of the graph as it is: grown from every node until nothing changes */
    Py_ssize_t tail = 0;
    for (Py_ssize_t u = 0; u < nodes; u++) {
        if (ty[u] < 0) continue;
        if (ty[u] == terminal) c.N[u] = ALL_TYPES & ~BIT(terminal);
        c.queue[tail++] = (int32_t)u;
    }
    if (grow_forward(&c, 0, tail, -1, -1, 0) < 0) goto nomem;
    tail = 0;
    for (Py_ssize_t u = 0; u < nodes; u++)
        if (ty[u] >= 0) c.queue[tail++] = (int32_t)u;
    c.log_n = 0;
    if (grow_backward(&c, 0, tail, -1, -1, 0) < 0) goto nomem;
    c.log_n = 0;
    Py_ssize_t len = plist.n, nmerges = 0, resume = 0;
    long trials = 0;
    int32_t clock = 0;
    memcpy(list, plist.view.buf, sizeof(int32_t) * (size_t)len);
    int32_t *mout = (int32_t *)merges.view.buf;
    for (;;) {
        /* the order's members of each type, in order: tlist[tstart[t] ..], tpos[i] = i's place there */
        memset(tstart, 0, sizeof(int32_t) * (size_t)(types + 2));
        for (Py_ssize_t i = 0; i < len; i++) tstart[ty[list[i]] + 2]++;
        for (Py_ssize_t t = 0; t < types; t++) tstart[t + 2] += tstart[t + 1];
        for (Py_ssize_t i = 0; i < len; i++) {
            int32_t t = ty[list[i]];
            tpos[i] = tstart[t + 1];
            tlist[tstart[t + 1]++] = list[i];
        }
        /* now tstart[t + 1] is the end of type t's run, tstart[t] its start */
        int32_t mp = -1, mq = -1, nmoved = 0;
        Py_ssize_t at = 0;
        for (Py_ssize_t i = resume; i < len && mp < 0; i++) {
            at = i;
            int32_t p = list[i], tp = ty[p];
            if (tp == initial || tp == terminal) continue;
            for (int32_t j = tpos[i] + 1; j < tstart[tp + 1]; j++) {
                int32_t q = tlist[j];
                uint64_t key = pair_key(p, q);
                if (pair_has(&failed, key)) continue;
                trials++;
                int ok = try_merge(&c, p, q);
                if (ok < 0) goto nomem;
                if (!ok) {
                    if (pair_add(&failed, key) < 0) goto nomem;
                    int32_t w = 0;
                    for (int32_t r = 0; r < nmoved; r++)
                        if (moved[r] != q) moved[w++] = moved[r];
                    nmoved = w;
                    moved[nmoved++] = q;
                    continue;
                }
                mp = p;
                mq = q;
                break;
            }
        }
        if (mp < 0) break;
        if (commit_merge(&c, mp, mq, stamp, &clock) < 0) goto nomem;
        mout[2 * nmerges] = mp;
        mout[2 * nmerges + 1] = mq;
        nmerges++;
        gone[mq] = 1;
        for (int32_t r = 0; r < nmoved; r++) gone[moved[r]] = 1;
        /* Every pair the next pass would try before reaching the kept partition's old place has failed
         * already (the pairs among the entries before it were all tried in this pass or an earlier one,
         * and the entries moved to the end were tried with each of them), so the next pass starts there. */
        Py_ssize_t w = 0;
        resume = 0;
        for (Py_ssize_t i = 0; i < len; i++) {
            if (i == at) resume = w;
            if (!gone[list[i]]) next[w++] = list[i];
        }
        for (int32_t r = 0; r < nmoved; r++) {
            gone[moved[r]] = 0;
            if (moved[r] != mq) next[w++] = moved[r];
        }
        int32_t *tmp = list;
        list = next;
        next = tmp;
        len = w;
    }
    result = Py_BuildValue("nl", nmerges, trials);
    goto done;
nomem:
    PyErr_NoMemory();
done:
    if (c.out)
        for (Py_ssize_t u = 0; u <= c.nodes; u++) free(c.out[u].v);
    if (c.in)
        for (Py_ssize_t u = 0; u <= c.nodes; u++) free(c.in[u].v);
    if (c.group)
        for (Py_ssize_t u = 0; u <= c.nodes; u++) free(c.group[u].v);
    free(c.out);
    free(c.in);
    free(c.group);
    free(c.rep);
    free(c.A);
    free(c.R);
    free(c.N);
    free(c.queue);
    free(c.log_node);
    free(c.log_which);
    free(c.log_old);
    free(failed.k);
    free(list);
    free(next);
    free(tstart);
    free(tpos);
    free(tlist);
    free(moved);
    free(stamp);
    free(gone);
    for (int j = 0; j < k; j++) PyBuffer_Release(&got[j]->view);
    return result;
}

/* replay.split_masks in one pass over one partition's events `o` (in its order): out_mask[i] = o[i] steps
 * into nxt, in_mask[i] = o[i] is entered from prev (prev < 0: none); returns bit 0 when the outgoing split
 * leaves both sides non-empty, bit 1 when the incoming one does. */
static PyObject *split_masks(PyObject *self, PyObject *args) {
    PyObject *po, *so, *ro, *oo, *om, *im;
    int prev, nxt;
    if (!PyArg_ParseTuple(args, "OOOOiiOO", &po, &so, &ro, &oo, &prev, &nxt, &om, &im)) return NULL;
    Arr part, succ, pred, ord, outm, inm;
    Arr *got[6] = {&part, &succ, &pred, &ord, &outm, &inm};
    PyObject *objs[6] = {po, so, ro, oo, om, im};
    const Py_ssize_t sizes[6] = {4, 1, 1, 4, 1, 1};
    const char *names[6] = {"part", "has_succ", "has_pred", "order", "out_mask", "in_mask"};
    int k = 0;
    for (; k < 6; k++)
        if (get_arr(objs[k], got[k], sizes[k], k >= 4, names[k]) < 0) break;
    PyObject *result = NULL;
    if (k < 6) goto done;
    if (succ.n != part.n || pred.n != part.n || outm.n != ord.n || inm.n != ord.n) {
        PyErr_SetString(PyExc_ValueError, "split_masks: array sizes disagree");
        goto done;
    }
    const int32_t *pt = I32(part), *o = I32(ord);
    const uint8_t *hs = (const uint8_t *)succ.view.buf, *hp = (const uint8_t *)pred.view.buf;
    uint8_t *out = (uint8_t *)outm.view.buf, *in = (uint8_t *)inm.view.buf;
    Py_ssize_t n_out = 0, n_in = 0;
    for (Py_ssize_t i = 0; i < ord.n; i++) {
        const int32_t e = o[i];
        if (e < 0 || e >= part.n) {
            PyErr_SetString(PyExc_IndexError, "split_masks: event outside the log");
            goto done;
        }
        out[i] = hs[e] && e + 1 < part.n && pt[e + 1] == nxt;
        in[i] = prev >= 0 && hp[e] && e > 0 && pt[e - 1] == prev;
        n_out += out[i];
        n_in += in[i];
    }
    result = PyLong_FromLong((n_out > 0 && n_out < ord.n) | ((n_in > 0 && n_in < ord.n) << 1));
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
    {"holds_if_split", holds_if_split, METH_VARARGS, "Whether an invariant holds if a partition were split."},
    {"walk_in_graph", walk_in_graph, METH_VARARGS, "The first walk whose steps are all edges, avoiding a node."},
    {"ordered_successors", ordered_successors, METH_VARARGS, "Successors per partition in its events' order."},
    {"ordered_successors_update", ordered_successors_update, METH_VARARGS,
     "ordered_successors made again for some partitions only."},
    {"split_masks", split_masks, METH_VARARGS, "The outgoing and incoming candidate splits at a stitch."},
    {"coarsen", coarsen, METH_VARARGS, "Synoptic's coarsening with its merge order, incrementally checked."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "fastcheck", NULL, -1, methods};

PyMODINIT_FUNC PyInit_fastcheck(void) { return PyModule_Create(&module); }
