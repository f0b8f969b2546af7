/* Tag finder for the log scanner: the one loop that touches every byte of a log.
 *
 * scan(buffer, start, end, tag, lineno, parse=False) -> (hits, lineno_at_end)
 *   hits: list of (line_number, payload_bytes) for every line holding `tag`, payload = text after the tag
 *   up to (not including) the newline. Line numbers count from `lineno` at offset 0.
 * The pure-Python scanner does the same with bytes.find/count; this only removes the per-hit overhead.
 */
#define PY_SSIZE_T_CLEAN
#define _GNU_SOURCE
#include <Python.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* Newlines in [p, q). With SSE2 (every x86-64): 16 byte compares at once, summed in byte lanes for up to
 * 255 blocks; elsewhere a branch-free loop the compiler vectorises (-O3). Several GB/s either way. */
static Py_ssize_t count_nl(const char *p, const char *q) {
    Py_ssize_t n = 0;
#ifdef __SSE2__
    const __m128i nl = _mm_set1_epi8('\n'), zero = _mm_setzero_si128();
    while (q - p >= 16) {
        Py_ssize_t blocks = (q - p) / 16;
        if (blocks > 255) blocks = 255;
        __m128i acc = zero;
        for (Py_ssize_t i = 0; i < blocks; i++, p += 16)
            acc = _mm_sub_epi8(acc, _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)p), nl));
        __m128i sums = _mm_sad_epu8(acc, zero);
        n += _mm_cvtsi128_si32(sums) + _mm_extract_epi16(sums, 4);
    }
#endif
    while (p < q) {
        size_t len = (size_t)(q - p), block = len < 4096 ? len : 4096;
        unsigned int c = 0;
        for (size_t i = 0; i < block; i++) c += (p[i] == '\n');
        n += c;
        p += block;
    }
    return n;
}

/* The next occurrence of the tag: memchr (vectorised in libc) for its first byte, then a compare. Log noise
 * rarely holds the tag's first byte ('Q'), so this runs at memory speed, well ahead of memmem. */
static const char *find_tag(const char *p, const char *stop, const char *t, size_t tl) {
    if (tl == 0) return p;
    while ((size_t)(stop - p) >= tl) {
        const char *q = memchr(p, t[0], (size_t)(stop - p) - tl + 1);
        if (!q) return NULL;
        if (memcmp(q + 1, t + 1, tl - 1) == 0) return q;
        p = q + 1;
    }
    return NULL;
}

/* [start, end) inside a buffer of len bytes (end < 0: to the end). */
static void clamp_window(Py_ssize_t len, Py_ssize_t *start, Py_ssize_t *end) {
    if (*end < 0 || *end > len) *end = len;
    if (*start < 0) *start = 0;
    if (*start > *end) *start = *end;
}

/* The next tagged line from pos: where the tag and the line's end are, with lineno advanced to it. */
static int next_line(const char *pos, const char *stop, const char *t, size_t tl, const char **hit, const char **eol,
                     Py_ssize_t *lineno, const char **line_at) {
    *hit = find_tag(pos, stop, t, tl);
    if (!*hit) return 0;
    *eol = memchr(*hit, '\n', (size_t)(stop - *hit));
    if (!*eol) *eol = stop;
    *lineno += count_nl(*line_at, *hit);
    *line_at = *hit;
    return 1;
}

/* Field separators are the ASCII space, tab, CR, VT and FF, and nothing else (contract.py's docstring
 * states the rules every reader follows); '-' means "not known". */
/* The canonical field order (what format_line and the shipped patch sets write) is parsed here:
 *   v=1 conn=K t_us=T cc=C [from=S] to=S [cwnd=N] [inflight=N] [ssthresh=N] [pacing_bps=N] [bw_bps=N]
 *   [min_rtt_us=N] [srtt_us=N] [trigger=W] <spaces>
 * into (line, conn, cc, t_us, from|None, to, cwnd..srtt_us (7 ints|None), trigger|None). Anything else
 * (other order, '-' numbers, inf, extra keys, ev=) is handed back as (line, payload) for the Python reader,
 * which also owns every error message. Same results as contract._FAST, checked by the tests. */
static const char *INT_KEYS[7] = {"cwnd=", "inflight=", "ssthresh=", "pacing_bps=", "bw_bps=", "min_rtt_us=", "srtt_us="};

static int lit(const char **p, const char *e, const char *s) {
    size_t n = strlen(s);
    if ((size_t)(e - *p) < n || memcmp(*p, s, n) != 0) return 0;
    *p += n;
    return 1;
}

static const char *token_end(const char *p, const char *e) {
    while (p < e && *p != ' ' && *p != '\t' && *p != '\r' && *p != '\v' && *p != '\f') p++;
    return p;
}

static PyObject *str_of(const char *a, const char *b) { return PyUnicode_DecodeUTF8(a, b - a, "strict"); }

/* One canonical line's fields: spans into the buffer (NULL = absent or '-') and numbers (has = present). */
typedef struct {
    const char *conn_a, *conn_b, *cc_a, *cc_b, *from_a, *from_b, *to_a, *to_b, *trig_a, *trig_b;
    long long t_us, m[7];
    int has_m[7];
} Fields;

/* 1 if [p, e) is a line in the canonical order (see above), with its fields in *f; 0 otherwise. */
static int parse_canonical(const char *p, const char *e, Fields *f) {
    const char *a, *b;
    int i;
    memset(f, 0, sizeof *f);
    if (!lit(&p, e, "v=1 conn=")) return 0;
    a = p; b = token_end(p, e); if (b == a || (b - a == 1 && *a == '-')) return 0; p = b;
    f->conn_a = a; f->conn_b = b;                          /* conn ('-' = not known: the Python reader refuses it) */
    if (!lit(&p, e, " t_us=")) return 0;
    {
        long long v = 0; int neg = 0, nd = 0;
        if (p < e && *p == '-') { neg = 1; p++; }
        while (p < e && *p >= '0' && *p <= '9' && nd < 18) { v = v * 10 + (*p - '0'); p++; nd++; }
        if (nd == 0 || (p < e && *p >= '0' && *p <= '9')) return 0;
        f->t_us = neg ? -v : v;
    }
    if (!lit(&p, e, " cc=")) return 0;
    a = p; while (p < e && ((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9'))) p++;
    if (p == a) return 0;
    f->cc_a = a; f->cc_b = p;
    if (lit(&p, e, " from=")) {
        a = p; b = token_end(p, e); if (b == a) return 0; p = b;
        if (!(b - a == 1 && *a == '-')) { f->from_a = a; f->from_b = b; }
    }
    if (!lit(&p, e, " to=")) return 0;
    a = p; b = token_end(p, e); if (b == a || (b - a == 1 && *a == '-')) return 0; p = b;
    f->to_a = a; f->to_b = b;                              /* to ('-' on a transition: the Python reader refuses it) */
    for (i = 0; i < 7; i++) {
        const char *save = p;
        if (p < e && *p == ' ' && (p++, lit(&p, e, INT_KEYS[i]))) {
            long long v = 0; int nd = 0;
            while (p < e && *p >= '0' && *p <= '9' && nd < 18) { v = v * 10 + (*p - '0'); p++; nd++; }
            if (nd == 0 || (p < e && *p != ' ' && *p != '\t' && *p != '\r' && *p != '\v' && *p != '\f')) return 0;
            f->m[i] = v; f->has_m[i] = 1;
        } else p = save;
    }
    {
        const char *save = p;
        if (p < e && *p == ' ' && (p++, lit(&p, e, "trigger="))) {
            a = p;
            while (p < e && (((*p | 32) >= 'a' && (*p | 32) <= 'z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == '.' || *p == '-')) p++;
            if (p == a) return 0;
            if (!(p - a == 1 && *a == '-')) { f->trig_a = a; f->trig_b = p; }  /* '-' = not known */
        } else p = save;
    }
    while (p < e && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\v' || *p == '\f')) p++;
    return p == e;
}

static PyObject *opt_str(const char *a, const char *b) {
    if (!a) { Py_INCREF(Py_None); return Py_None; }
    return str_of(a, b);
}

static PyObject *fast_record(Py_ssize_t line, const char *p, const char *e) {
    Fields f;
    PyObject *o[13] = {0};
    PyObject *res = NULL;
    int i;
    if (!parse_canonical(p, e, &f)) return NULL;
    o[0] = str_of(f.conn_a, f.conn_b);
    o[1] = str_of(f.cc_a, f.cc_b);
    o[2] = PyLong_FromLongLong(f.t_us);
    o[3] = opt_str(f.from_a, f.from_b);
    o[4] = str_of(f.to_a, f.to_b);
    for (i = 0; i < 7; i++) {
        if (f.has_m[i]) o[5 + i] = PyLong_FromLongLong(f.m[i]);
        else { Py_INCREF(Py_None); o[5 + i] = Py_None; }
    }
    o[12] = opt_str(f.trig_a, f.trig_b);
    for (i = 0; i < 13; i++) if (!o[i]) goto out;
    res = Py_BuildValue("(nOOOOOOOOOOOOO)", line, o[0], o[1], o[2], o[3], o[4], o[5], o[6], o[7], o[8], o[9], o[10], o[11], o[12]);
out:
    for (i = 0; i < 13; i++) Py_XDECREF(o[i]);
    if (!res) PyErr_Clear();
    return res;
}

static PyObject *scan(PyObject *self, PyObject *args) {
    Py_buffer buf, tag;
    Py_ssize_t start, end, lineno;
    int parse_fields = 0;
    if (!PyArg_ParseTuple(args, "y*nny*n|p", &buf, &start, &end, &tag, &lineno, &parse_fields)) return NULL;
    clamp_window(buf.len, &start, &end);
    const char *base = (const char *)buf.buf, *stop = base + end, *pos = base + start, *line_at = pos;
    const char *t = (const char *)tag.buf;
    size_t tl = (size_t)tag.len;
    PyObject *hits = PyList_New(0);
    if (!hits) goto fail;
    while (pos < stop) {
        const char *hit, *eol;
        if (!next_line(pos, stop, t, tl, &hit, &eol, &lineno, &line_at)) break;
        PyObject *item = parse_fields ? fast_record(lineno, hit + tl, eol) : NULL;
        if (!item) item = Py_BuildValue("(ny#)", lineno, hit + tl, (Py_ssize_t)(eol - hit - (Py_ssize_t)tl));
        if (!item || PyList_Append(hits, item) < 0) { Py_XDECREF(item); goto fail; }
        Py_DECREF(item);
        pos = eol;
    }
    lineno += count_nl(line_at, stop);
    PyBuffer_Release(&buf);
    PyBuffer_Release(&tag);
    PyObject *res = Py_BuildValue("(Nn)", hits, lineno);
    return res;
fail:
    Py_XDECREF(hits);
    PyBuffer_Release(&buf);
    PyBuffer_Release(&tag);
    return NULL;
}

/* ---- Columnar scan: canonical lines straight into int columns, strings interned once per file ---- */

typedef struct { char *data; size_t len, cap; } Col;

static int col_put(Col *c, const void *v, size_t n) {
    if (c->len + n > c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 1 << 12;
        while (cap < c->len + n) cap *= 2;
        char *d = PyMem_Realloc(c->data, cap);
        if (!d) { PyErr_NoMemory(); return -1; }
        c->data = d; c->cap = cap;
    }
    memcpy(c->data + c->len, v, n);
    c->len += n;
    return 0;
}

/* Id of the string [a, b) in (table: bytes -> int, names: list of str), added when new; -1 for a NULL
 * span; -2 (no exception set) when the bytes are not UTF-8, which sends the line to the Python reader.
 * Ids found in the dict are kept for this call in an open-addressing table of spans into the buffer, so
 * a repeated string (connection keys interleave: a last-value memo misses) costs a hash and a compare,
 * not a bytes object and a dict lookup. The table is sized to the input (a 1 KB file does not zero
 * 200 KB of slots: that was most of a small file's scan). */
typedef struct { const char *a; Py_ssize_t n; int id; } Slot;
typedef struct { Slot *slot; size_t mask; Py_ssize_t used, max; } Seen;

static int seen_init(Seen *s, Py_ssize_t bytes) {
    size_t n = 64;
    while (n < (1 << 13) && (Py_ssize_t)n * 16 < bytes) n <<= 1;
    s->slot = PyMem_Calloc(n, sizeof(Slot));
    s->mask = n - 1;
    s->used = 0;
    s->max = (Py_ssize_t)(n / 4 * 3);
    if (!s->slot) { PyErr_NoMemory(); return -1; }
    return 0;
}

/* Eight bytes per multiply (a byte-wise FNV-1a was a third of the scan: one dependent multiply per byte
 * of every key), then a final mix so the low bits that pick the slot depend on every byte. Slots are
 * always confirmed by length and memcmp, so the hash only spreads them. */
static size_t span_hash(const char *a, Py_ssize_t n) {
    unsigned long long h = 0x9E3779B97F4A7C15ULL ^ (unsigned long long)n, w;
    for (; n >= 8; a += 8, n -= 8) {
        memcpy(&w, a, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDULL;
        h ^= h >> 32;
    }
    if (n) {
        w = 0;
        for (Py_ssize_t i = 0; i < n; i++) w |= (unsigned long long)(unsigned char)a[i] << (8 * i);
        h = (h ^ w) * 0xFF51AFD7ED558CCDULL;
    }
    h ^= h >> 29;
    h *= 0xC4CEB9FE1A85EC53ULL;
    h ^= h >> 32;
    return (size_t)h;
}

static int intern(PyObject *table, PyObject *names, const char *a, const char *b, Seen *seen) {
    if (!a) return -1;
    Py_ssize_t n = b - a;
    size_t at = span_hash(a, n) & seen->mask;
    for (Slot *s = &seen->slot[at]; s->a; at = (at + 1) & seen->mask, s = &seen->slot[at])
        if (s->n == n && memcmp(s->a, a, (size_t)n) == 0) return s->id;
    PyObject *key = PyBytes_FromStringAndSize(a, n);
    if (!key) return -3;
    PyObject *hit = PyDict_GetItemWithError(table, key);
    int id;
    if (hit) id = (int)PyLong_AsLong(hit);
    else if (PyErr_Occurred()) { Py_DECREF(key); return -3; }
    else {
        PyObject *text = PyUnicode_DecodeUTF8(a, n, "strict");
        if (!text) { PyErr_Clear(); Py_DECREF(key); return -2; }
        id = (int)PyList_GET_SIZE(names);
        PyObject *num = PyLong_FromLong(id);
        int bad = !num || PyList_Append(names, text) < 0 || PyDict_SetItem(table, key, num) < 0;
        Py_XDECREF(num); Py_DECREF(text);
        if (bad) { Py_DECREF(key); return -3; }
    }
    Py_DECREF(key);
    if (seen->used < seen->max) {
        seen->slot[at].a = a; seen->slot[at].n = n; seen->slot[at].id = id;
        seen->used++;
    }
    return id;
}

enum { C_LINE, C_CONN, C_CC, C_T, C_PREV, C_STATE, C_METRICS, C_TRIGGER, C_SRC, N_COLS };

/* One call's output: the columns (C_SRC only for scan_files), rows the Python reader must parse. */
typedef struct {
    PyObject *table, *names, *fallback;
    const char *t;
    size_t tl;
    Col cols[N_COLS];
    Seen seen;
    long long rows;
} Scan;

/* Canonical lines of [pos, stop) into the columns (file number src when with_src), from line lineno;
 * returns the line number at stop, or -1 with an exception set. */
static Py_ssize_t scan_region(Scan *s, const char *pos, const char *stop, Py_ssize_t lineno, int src, int with_src) {
    const char *line_at = pos;
    while (pos < stop) {
        const char *hit, *eol;
        if (!next_line(pos, stop, s->t, s->tl, &hit, &eol, &lineno, &line_at)) break;
        Fields f;
        int ids[5] = {-1, -1, -1, -1, -1}, ok = parse_canonical(hit + s->tl, eol, &f), i;
        if (ok) {
            const char *spans[5][2] = {{f.conn_a, f.conn_b}, {f.cc_a, f.cc_b}, {f.from_a, f.from_b}, {f.to_a, f.to_b}, {f.trig_a, f.trig_b}};
            for (i = 0; i < 5 && ok; i++) {
                ids[i] = intern(s->table, s->names, spans[i][0], spans[i][1], &s->seen);
                if (ids[i] == -3) return -1;
                if (ids[i] == -2) ok = 0;
            }
        }
        long long ln = (long long)lineno, ms[7];
        if (!ok) {  /* the Python reader parses it (or reports it) and fills this row */
            PyObject *item = Py_BuildValue("(Lny#)", s->rows, lineno, hit + s->tl, (Py_ssize_t)(eol - hit - (Py_ssize_t)s->tl));
            if (!item || PyList_Append(s->fallback, item) < 0) { Py_XDECREF(item); return -1; }
            Py_DECREF(item);
            for (i = 0; i < 5; i++) ids[i] = -1;
            f.t_us = 0;
            for (i = 0; i < 7; i++) f.has_m[i] = 0;
        }
        for (i = 0; i < 7; i++) ms[i] = f.has_m[i] ? f.m[i] : (long long)(-0x7fffffffffffffffLL - 1);
        Col *c = s->cols;
        if (col_put(&c[C_LINE], &ln, 8) || col_put(&c[C_CONN], &ids[0], 4) || col_put(&c[C_CC], &ids[1], 4) ||
            col_put(&c[C_T], &f.t_us, 8) || col_put(&c[C_PREV], &ids[2], 4) || col_put(&c[C_STATE], &ids[3], 4) ||
            col_put(&c[C_METRICS], ms, sizeof ms) || col_put(&c[C_TRIGGER], &ids[4], 4) ||
            (with_src && col_put(&c[C_SRC], &src, 4)))
            return -1;
        s->rows++;
        pos = eol;
    }
    return lineno + count_nl(line_at, stop);
}

/* (columns as bytes, fallback list) of a finished scan; NULL on error. */
static PyObject *scan_result(Scan *s, int ncols, PyObject *last) {
    PyObject *out = last ? PyTuple_New(ncols) : NULL;
    if (!out) { Py_XDECREF(last); return NULL; }
    for (int i = 0; i < ncols; i++) {
        PyObject *b = PyBytes_FromStringAndSize(s->cols[i].data ? s->cols[i].data : "", (Py_ssize_t)s->cols[i].len);
        if (!b) { Py_DECREF(out); Py_DECREF(last); return NULL; }
        PyTuple_SET_ITEM(out, i, b);
    }
    return Py_BuildValue("(NON)", out, s->fallback, last);
}

static void scan_free(Scan *s) {
    for (int i = 0; i < N_COLS; i++) PyMem_Free(s->cols[i].data);
    PyMem_Free(s->seen.slot);
    Py_XDECREF(s->fallback);
}

static PyObject *scan_columns(PyObject *self, PyObject *args) {
    Py_buffer buf, tag;
    Py_ssize_t start, end, lineno;
    Scan s = {0};
    PyObject *res = NULL;
    if (!PyArg_ParseTuple(args, "y*nny*nO!O!", &buf, &start, &end, &tag, &lineno, &PyDict_Type, &s.table, &PyList_Type, &s.names))
        return NULL;
    clamp_window(buf.len, &start, &end);
    s.t = (const char *)tag.buf;
    s.tl = (size_t)tag.len;
    const char *base = (const char *)buf.buf;
    if (seen_init(&s.seen, end - start) == 0 && (s.fallback = PyList_New(0)) != NULL) {
        lineno = scan_region(&s, base + start, base + end, lineno, 0, 0);
        if (lineno >= 0) res = scan_result(&s, C_SRC, PyLong_FromSsize_t(lineno));
    }
    scan_free(&s);
    PyBuffer_Release(&buf);
    PyBuffer_Release(&tag);
    return res;
}

/* Many whole files joined in one buffer (file i is [bounds[i], bounds[i + 1])): each scanned from its line
 * 1, its rows numbered i in a ninth column; with each file's line count (a last line without its newline
 * counts). One call for a batch of small files instead of one per file. */
static PyObject *scan_files(PyObject *self, PyObject *args) {
    Py_buffer buf, bounds, tag;
    Scan s = {0};
    PyObject *res = NULL;
    if (!PyArg_ParseTuple(args, "y*y*y*O!O!", &buf, &bounds, &tag, &PyDict_Type, &s.table, &PyList_Type, &s.names))
        return NULL;
    Py_ssize_t nfiles = bounds.len / 8 - 1;
    const long long *b = (const long long *)bounds.buf;
    const char *base = (const char *)buf.buf;
    s.t = (const char *)tag.buf;
    s.tl = (size_t)tag.len;
    long long *lines = NULL;
    if (nfiles < 0 || bounds.len % 8) { PyErr_SetString(PyExc_ValueError, "bounds: int64 offsets, at least one"); goto out; }
    for (Py_ssize_t i = 0; i < nfiles; i++)
        if (b[i] < 0 || b[i] > b[i + 1] || b[i + 1] > buf.len) { PyErr_SetString(PyExc_ValueError, "bounds out of order"); goto out; }
    if (seen_init(&s.seen, buf.len) < 0 || !(s.fallback = PyList_New(0))) goto out;
    lines = PyMem_Malloc(sizeof(long long) * (size_t)(nfiles ? nfiles : 1));
    if (!lines) { PyErr_NoMemory(); goto out; }
    for (Py_ssize_t i = 0; i < nfiles; i++) {
        const char *a = base + b[i], *e = base + b[i + 1];
        Py_ssize_t end = scan_region(&s, a, e, 1, (int)i, 1);
        if (end < 0) goto out;
        lines[i] = (long long)(end - 1) + (e > a && e[-1] != '\n');
    }
    res = scan_result(&s, N_COLS, PyBytes_FromStringAndSize((const char *)lines, (Py_ssize_t)(8 * nfiles)));
out:
    PyMem_Free(lines);
    scan_free(&s);
    PyBuffer_Release(&buf);
    PyBuffer_Release(&bounds);
    PyBuffer_Release(&tag);
    return res;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS, "scan(buffer, start, end, tag, lineno, parse=False) -> ([(line, payload) or parsed tuple], lineno_at_end)"},
    {"scan_columns", scan_columns, METH_VARARGS,
     "scan_columns(buffer, start, end, tag, lineno, table, names) -> (8 column bytes, [(row, line, payload)], lineno_at_end)"},
    {"scan_files", scan_files, METH_VARARGS,
     "scan_files(buffer, bounds, tag, table, names) -> (9 column bytes, [(row, line, payload)], lines per file as int64 bytes)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_scan", "C tag finder for quicsm's log scanner", -1, methods};

PyMODINIT_FUNC PyInit__scan(void) { return PyModule_Create(&module); }
