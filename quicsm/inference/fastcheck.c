/* Model checking of Synoptic invariants on a partition graph: the loops refinement and coarsening run
 * thousands of times. Each function has a pure-Python twin (checker.py, partitions.py, replay.py: chosen
 * once per module where this extension is not built); tests/inference/test_check_c.py and
 * test_synoptic_replay.py hold each pair equal on the same inputs.
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
 * over the whole graph, so all of it runs here (replay.py's Python rounds are its twin):
 * coarsen(src, dst, ptype, plist, nfpred, appred, afsucc, initial, terminal, merges) -> (merges, trials)
 *     replay.replay_coarsen's scan with each merge trial checked incrementally (see there).
 * replay_rounds(part, types, has_succ, has_pred, ptype, invariants, initial, terminal_type, rng, budget, limit,
 *               stats, out_ptype) -> (status, partitions)
 *     replay's rounds, every round in one call: the searches above on successor lists made again only
 *     where a round changes them, each invariant's counterexample search taken up again from the first node
 *     whose list changed since its last round (see synoptic_search_core), a split trial's search on the
 *     split graph built on the fly (trial_core), decided at once by a walk an earlier trial found breaking
 *     the invariant when that walk is still in the graph (walk_ok).
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

/* get_arr for n arguments in turn (bit i of `writable`: the i-th must be writable): how many were fetched,
 * n when all were (else an exception is set); release_arrs gives back that many. */
static int get_arrs(PyObject *const *objs, Arr *const *got, const Py_ssize_t *sizes, unsigned writable,
                    const char *const *names, int n) {
    for (int k = 0; k < n; k++)
        if (get_arr(objs[k], got[k], sizes[k], (int)(writable >> k & 1u), names[k]) < 0) return k;
    return n;
}

static void release_arrs(Arr *const *got, int k) {
    for (int j = 0; j < k; j++) PyBuffer_Release(&got[j]->view);
}

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
    Arr a[11], *got[11];
    for (int i = 0; i < 11; i++) got[i] = &a[i];
    const Py_ssize_t sizes[11] = {4, 4, 4, 4, 4, 1, 1, 1, 1, 1, 1};
    const char *names[11] = {"indptr", "indices", "rindptr", "rindices", "ptype", "nfby",
                             "ap",     "afby",    "out_nfby", "out_ap",  "out_afby"};
    int k = get_arrs(o, got, sizes, 0x700u, names, 11);
    int32_t *queue = NULL;
    uint8_t *seen = NULL, *types = NULL;
    PyObject *result = NULL;
    if (k < 11) goto done;
    Py_ssize_t n = a[4].n;
    for (int i = 5; i < 11; i++)
        if (a[i].n != size * size) {
            PyErr_SetString(PyExc_ValueError, "invariant matrices must be size x size");
            goto done;
        }
    if (a[0].n != n + 1 || a[2].n != n + 1) {
        PyErr_SetString(PyExc_ValueError, "indptr must have one entry more than ptype");
        goto done;
    }
    queue = malloc(sizeof(int32_t) * (size_t)(n + 1));
    seen = malloc((size_t)n + 1);
    types = malloc((size_t)size);
    if (!queue || !seen || !types) {
        PyErr_NoMemory();
        goto done;
    }
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
    result = Py_NewRef(Py_None);
done:
    free(queue);
    free(seen);
    free(types);
    release_arrs(got, k);
    return result;
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
    PyObject *o[3];
    if (!PyArg_ParseTuple(args, "OOOiiiii", &o[0], &o[1], &o[2], &w->kind, &w->a, &w->b, &w->initial, &w->terminal_type))
        return -1;
    Arr *got[3] = {&w->ptr, &w->idx, &w->ptype};
    const Py_ssize_t sizes[3] = {4, 4, 4};
    const char *names[3] = {"indptr", "indices", "ptype"};
    int k = get_arrs(o, got, sizes, 0, names, 3);
    if (k == 3 && (w->ptr.n != w->ptype.n + 1 || w->initial < 0 || w->initial >= w->ptype.n || w->kind < 0 || w->kind > 2))
        PyErr_SetString(PyExc_ValueError, "bad graph or walk arguments");
    else if (k == 3)
        return 0;
    release_arrs(got, k);
    return -1;
}

static void walk_release(WalkArgs *w) {
    Arr *got[3] = {&w->ptr, &w->idx, &w->ptype};
    release_arrs(got, 3);
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

/* One node as the search holds it, in one half cache line: its automaton states' histories (valid where
 * gen == the search's clock, so nothing is cleared per search) and its type. */
typedef struct {
    int32_t gen, type;
    HL st[3];
} SNode;

/* A state the search overwrote (slot -1: the node was unreached before), to rewind it. */
typedef struct {
    int32_t node, slot;
    HL old;
} Undo;

/* Where the search stood when it took the worklist's i-th node: the undo log's, the arena's and the pushes'
 * sizes. */
typedef struct {
    int32_t undo, arena, pushed;
} PopMark;

/* One search and everything it needs to be taken up again (resumable): the nodes (types of the first `typed`
 * filled in: a partition's type never changes while the replay refines), the worklist as the log of every node
 * pushed (FIFO: the i-th node taken is the i-th pushed), a mark per node taken, the undo log, the history arena
 * and the result. A later search of the same invariant on a graph where only some successor lists changed is
 * the same search up to the first node taken whose list changed: it is rewound to there and goes on. */
typedef struct {
    SNode *nodes;
    uint8_t *queued;
    int32_t *push;
    PopMark *pops;
    Undo *undo;
    Py_ssize_t cap, typed, npush, npop, nundo, undo_cap;
    int32_t clock, build;
    int ran;
    HL found;
    Arena ar;
} SearchWs;

static void search_ws_free(SearchWs *ws) {
    free(ws->nodes);
    free(ws->queued);
    free(ws->push);
    free(ws->pops);
    free(ws->undo);
    free(ws->ar.h);
    memset(ws, 0, sizeof *ws);
}

/* Room for n nodes (each pushed and taken at most once per automaton state): 0, or -1 out of memory. */
static int search_ws_fit(SearchWs *ws, Py_ssize_t n) {
    if (n <= ws->cap) return 0;
    Py_ssize_t cap = ws->cap * 2 > n ? ws->cap * 2 : n + 16;
    SNode *nd = realloc(ws->nodes, sizeof(SNode) * (size_t)cap);
    if (nd) ws->nodes = nd;
    uint8_t *qd = realloc(ws->queued, (size_t)cap);
    if (qd) ws->queued = qd;
    int32_t *pu = realloc(ws->push, sizeof(int32_t) * (size_t)(3 * cap + 1));
    if (pu) ws->push = pu;
    PopMark *po = realloc(ws->pops, sizeof(PopMark) * (size_t)(3 * cap + 1));
    if (po) ws->pops = po;
    if (!nd || !qd || !pu || !po) return -1;
    for (Py_ssize_t u = ws->cap; u < cap; u++) {
        ws->nodes[u].gen = 0;
        ws->queued[u] = 0;
    }
    ws->cap = cap;
    return 0;
}

static int undo_push(SearchWs *ws, int32_t node, int32_t slot, HL old) {
    if (ws->nundo == ws->undo_cap) {
        Py_ssize_t cap = ws->undo_cap ? 2 * ws->undo_cap : 1024;
        Undo *u = realloc(ws->undo, sizeof(Undo) * (size_t)cap);
        if (!u) return -1;
        ws->undo = u;
        ws->undo_cap = cap;
    }
    ws->undo[ws->nundo++] = (Undo){node, slot, old};
    return 0;
}

/* The search of synoptic_walk on nodes 0 .. n - 1 (u's successors: idx[beg[u] .. end[u]); a CSR's indptr gives
 * beg = indptr, end = indptr + 1): 1 with *found the failing history (in ws->ar), 0 when the
 * invariant holds, -1 out of memory. With `changed` (per node: == build when its successor list differs from
 * the build before) and a search of this invariant on the build before in ws, that search is taken up from the
 * first node it took whose list changed (none: its result stands). */
static int synoptic_search_core(const int32_t *beg, const int32_t *end, const int32_t *idx, const int32_t *ptype,
                                Py_ssize_t n, int kind,
                                int32_t a, int32_t b, int32_t initial, int32_t terminal_type, SearchWs *ws,
                                HL *found_out, const int32_t *changed, int32_t build) {
    if (search_ws_fit(ws, n) < 0) return -1;
    const int width = kind == 0 ? 2 : 3, fail = kind == 0 ? 0 : 2;
    SNode *nodes = ws->nodes;
    for (Py_ssize_t u = ws->typed; u < n; u++) nodes[u].type = ptype[u];
    if (ws->typed < n) ws->typed = n;
    uint8_t *queued = ws->queued;
    int32_t *push = ws->push;
    Arena *ar = &ws->ar;
    Py_ssize_t from = -1;
    if (changed && ws->ran && ws->build == build - 1) {
        from = 0;
        while (from < ws->npop && changed[push[from]] != build) from++;
    }
    ws->build = build;
    ws->ran = 1;
    if (from >= 0 && from == ws->npop) { /* it read no changed list */
        *found_out = ws->found;
        return ws->found.h >= 0;
    }
    for (Py_ssize_t i = ws->npop; i < ws->npush; i++) queued[push[i]] = 0;
    if (from >= 0) { /* rewound to where it took its first changed list */
        const PopMark m = ws->pops[from];
        while (ws->nundo > m.undo) {
            const Undo u = ws->undo[--ws->nundo];
            if (u.slot < 0)
                nodes[u.node].gen = 0;
            else
                nodes[u.node].st[u.slot] = u.old;
        }
        ar->n = m.arena;
        ws->npush = m.pushed;
        ws->npop = from;
        for (Py_ssize_t i = from; i < ws->npush; i++) queued[push[i]] = 1;
    } else { /* a new search */
        if (++ws->clock == INT32_MAX) { /* stamps wrap: every node's states stale again */
            for (Py_ssize_t u = 0; u < ws->cap; u++) nodes[u].gen = 0;
            ws->clock = 1;
        }
        ws->nundo = 0;
        ar->n = 0;
        const int32_t start = arena_add(ar, initial, -1);
        if (start < 0) return -1;
        SNode *init = &nodes[initial];
        init->gen = ws->clock;
        init->st[0] = init->st[1] = init->st[2] = NO_HISTORY;
        const HL first = {start, 1};
        const int32_t typ = ptype[initial];
        if (kind == 0)
            init->st[typ == a ? 0 : 1] = first;
        else if (kind == 1)
            init->st[typ == a ? 1 : 0] = first;
        else
            init->st[typ == a ? 1 : typ == b ? 2 : 0] = first;
        push[0] = initial;
        ws->npush = 1;
        ws->npop = 0;
        queued[initial] = 1;
    }
    const int32_t clock = ws->clock;
    Py_ssize_t npush = ws->npush, npop = ws->npop;
    HL found = NO_HISTORY;
    int nomem = 0;
    while (npop < npush && found.h < 0) {
        ws->pops[npop] = (PopMark){(int32_t)ws->nundo, (int32_t)ar->n, (int32_t)npush};
        const int32_t node = push[npop++];
        queued[node] = 0;
        for (int32_t e = beg[node]; e < end[node]; e++) {
            const int32_t target = idx[e];
            SNode *tn = &nodes[target];
            if (tn->gen != clock) {
                if (undo_push(ws, target, -1, NO_HISTORY) < 0) {
                    nomem = 1;
                    break;
                }
                tn->gen = clock;
                tn->st[0] = tn->st[1] = tn->st[2] = NO_HISTORY;
            }
            HL *old = tn->st;
            const int32_t tt = tn->type;
            const HL *cur = nodes[node].st;
            HL h0 = cur[0], h1 = cur[1], h2 = width == 3 ? cur[2] : NO_HISTORY;
            if (kind == 0) {
                if (tt == a) {
                    h0 = prefer(h1, h0);
                    h1 = NO_HISTORY;
                } else if (tt == b) {
                    h1 = prefer(h0, h1);
                    h0 = NO_HISTORY;
                }
            } else if (kind == 1) {
                if (tt == b) {
                    h2 = prefer(h1, h2);
                    h1 = NO_HISTORY;
                }
                if (tt == a) {
                    h1 = prefer(h0, h1);
                    h0 = NO_HISTORY;
                }
            } else {
                if (tt == a) {
                    h1 = prefer(h0, h1);
                    h0 = NO_HISTORY;
                } else if (tt == b) {
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
                const int32_t made = ar->n < ar->cap ? (ar->h[ar->n] = (Hist){target, upd[i].h}, (int32_t)ar->n++)
                                                     : arena_add(ar, target, upd[i].h);
                if (made == -2 || undo_push(ws, target, i, old[i]) < 0) {
                    nomem = 1;
                    break;
                }
                grows |= old[i].h < 0;
                old[i] = (HL){made, upd[i].len + 1};
            }
            if (nomem) break;
            if (old[fail].h >= 0 && tt == terminal_type) {
                found = old[fail];
                break;
            }
            if (grows && !queued[target]) {
                push[npush++] = target;
                queued[target] = 1;
            }
        }
        if (nomem) break;
    }
    ws->npush = npush;
    ws->npop = npop;
    if (nomem) {
        ws->ran = 0;
        return -1;
    }
    ws->found = found;
    *found_out = found;
    return found.h >= 0;
}

/* The nodes of a history found by the search, first to last, into walk (room for h.len). */
static Py_ssize_t history_walk(const Arena *ar, HL h, int32_t *walk) {
    Py_ssize_t i = h.len;
    for (int32_t k = h.h; k >= 0 && i > 0; k = ar->h[k].prev) walk[--i] = ar->h[k].node;
    if (i > 0) memmove(walk, walk + i, sizeof(int32_t) * (size_t)(h.len - i));
    return h.len - i;
}

/* The search of synoptic_walk. */
static PyObject *synoptic_search(WalkArgs w) {
    SearchWs ws;
    memset(&ws, 0, sizeof ws);
    HL found = NO_HISTORY;
    PyObject *result = NULL;
    int32_t *walk = NULL;
    int got = synoptic_search_core(I32(w.ptr), I32(w.ptr) + 1, I32(w.idx), I32(w.ptype), w.ptype.n, w.kind, w.a, w.b,
                                   w.initial, w.terminal_type, &ws, &found, NULL, 0);
    if (got < 0) {
        PyErr_NoMemory();
    } else if (got == 0) {
        result = Py_None;
        Py_INCREF(result);
    } else if (!(walk = malloc(sizeof(int32_t) * (size_t)found.len))) {
        PyErr_NoMemory();
    } else {
        result = walk_list(walk, history_walk(&ws.ar, found, walk));
    }
    free(walk);
    search_ws_free(&ws);
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

/* Follow the events `hot` (nhot of them, overwritten) along the walk until none goes on: 1 with (prev, cur,
 * nxt) set then, 0 if some event takes the whole walk. */
static int stitch_core(const int32_t *p, Py_ssize_t nev, const int32_t *ty, int32_t terminal_type, int32_t *hot,
                       Py_ssize_t nhot, const int32_t *wk, Py_ssize_t wlen, int32_t *prev_out, int32_t *cur_out,
                       int32_t *nxt_out) {
    int32_t prev = -1, cur = -1, nxt = -1;
    int ended = 0;
    for (Py_ssize_t s = 0; s < wlen; s++) {
        prev = cur;
        cur = nxt;
        nxt = wk[s];
        Py_ssize_t k = 0;
        for (Py_ssize_t i = 0; i < nhot; i++)
            if (hot[i] >= 0 && hot[i] < nev && p[hot[i]] == nxt) hot[k++] = hot[i];
        if (k == 0) {
            ended = 1;
            break;
        }
        nhot = 0;
        for (Py_ssize_t i = 0; i < k; i++)
            if (ty[hot[i]] != terminal_type) hot[nhot++] = hot[i] + 1;
    }
    *prev_out = prev;
    *cur_out = cur;
    *nxt_out = nxt;
    return ended;
}

static PyObject *stitch(PyObject *self, PyObject *args) {
    PyObject *po, *to, *so, *wo;
    int terminal_type;
    if (!PyArg_ParseTuple(args, "OiOOO", &po, &terminal_type, &to, &so, &wo)) return NULL;
    Arr part, types, start, walk;
    Arr *got[4] = {&part, &types, &start, &walk};
    PyObject *objs[4] = {po, to, so, wo};
    const Py_ssize_t sizes[4] = {4, 4, 4, 4};
    const char *names[4] = {"part", "types", "start", "walk"};
    int k = get_arrs(objs, got, sizes, 0, names, 4);
    PyObject *result = NULL;
    int32_t *hot = NULL;
    if (k < 4) goto done;
    if (!(hot = malloc(sizeof(int32_t) * (size_t)(start.n + 1)))) {
        PyErr_NoMemory();
        goto done;
    }
    memcpy(hot, start.view.buf, sizeof(int32_t) * (size_t)start.n);
    int32_t prev = -1, cur = -1, nxt = -1;
    int ended = stitch_core(I32(part), part.n, I32(types), terminal_type, hot, start.n, I32(walk), walk.n, &prev, &cur,
                            &nxt);
    if (!ended) {
        result = Py_None;
        Py_INCREF(result);
    } else {
        result = Py_BuildValue("(iii)", prev, cur, nxt);
    }
done:
    free(hot);
    release_arrs(got, k);
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
    int k = get_arrs(objs, got, sizes, 0x20u, names, 6);
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
    release_arrs(got, k);
    return result;
}

/* What a split trial keeps between calls (see SearchWs): the split's steps (4 x width), the searched
 * (node, state) keys, the queue and the parents of the keys (3 x width). */
typedef struct {
    uint8_t *sn, *visited;
    int32_t *queue, *parent;
    Py_ssize_t width;
} TrialWs;

static void trial_ws_free(TrialWs *ws) {
    free(ws->sn);
    free(ws->visited);
    free(ws->queue);
    free(ws->parent);
    memset(ws, 0, sizeof *ws);
}

static int trial_ws_fit(TrialWs *ws, Py_ssize_t width) {
    if (width <= ws->width) return 0;
    Py_ssize_t cap = ws->width * 2 > width ? ws->width * 2 : width + 16;
    free(ws->sn);
    free(ws->visited);
    free(ws->queue);
    free(ws->parent);
    ws->sn = malloc((size_t)(4 * cap));
    ws->visited = malloc((size_t)(3 * cap));
    ws->queue = malloc(sizeof(int32_t) * (size_t)(3 * cap));
    ws->parent = malloc(sizeof(int32_t) * (size_t)(3 * cap));
    ws->width = cap;
    if (!ws->sn || !ws->visited || !ws->queue || !ws->parent) {
        trial_ws_free(ws);
        return -1;
    }
    return 0;
}

/* Does `a kind b` hold on the graph (nodes 0 .. nodes - 1, u's successors ix[ib[u] .. ie[u]), types ty) if the members `mem` of p with
 * moving[e] set went to a new node q = nodes? The breadth-first search of `shortest` on that graph, built on the
 * fly from the CSR and one pass over p's members (in any order; moving is per event), so a candidate split costs
 * p's events plus one search, not a new graph. 1 if it holds, 0 if not (with `walk`: the length of a walk
 * breaking it written there, INITIAL first, 0 when it does not fit in walk_cap), -1 out of memory. */
static int trial_core(const int32_t *ib, const int32_t *ie, const int32_t *ix, const int32_t *ty, Py_ssize_t nodes,
                      const int32_t *part,
                      Py_ssize_t nev, const uint8_t *hs, const uint8_t *hp, const int32_t *mem, Py_ssize_t nmem,
                      const uint8_t *moving, int32_t p, int kind, int32_t a, int32_t b, int32_t initial,
                      int32_t terminal_type, TrialWs *ws, int32_t *walk, Py_ssize_t walk_cap, Py_ssize_t *walk_len) {
    const Py_ssize_t width = nodes + 1;
    if (trial_ws_fit(ws, width) < 0) return -1;
    uint8_t *sn = ws->sn, *visited = ws->visited;
    int32_t *queue = ws->queue, *parent = ws->parent;
    memset(sn, 0, (size_t)(4 * width));
    memset(visited, 0, (size_t)(3 * width));
    long inner = 0;
    for (Py_ssize_t i = 0; i < nmem; i++) {
        const int32_t e = mem[i];
        const int side = moving[e] != 0;
        if (hs[e] && e + 1 < nev) {
            const int32_t d = part[e + 1];
            if (d == p)
                inner |= 1L << (2 * side + (moving[e + 1] != 0));
            else if (d >= 0 && d < width)
                sn[side * width + d] = 1;
        }
        if (hp[e] && e > 0) {
            const int32_t s = part[e - 1];
            if (s != p && s >= 0 && s < width) sn[(2 + side) * width + s] = 1;
        }
    }
    const int32_t q = (int32_t)nodes, tp = ty[p];
#define TYPE_OF(u) ((u) == q ? tp : ty[u])
    int32_t start = initial * 3 + step(kind, a, b, 0, ty[initial]);
    visited[start] = 1;
    parent[start] = -1;
    Py_ssize_t head = 0, tail = 0;
    queue[tail++] = start;
    int32_t end = -1;
#define VISIT(v)                                                    \
    do {                                                            \
        int32_t k2 = (v) * 3 + step(kind, a, b, state, TYPE_OF(v)); \
        if (!visited[k2]) {                                         \
            visited[k2] = 1;                                        \
            parent[k2] = key;                                       \
            queue[tail++] = k2;                                     \
        }                                                           \
    } while (0)
    while (head < tail) {
        int32_t key = queue[head++], node = key / 3, state = key % 3;
        if (TYPE_OF(node) == terminal_type && (state == 2 || (kind == 0 && state == 1))) {
            end = key;
            break;
        }
        if (node == p || node == q) {
            const int side = node == q;
            for (int32_t e = ib[p]; e < ie[p]; e++) {
                int32_t v = ix[e];
                if (v != p && sn[side * width + v]) VISIT(v);
            }
            if (inner >> (2 * side) & 1) VISIT(p);
            if (inner >> (2 * side + 1) & 1) VISIT(q);
        } else {
            for (int32_t e = ib[node]; e < ie[node]; e++) {
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
    if (end < 0) return 1;
    if (walk) { /* the violating walk, INITIAL first, when it fits */
        Py_ssize_t len = 0;
        for (int32_t key = end; key >= 0; key = parent[key]) len++;
        if (len > walk_cap) {
            len = 0;
        } else {
            Py_ssize_t i = len;
            for (int32_t key = end; key >= 0; key = parent[key]) walk[--i] = key / 3;
        }
        *walk_len = len;
    }
    return 0;
}

/* Is every step of the walk (len > 0 nodes) an edge of the graph, and none of its nodes `avoid`? */
static int walk_ok(const int32_t *ib, const int32_t *ie, const int32_t *ix, Py_ssize_t nidx, Py_ssize_t nodes,
                   const int32_t *w, Py_ssize_t len, int32_t avoid) {
    if (len <= 0) return 0;
    for (Py_ssize_t i = 0; i < len; i++) {
        const int32_t u = w[i];
        if (u < 0 || u >= nodes || u == avoid) return 0;
        if (i + 1 == len) break;
        int has = 0;
        for (int32_t e = ib[u]; e < ie[u]; e++)
            if (e >= 0 && e < nidx && ix[e] == w[i + 1]) {
                has = 1;
                break;
            }
        if (!has) return 0;
    }
    return 1;
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

/* Grow the masks from the queue's nodes: forward A (types some walk of >= 1 step comes from) and R (rows a:
 * reached from INITIAL through no a-node), or backward N (columns b: TERMINAL reached through no b-node, this
 * one included); u == p also steps along q's edges (p and q being merged). With `check`, stop at the first node
 * the growth makes break an invariant: returns 1 then, -1 out of memory, else 0. Inlined: `backward` is a
 * constant at every call. */
static inline int grow_masks(Coarse *c, Py_ssize_t head, Py_ssize_t tail, int32_t p, int32_t q, int check, int backward) {
    while (head < tail) {
        int32_t u = c->queue[head++ % c->queue_cap];
        int32_t tu = c->ty[u];
        uint64_t ca = c->A[u] | BIT(tu), cr = tu == c->initial ? ALL_TYPES : c->R[u], cn = c->N[u];
        for (int side = 0; side < (u == p && q >= 0 ? 2 : 1); side++) {
            Vec *o = backward ? &c->in[side ? q : u] : &c->out[side ? q : u];
            for (int32_t e = 0; e < o->n; e++) {
                int32_t v = find(c, o->v[e]);
                uint64_t keep = ~BIT(c->ty[v]);
                if (backward) {
                    uint64_t nn = c->N[v] | (cn & keep);
                    if (nn == c->N[v]) continue;
                    if (set_mask(c, v, 2, nn) < 0) return -1;
                } else {
                    uint64_t na = c->A[v] | ca, nr = c->R[v] | (cr & keep);
                    if (na == c->A[v] && nr == c->R[v]) continue;
                    if (na != c->A[v] && set_mask(c, v, 0, na) < 0) return -1;
                    if (nr != c->R[v] && set_mask(c, v, 1, nr) < 0) return -1;
                }
                if (check && (backward ? pred_breaks_after(c, v, p, q) : breaks_forward(c, v))) return 1;
                c->queue[tail++ % c->queue_cap] = v;
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
        broken = grow_masks(c, 0, 1, p, q, 1, 0);
    }
    if (!broken) {
        c->queue[0] = p;
        broken = grow_masks(c, 0, 1, p, q, 1, 1);
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
    int k = get_arrs(objs, got, sizes, 0x80u, names, 8);
    PyObject *result = NULL;
    Coarse c;
    memset(&c, 0, sizeof c);
    PairSet failed = {NULL, 0, 0};
    int32_t *anext = NULL, *aprev = NULL, *tnext = NULL, *tprev = NULL, *thead = NULL, *ttail = NULL, *stamp = NULL,
            *moved = NULL;
    uint8_t *gone = NULL, *in_order = NULL;
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
    anext = malloc(sizeof(int32_t) * (size_t)(nodes + 1));
    aprev = malloc(sizeof(int32_t) * (size_t)(nodes + 1));
    tnext = malloc(sizeof(int32_t) * (size_t)(nodes + 1));
    tprev = malloc(sizeof(int32_t) * (size_t)(nodes + 1));
    thead = malloc(sizeof(int32_t) * (size_t)(types + 1));
    ttail = malloc(sizeof(int32_t) * (size_t)(types + 1));
    in_order = calloc((size_t)nodes + 1, 1);
    moved = malloc(sizeof(int32_t) * (size_t)(plist.n + 1));
    stamp = calloc((size_t)nodes + 1, sizeof(int32_t));
    gone = calloc((size_t)nodes + 1, 1);
    if (!c.out || !c.in || !c.group || !c.rep || !c.A || !c.R || !c.N || !c.queue || !failed.k || !anext || !aprev ||
        !tnext || !tprev || !thead || !ttail || !in_order || !moved || !stamp || !gone)
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
    if (grow_masks(&c, 0, tail, -1, -1, 0, 0) < 0) goto nomem;
    tail = 0;
    for (Py_ssize_t u = 0; u < nodes; u++)
        if (ty[u] >= 0) c.queue[tail++] = (int32_t)u;
    c.log_n = 0;
    if (grow_masks(&c, 0, tail, -1, -1, 0, 1) < 0) goto nomem;
    c.log_n = 0;
    /* The scan order as two doubly linked lists over partition ids: all of it (a*) and per type (t*), so a
     * merge's removals and moves to the end cost what they move, not a pass over the order. */
    for (Py_ssize_t t = 0; t < types; t++) thead[t] = ttail[t] = -1;
    int32_t ghead = -1, gtail = -1;
#define APPEND(x)                                                  \
    do {                                                           \
        const int32_t x_ = (x), t_ = ty[x_];                       \
        anext[x_] = -1;                                            \
        aprev[x_] = gtail;                                         \
        if (gtail >= 0) anext[gtail] = x_; else ghead = x_;        \
        gtail = x_;                                                \
        tnext[x_] = -1;                                            \
        tprev[x_] = ttail[t_];                                     \
        if (ttail[t_] >= 0) tnext[ttail[t_]] = x_; else thead[t_] = x_; \
        ttail[t_] = x_;                                            \
    } while (0)
    for (Py_ssize_t i = 0; i < plist.n; i++) {
        const int32_t x = I32(plist)[i];
        if (x < 0 || x >= nodes || ty[x] < 0 || in_order[x]) {
            PyErr_SetString(PyExc_ValueError, "coarsen: bad partition order");
            goto done;
        }
        in_order[x] = 1;
        APPEND(x);
    }
    Py_ssize_t nmerges = 0;
    int32_t resume = ghead;
    long trials = 0;
    int32_t clock = 0;
    int32_t *mout = (int32_t *)merges.view.buf;
    for (;;) {
        int32_t mp = -1, mq = -1, nmoved = 0;
        for (int32_t p = resume; p >= 0 && mp < 0; p = anext[p]) {
            const int32_t tp = ty[p];
            if (tp == initial || tp == terminal) continue;
            for (int32_t q = tnext[p]; q >= 0; q = tnext[q]) {
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
         * and the entries moved to the end were tried with each of them), so the next pass starts there:
         * at the first entry from there on that stays in place, else at the first one moved to the end. */
        resume = mp;
        while (resume >= 0 && gone[resume]) resume = anext[resume];
        for (int32_t r = -1; r < nmoved; r++) { /* out of both orders: mq, then the moved entries */
            const int32_t x = r < 0 ? mq : moved[r], t = ty[x];
            if (r >= 0 && x == mq) continue;
            if (aprev[x] >= 0) anext[aprev[x]] = anext[x]; else ghead = anext[x];
            if (anext[x] >= 0) aprev[anext[x]] = aprev[x]; else gtail = aprev[x];
            if (tprev[x] >= 0) tnext[tprev[x]] = tnext[x]; else thead[t] = tnext[x];
            if (tnext[x] >= 0) tprev[tnext[x]] = tprev[x]; else ttail[t] = tprev[x];
        }
        for (int32_t r = 0; r < nmoved; r++) {
            gone[moved[r]] = 0;
            if (moved[r] == mq) continue;
            APPEND(moved[r]);
            if (resume < 0) resume = moved[r];
        }
        gone[mq] = 0;
    }
#undef APPEND
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
    free(anext);
    free(aprev);
    free(tnext);
    free(tprev);
    free(thead);
    free(ttail);
    free(in_order);
    free(moved);
    free(stamp);
    free(gone);
    release_arrs(got, k);
    return result;
}

/* ---- the replay's rounds, all in C ---------------------------------------------------------------------- */

/* java.util.Random: the 48-bit generator, nextInt(bound) and Collections.shuffle's draws (jvm.JavaRandom). */
static int32_t jr_next31(uint64_t *seed) {
    *seed = (*seed * 0x5DEECE66DULL + 0xBULL) & ((1ULL << 48) - 1);
    return (int32_t)(*seed >> 17);
}

static int32_t jr_int(uint64_t *seed, int32_t bound) {
    const int32_t r = jr_next31(seed), m = bound - 1;
    if ((bound & m) == 0) return (int32_t)(((int64_t)bound * r) >> 31);
    for (int64_t u = r;; u = jr_next31(seed)) {
        const int64_t v = u % bound;
        if (u - v + m < ((int64_t)1 << 31)) return (int32_t)v;
    }
}

/* A piece of the round's pool of event lists (offsets: the pool moves when it grows). */
typedef struct {
    int32_t off, len;
} Seg;

typedef struct {
    int32_t inv, off, len;
} Cex;

typedef struct {
    int32_t p;
    Seg ev;
} Cand;

typedef struct {
    int32_t p, first, n; /* the partition's sets: sets[first .. first + n) */
} Todo;

#define WITNESSES 8

typedef struct {
    int32_t *w[WITNESSES];
    int32_t len[WITNESSES];
    int n;
} Known;

typedef struct {
    /* the log */
    int32_t *part;
    const int32_t *types;
    const uint8_t *hs, *hp;
    Py_ssize_t nev;
    int32_t initial, terminal;
    /* partitions: events in Synoptic's order, types, touched (tst == tclock: list to make again) */
    Vec *ord;
    int32_t *pty, *tst, *chg, *dstamp, *beg, *end;
    int32_t nparts, cap, tclock, dclock, build;
    Py_ssize_t live; /* successor entries in use in `lists`; the rest are lists made again since */
    Vec lists, touched;
    uint8_t *mark, *moving;
    int32_t *hot, *walkbuf;
    Py_ssize_t walkcap;
    Vec pool, walks, sets;
    TrialWs tws;
} Rounds;

static int rounds_fit(Rounds *r, int32_t need) {
    if (need <= r->cap) return 0;
    int32_t cap = r->cap * 2 > need ? r->cap * 2 : need + 16;
    Vec *o = realloc(r->ord, sizeof(Vec) * (size_t)cap);
    if (o) r->ord = o;
    int32_t **arrs[6] = {&r->pty, &r->tst, &r->chg, &r->dstamp, &r->beg, &r->end};
    int ok = o != NULL;
    for (int i = 0; i < 6; i++) {
        int32_t *a = realloc(*arrs[i], sizeof(int32_t) * (size_t)(cap + 1));
        if (a)
            *arrs[i] = a;
        else
            ok = 0;
    }
    if (!ok) return -1;
    for (int32_t u = r->cap; u < cap; u++) {
        r->ord[u] = (Vec){NULL, 0, 0};
        r->dstamp[u] = 0;
        r->chg[u] = 0;
        r->tst[u] = 0;
        r->beg[u] = r->end[u] = 0;
    }
    r->cap = cap;
    return 0;
}

/* Room for `more` ints at the end of v. */
static int vec_room(Vec *v, Py_ssize_t more) {
    if (v->n + more <= v->cap) return 0;
    Py_ssize_t cap = 2 * (Py_ssize_t)v->cap > v->n + more ? 2 * (Py_ssize_t)v->cap : v->n + more + 16;
    if (cap > INT32_MAX) return -1;
    int32_t *a = realloc(v->v, sizeof(int32_t) * (size_t)cap);
    if (!a) return -1;
    v->v = a;
    v->cap = (int32_t)cap;
    return 0;
}

/* Partition u's successor list can have changed: made again at the next rounds_successors. */
static int touch(Rounds *r, int32_t u) {
    if (r->tst[u] == r->tclock) return 0;
    r->tst[u] = r->tclock;
    return vec_push(&r->touched, u);
}

/* Every partition's successors in the order its events first step into them (u's: lists[beg[u] .. end[u])),
 * made again for the touched partitions (the new ones among them) and appended to `lists`, which is packed
 * again when it holds more than twice what is in use. chg[u] = build for the lists that differ from the last
 * build's (the new ones included). 0, or -1 out of memory. */
static int rounds_successors(Rounds *r, int32_t old_parts) {
    r->build++;
    for (int32_t t = 0; t < r->touched.n; t++) {
        const int32_t u = r->touched.v[t];
        if (r->dclock == INT32_MAX) { /* tokens wrap: every stamp stale again */
            for (int32_t v = 0; v < r->cap; v++) r->dstamp[v] = 0;
            r->dclock = 0;
        }
        const int32_t token = ++r->dclock;
        const Vec *o = &r->ord[u];
        if (vec_room(&r->lists, o->n) < 0) return -1;
        int32_t *out = r->lists.v;
        const int32_t start = r->lists.n;
        int32_t len = 0;
        for (int32_t i = 0; i < o->n; i++) {
            const int32_t e = o->v[i];
            if (!r->hs[e] || e + 1 >= r->nev) continue;
            const int32_t d = r->part[e + 1];
            if (r->dstamp[d] == token) continue;
            r->dstamp[d] = token;
            out[start + len++] = d;
        }
        const int32_t old_len = r->end[u] - r->beg[u];
        if (u >= old_parts || len != old_len || memcmp(out + start, out + r->beg[u], sizeof(int32_t) * (size_t)len))
            r->chg[u] = r->build;
        r->lists.n = start + len;
        r->beg[u] = start;
        r->end[u] = start + len;
        r->live += len - (u >= old_parts ? 0 : old_len);
    }
    r->touched.n = 0;
    r->tclock++;
    if (r->lists.n > 2 * r->live + 4096) {
        Vec packed = {NULL, 0, 0};
        if (vec_room(&packed, r->live) < 0) return -1;
        for (int32_t u = 0; u < r->nparts; u++) {
            const int32_t len = r->end[u] - r->beg[u];
            memcpy(packed.v + packed.n, r->lists.v + r->beg[u], sizeof(int32_t) * (size_t)len);
            r->beg[u] = packed.n;
            packed.n += len;
            r->end[u] = packed.n;
        }
        free(r->lists.v);
        r->lists = packed;
    }
    return 0;
}

/* checker.synoptic_counterexample's cut after the violation (NFby: the first b after the first a; AP: the first
 * b): the walk's new length, -1 if it has none. */
static Py_ssize_t cut_walk(int kind, int32_t a, int32_t b, const int32_t *walk, Py_ssize_t len, const int32_t *pty) {
    if (kind == 0) return len;
    int seen_a = 0;
    for (Py_ssize_t at = 0; at < len; at++) {
        const int32_t typ = pty[walk[at]];
        if (kind == 1 && typ == a && !seen_a)
            seen_a = 1;
        else if (typ == b && (kind == 1 ? seen_a : 1))
            return at + 1;
        else if (kind == 2 && typ == a)
            break;
    }
    return -1;
}

/* _Ordered.split_off: `ev` (a segment of the pool, in its order) becomes partition nparts. */
static int rounds_split(Rounds *r, int32_t p, Seg s) {
    if (rounds_fit(r, r->nparts + 1) < 0) return -1;
    const int32_t q = r->nparts++;
    r->pty[q] = r->pty[p];
    Vec *nq = &r->ord[q];
    nq->n = 0;
    if (vec_room(nq, s.len) < 0) return -1;
    const int32_t *ev = r->pool.v + s.off;
    for (int32_t i = 0; i < s.len; i++) {
        r->mark[ev[i]] = 1;
        r->part[ev[i]] = q;
        nq->v[nq->n++] = ev[i];
    }
    Vec *op = &r->ord[p];
    int32_t w = 0;
    for (int32_t i = 0; i < op->n; i++)
        if (!r->mark[op->v[i]]) op->v[w++] = op->v[i];
    op->n = w;
    if (touch(r, p) < 0 || touch(r, q) < 0) return -1;
    for (int32_t i = 0; i < s.len; i++) {
        r->mark[ev[i]] = 0;
        if (r->hp[ev[i]] && touch(r, r->part[ev[i] - 1]) < 0) return -1;
    }
    return 0;
}

/* A copy of the events of ord[p] that are (want = 1) or are not (want = 0) marked, into the pool. */
static int pool_take(Rounds *r, int32_t p, int want, Seg *out) {
    const Vec *o = &r->ord[p];
    if (vec_room(&r->pool, o->n) < 0) return -1;
    out->off = r->pool.n;
    for (int32_t i = 0; i < o->n; i++)
        if (r->mark[o->v[i]] == want) r->pool.v[r->pool.n++] = o->v[i];
    out->len = r->pool.n - out->off;
    return 0;
}

static void mark_seg(Rounds *r, Seg s, uint8_t value) {
    for (int32_t i = 0; i < s.len; i++) r->mark[r->pool.v[s.off + i]] = value;
}

/* _incorporate: every set of t cut by `events` then by `rest`, in that order; t's sets replaced. */
static int rounds_incorporate(Rounds *r, Todo *t, Seg split[2]) {
    const int32_t first = r->sets.n / 2;
    int32_t made = 0;
    for (int32_t i = 0; i < t->n; i++) {
        for (int j = 0; j < 2; j++) {
            Seg s = {r->sets.v[2 * (t->first + i)], r->sets.v[2 * (t->first + i) + 1]};
            if (vec_room(&r->pool, s.len) < 0 || vec_room(&r->sets, 2) < 0) return -1;
            mark_seg(r, split[j], 1);
            Seg piece = {r->pool.n, 0};
            for (int32_t k = 0; k < s.len; k++) {
                const int32_t e = r->pool.v[s.off + k];
                if (r->mark[e]) r->pool.v[r->pool.n++] = e;
            }
            piece.len = r->pool.n - piece.off;
            mark_seg(r, split[j], 0);
            if (piece.len) {
                r->sets.v[r->sets.n++] = piece.off;
                r->sets.v[r->sets.n++] = piece.len;
                made++;
            }
        }
    }
    t->first = first;
    t->n = made;
    return 0;
}

/* replay_rounds(part, types, has_succ, has_pred, ptype, invariants, initial, terminal_type, rng, budget, limit,
 *               stats, out_ptype) -> (status, partitions)
 * replay.PyReplay.refine (see there) in one call: part (int32, writable) ends as the refined partition of every
 * event, out_ptype (int32, room for every partition there can be: events + partitions) their types; ptype the
 * starting partitions' types (partition p holds the events of part == p); invariants (int32, 3 per row: kind,
 * a, b) in Synoptic's order; rng (int64[1]) the java.util.Random state, left as the draws leave it; stats (int64,
 * writable) rounds, arbitrary, trials, witnessed, work, counted on from their values. status 0 done, 1 over
 * the budget (budget < 0: none), 2 violated invariants without a candidate split, 3 no convergence within
 * `limit` rounds, 4 a counterexample taken by a trace (the last three cannot happen). */
static PyObject *replay_rounds(PyObject *self, PyObject *args) {
    PyObject *objs[10];
    int initial, terminal;
    long long budget, limit;
    if (!PyArg_ParseTuple(args, "OOOOOOiiOLLOO", &objs[0], &objs[1], &objs[2], &objs[3], &objs[4], &objs[5], &initial,
                          &terminal, &objs[6], &budget, &limit, &objs[7], &objs[8]))
        return NULL;
    Arr part, types, succ, pred, ptype0, invs, rng, stats, outp;
    Arr *got[9] = {&part, &types, &succ, &pred, &ptype0, &invs, &rng, &stats, &outp};
    const Py_ssize_t sizes[9] = {4, 4, 1, 1, 4, 4, 8, 8, 4};
    const char *names[9] = {"part", "types", "has_succ", "has_pred", "ptype", "invariants", "rng", "stats", "out_ptype"};
    int k = get_arrs(objs, got, sizes, 0x1c1u, names, 9); /* part, rng, stats, out_ptype */
    PyObject *result = NULL;
    Rounds r;
    memset(&r, 0, sizeof r);
    int32_t *unsat = NULL;
    Cex *cex = NULL;
    Known *known = NULL;
    Todo *todo = NULL;
    SearchWs *ctx = NULL;
    const Py_ssize_t ninv = invs.n / 3;
    if (k < 9) goto done;
    const Py_ssize_t nev = part.n;
    if (types.n != nev || succ.n != nev || pred.n != nev || invs.n % 3 || rng.n != 1 || stats.n != 5 ||
        outp.n < nev + ptype0.n || initial < 0 || initial >= ptype0.n || nev >= INT32_MAX / 2) {
        PyErr_SetString(PyExc_ValueError, "replay_rounds: bad arguments");
        goto done;
    }
    r.part = (int32_t *)part.view.buf;
    r.types = I32(types);
    r.hs = (const uint8_t *)succ.view.buf;
    r.hp = (const uint8_t *)pred.view.buf;
    r.nev = nev;
    r.initial = initial;
    r.terminal = terminal;
    r.tclock = 1;
    r.walkcap = 0;
    const int32_t *iv = I32(invs);
    for (Py_ssize_t i = 0; i < nev; i++)
        if (r.part[i] < 0 || r.part[i] >= ptype0.n) {
            PyErr_SetString(PyExc_ValueError, "replay_rounds: partition out of range");
            goto done;
        }
    for (Py_ssize_t i = 0; i < ninv; i++)
        if (iv[3 * i] < 0 || iv[3 * i] > 2) {
            PyErr_SetString(PyExc_ValueError, "replay_rounds: bad invariant kind");
            goto done;
        }
    r.mark = calloc((size_t)nev + 1, 1);
    r.moving = calloc((size_t)nev + 1, 1);
    r.hot = malloc(sizeof(int32_t) * ((size_t)nev + 1));
    unsat = malloc(sizeof(int32_t) * ((size_t)ninv + 1));
    cex = malloc(sizeof(Cex) * ((size_t)ninv + 1));
    todo = malloc(sizeof(Todo) * ((size_t)ninv + 1));
    known = calloc((size_t)ninv + 1, sizeof(Known));
    ctx = calloc((size_t)ninv + 1, sizeof(SearchWs));
    if (!ctx || !r.mark || !r.moving || !r.hot || !unsat || !cex || !todo || !known ||
        rounds_fit(&r, (int32_t)ptype0.n) < 0)
        goto nomem;
    r.nparts = (int32_t)ptype0.n;
    memcpy(r.pty, ptype0.view.buf, sizeof(int32_t) * (size_t)ptype0.n);
    for (Py_ssize_t e = 0; e < nev; e++) /* log order to start with */
        if (vec_push(&r.ord[r.part[e]], (int32_t)e) < 0) goto nomem;
    for (int32_t u = 0; u < r.nparts; u++)
        if (touch(&r, u) < 0) goto nomem;
    for (Py_ssize_t i = 0; i < ninv; i++) unsat[i] = (int32_t)i;
    Py_ssize_t nunsat = ninv;
    uint64_t seed = (uint64_t)*(int64_t *)rng.view.buf;
    int64_t *st = (int64_t *)stats.view.buf; /* rounds, arbitrary, trials, witnessed, work */
    int status = 0;
    int32_t old_parts = 0;
    for (;;) {
        if (rounds_successors(&r, old_parts) < 0) goto nomem;
        old_parts = r.nparts;
        const int32_t *ib = r.beg, *ie = r.end, *ix = r.lists.v, nodes = r.nparts;
        const Py_ssize_t nidx = r.lists.n;
        /* the counterexamples of the invariants still violated */
        Py_ssize_t ncex = 0;
        r.walks.n = 0;
        for (Py_ssize_t i = 0; i < nunsat; i++) {
            const int32_t *in = iv + 3 * unsat[i];
            HL found;
            SearchWs *ws = &ctx[unsat[i]];
            int got_one = synoptic_search_core(ib, ie, ix, r.pty, nodes, in[0], in[1], in[2], initial, terminal, ws,
                                               &found, r.chg, r.build);
            if (got_one < 0) goto nomem;
            if (!got_one) { /* it holds from now on: never searched again */
                search_ws_free(ws);
                continue;
            }
            if (vec_room(&r.walks, found.len) < 0) goto nomem;
            int32_t *w = r.walks.v + r.walks.n;
            Py_ssize_t len = cut_walk(in[0], in[1], in[2], w, history_walk(&ws->ar, found, w), r.pty);
            if (len < 0) {
                PyErr_SetString(PyExc_AssertionError, "replay_rounds: walk without a violation");
                goto done;
            }
            cex[ncex++] = (Cex){unsat[i], r.walks.n, (int32_t)len};
            r.walks.n += (int32_t)len;
        }
        if (!ncex) break;
        for (Py_ssize_t i = 1; i < ncex; i++) { /* sorted by length, stable */
            Cex c = cex[i];
            Py_ssize_t j = i;
            for (; j > 0 && cex[j - 1].len > c.len; j--) cex[j] = cex[j - 1];
            cex[j] = c;
        }
        nunsat = ncex;
        for (Py_ssize_t i = 0; i < ncex; i++) unsat[i] = cex[i].inv;
        for (Py_ssize_t i = ncex; i > 1; i--) { /* Collections.shuffle */
            const int32_t j = jr_int(&seed, (int32_t)i);
            Cex t = cex[i - 1];
            cex[i - 1] = cex[j];
            cex[j] = t;
        }
        const int64_t trials_before = st[2];
        r.pool.n = 0;
        r.sets.n = 0;
        Py_ssize_t ntodo = 0;
        Cand arb = {-1, {0, 0}};
        for (Py_ssize_t c = 0; c < ncex; c++) {
            const int32_t *walk = r.walks.v + cex[c].off;
            const int32_t *in = iv + 3 * cex[c].inv;
            /* the stitch, from the events of the walk's first partition */
            const Vec *start = &r.ord[walk[0]];
            memcpy(r.hot, start->v, sizeof(int32_t) * (size_t)start->n);
            int32_t prev, cur, nxt;
            if (!stitch_core(r.part, nev, r.types, terminal, r.hot, start->n, walk, cex[c].len, &prev, &cur, &nxt)) {
                status = 4;
                goto finish;
            }
            /* the candidate splits there: outgoing (into nxt), incoming (from prev), in cur's order */
            Cand cands[2];
            int ncand = 0;
            const Vec *o = &r.ord[cur];
            for (int side = 0; side < 2; side++) {
                if (side == 1 && prev < 0) break;
                if (vec_room(&r.pool, o->n) < 0) goto nomem;
                Seg s = {r.pool.n, 0};
                for (int32_t i = 0; i < o->n; i++) {
                    const int32_t e = o->v[i];
                    const int hit = side == 0 ? r.hs[e] && e + 1 < nev && r.part[e + 1] == nxt
                                              : r.hp[e] && e > 0 && r.part[e - 1] == prev;
                    if (hit) r.pool.v[r.pool.n++] = e;
                }
                s.len = r.pool.n - s.off;
                if (s.len > 0 && s.len < o->n)
                    cands[ncand++] = (Cand){cur, s};
                else
                    r.pool.n = s.off;
            }
            if (ncand == 2 && jr_int(&seed, 2) == 0) {
                Cand t = cands[0];
                cands[0] = cands[1];
                cands[1] = t;
            }
            if (arb.p < 0 && ncand) arb = cands[0];
            for (int ci = 0; ci < ncand; ci++) {
                const int32_t p = cands[ci].p;
                const Seg ev = cands[ci].ev;
                /* reorder_first: the candidate's events first, the rest after, each in p's order */
                mark_seg(&r, ev, 1);
                Seg in_p, rest;
                if (pool_take(&r, p, 1, &in_p) < 0 || pool_take(&r, p, 0, &rest) < 0) goto nomem;
                Vec *op = &r.ord[p];
                memcpy(op->v, r.pool.v + in_p.off, sizeof(int32_t) * (size_t)in_p.len);
                memcpy(op->v + in_p.len, r.pool.v + rest.off, sizeof(int32_t) * (size_t)rest.len);
                r.pool.n = rest.off + rest.len;
                if (touch(&r, p) < 0) goto nomem;
                st[2]++;
                /* would the invariant hold with p split so? a known breaking walk clear of p says no at once */
                Known *kn = &known[cex[c].inv];
                int holds = -2;
                for (int wi = 0; wi < kn->n; wi++)
                    if (walk_ok(ib, ie, ix, nidx, nodes, kn->w[wi], kn->len[wi], p)) {
                        st[3]++;
                        holds = 0;
                        break;
                    }
                if (holds == -2) {
                    for (int32_t i = 0; i < rest.len; i++) r.moving[r.pool.v[rest.off + i]] = 1;
                    if (r.walkcap < 3 * ((Py_ssize_t)nodes + 1)) {
                        free(r.walkbuf);
                        r.walkcap = 6 * ((Py_ssize_t)nodes + 1);
                        r.walkbuf = malloc(sizeof(int32_t) * (size_t)r.walkcap);
                        if (!r.walkbuf) goto nomem;
                    }
                    Py_ssize_t wlen = 0;
                    holds = trial_core(ib, ie, ix, r.pty, nodes, r.part, nev, r.hs, r.hp, op->v, op->n, r.moving, p, in[0],
                                       in[1], in[2], initial, terminal, &r.tws, r.walkbuf, 3 * ((Py_ssize_t)nodes + 1),
                                       &wlen);
                    for (int32_t i = 0; i < rest.len; i++) r.moving[r.pool.v[rest.off + i]] = 0;
                    if (holds < 0) goto nomem;
                    if (!holds && wlen && walk_ok(ib, ie, ix, nidx, nodes, r.walkbuf, wlen, p)) {
                        int32_t *keep = malloc(sizeof(int32_t) * (size_t)wlen);
                        if (!keep) goto nomem;
                        memcpy(keep, r.walkbuf, sizeof(int32_t) * (size_t)wlen);
                        if (kn->n == WITNESSES) free(kn->w[--kn->n]);
                        memmove(kn->w + 1, kn->w, sizeof(int32_t *) * (size_t)kn->n);
                        memmove(kn->len + 1, kn->len, sizeof(int32_t) * (size_t)kn->n);
                        kn->w[0] = keep;
                        kn->len[0] = (int32_t)wlen;
                        kn->n++;
                    }
                }
                mark_seg(&r, ev, 0);
                if (holds) {
                    Seg split[2] = {ev, rest};
                    Py_ssize_t t = 0;
                    while (t < ntodo && todo[t].p != p) t++;
                    if (t < ntodo) {
                        if (rounds_incorporate(&r, &todo[t], split) < 0) goto nomem;
                    } else {
                        if (vec_room(&r.sets, 4) < 0) goto nomem;
                        todo[ntodo++] = (Todo){p, r.sets.n / 2, 2};
                        for (int j = 0; j < 2; j++) {
                            r.sets.v[r.sets.n++] = split[j].off;
                            r.sets.v[r.sets.n++] = split[j].len;
                        }
                    }
                    break;
                }
            }
        }
        st[0]++;
        st[4] += (int64_t)nev + (int64_t)nodes * ((int64_t)ncex + st[2] - trials_before);
        if (budget >= 0 && st[4] > budget) {
            status = 1;
            goto finish;
        }
        if (ntodo) {
            for (Py_ssize_t t = 0; t < ntodo; t++)
                for (int32_t i = 1; i < todo[t].n; i++) {
                    Seg s = {r.sets.v[2 * (todo[t].first + i)], r.sets.v[2 * (todo[t].first + i) + 1]};
                    if (rounds_split(&r, todo[t].p, s) < 0) goto nomem;
                }
        } else if (arb.p >= 0) {
            st[1]++;
            if (rounds_split(&r, arb.p, arb.ev) < 0) goto nomem;
        } else {
            status = 2;
            goto finish;
        }
        if (st[0] > limit) {
            status = 3;
            goto finish;
        }
    }
finish:
    *(int64_t *)rng.view.buf = (int64_t)seed;
    memcpy(outp.view.buf, r.pty, sizeof(int32_t) * (size_t)r.nparts);
    result = Py_BuildValue("(ii)", status, r.nparts);
    goto done;
nomem:
    PyErr_NoMemory();
done:
    if (known)
        for (Py_ssize_t i = 0; i < ninv; i++)
            for (int j = 0; j < known[i].n; j++) free(known[i].w[j]);
    free(known);
    if (ctx)
        for (Py_ssize_t i = 0; i < ninv; i++) search_ws_free(&ctx[i]);
    free(ctx);
    if (r.ord)
        for (int32_t u = 0; u < r.cap; u++) free(r.ord[u].v);
    free(r.ord);
    free(r.pty);
    free(r.tst);
    free(r.chg);
    free(r.dstamp);
    free(r.beg);
    free(r.end);
    free(r.lists.v);
    free(r.touched.v);
    free(r.mark);
    free(r.moving);
    free(r.hot);
    free(r.walkbuf);
    free(r.pool.v);
    free(r.walks.v);
    free(r.sets.v);
    trial_ws_free(&r.tws);
    free(unsat);
    free(cex);
    free(todo);
    release_arrs(got, k);
    return result;
}

static PyMethodDef methods[] = {
    {"violations", violations, METH_VARARGS, "Write the failing mined invariants into the out matrices."},
    {"shortest", shortest, METH_VARARGS, "Shortest counterexample walk, or None."},
    {"synoptic_walk", synoptic_walk, METH_VARARGS, "Synoptic's counterexample walk before its cut, or None."},
    {"stitch", stitch, METH_VARARGS, "(prev, cur, nxt) where the events taking a walk stop, or None."},
    {"split_steps", split_steps, METH_VARARGS, "The steps touching a partition if it were split (see above)."},
    {"replay_rounds", replay_rounds, METH_VARARGS, "The replay's refinement rounds, all of them (see above)."},
    {"coarsen", coarsen, METH_VARARGS, "Synoptic's coarsening with its merge order, incrementally checked."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "fastcheck", NULL, -1, methods};

/* The module's ABI number, checked at import by quicsm/inference/checker.py against FASTCHECK_ABI there:
   bump BOTH when a function's signature or return shape changes (a new argument, another element in a
   returned tuple, a status code added), so a stale build left by a pull without a rebuild is set aside for
   the pure-Python twins with a warning instead of failing. */
#define FASTCHECK_ABI 1

PyMODINIT_FUNC PyInit_fastcheck(void) {
    PyObject *m = PyModule_Create(&module);
    if (m && PyModule_AddIntConstant(m, "ABI", FASTCHECK_ABI) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
