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
#include <math.h>
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

/* ---- qlog records (JSON-SEQ, NDJSON): the plain quic-go shape straight into columns ----
 *
 * scan_qlogs(buffer, bounds, seps, table, names): whole small qlog files joined in one buffer, file i at
 * int64 bounds[i] to bounds[i + 1], split into records at seps[i] (0x1E or '\n'). The reader it stands for
 * is quicsm/traces/qlog.py's _read_records; only what that reader would do without a word of report is
 * decided here, in a strict subset of JSON: records {"time": number, "name": "...", "data": {...}} with
 * ASCII strings. A file holding anything else (another key, an escape in a string that matters, a state
 * given as a number or with "old", a bad or missing time or field, mvfst's event, nesting over 64 levels)
 * gets status 1 and no rows: the Python reader reads it, with its own messages. The first non-blank record
 * is the header, handed back as a span for the Python reader's _header to judge (it may send the file back).
 * Per row: file, kind (0 transition, 2 metrics), time as written (float64: the file's unit is the header's),
 * state and trigger ids (interned; -1 none), cwnd, inflight, ssthresh, pacing (int64, INT64_MIN absent),
 * min_rtt and smoothed_rtt as written (float64, NaN absent: scaled by the file's unit in Python). */

#define QNULL ((long long)(-0x7fffffffffffffffLL - 1))
#define QMAX 0x7fffffffffffffffLL /* = qlog_values.MAX_COUNT */

typedef struct { const char *a, *b; } Span;
enum { J_BAD, J_STR, J_NUM, J_OBJ, J_ARR, J_TRUE, J_FALSE, J_NULL };

static int jws(int c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
static const char *skip_jws(const char *p, const char *e) { while (p < e && jws((unsigned char)*p)) p++; return p; }

/* A JSON string at p ('"'): its end (after the quote) or NULL; *plain = no escape, printable ASCII only.
 * Non-ASCII bytes are refused outright (no UTF-8 check here): such a file goes to the Python reader. */
static const char *jstring(const char *p, const char *e, int *plain) {
    *plain = 1;
    for (p++; p < e; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == '"') return p + 1;
        if (c < 0x20 || c >= 0x7f) return NULL;
        if (c == '\\') {
            *plain = 0;
            if (++p >= e) return NULL;
            c = (unsigned char)*p;
            if (c == 'u') {
                for (int i = 0; i < 4; i++) {
                    if (++p >= e) return NULL;
                    c = (unsigned char)*p;
                    if (!((c >= '0' && c <= '9') || ((c | 32) >= 'a' && (c | 32) <= 'f'))) return NULL;
                }
            } else if (!strchr("\"\\/bfnrt", c)) return NULL;
        }
    }
    return NULL;
}

/* A JSON number at p (RFC 8259 grammar): its end or NULL; *integer = no fraction, no exponent. */
static const char *jnumber(const char *p, const char *e, int *integer) {
    const char *s = p;
    *integer = 1;
    if (p < e && *p == '-') p++;
    if (p >= e || *p < '0' || *p > '9') return NULL;
    if (*p == '0') p++;
    else while (p < e && *p >= '0' && *p <= '9') p++;
    if (p < e && *p == '.') {
        *integer = 0; p++;
        if (p >= e || *p < '0' || *p > '9') return NULL;
        while (p < e && *p >= '0' && *p <= '9') p++;
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        *integer = 0; p++;
        if (p < e && (*p == '+' || *p == '-')) p++;
        if (p >= e || *p < '0' || *p > '9') return NULL;
        while (p < e && *p >= '0' && *p <= '9') p++;
    }
    if (p - s > 30) return NULL; /* long numbers: the Python reader's guards decide */
    return p;
}

/* Any JSON value at p: its end, or NULL if it is not (strict) JSON or nests deeper than 64. */
static const char *jvalue(const char *p, const char *e, int depth, int *type) {
    int plain, integer;
    *type = J_BAD;
    if (p >= e || depth > 64) return NULL;
    switch (*p) {
    case '"': *type = J_STR; return jstring(p, e, &plain);
    case '{': case '[': {
        char close = *p == '{' ? '}' : ']';
        int t;
        *type = *p == '{' ? J_OBJ : J_ARR;
        p = skip_jws(p + 1, e);
        if (p < e && *p == close) return p + 1;
        for (;;) {
            if (close == '}') {
                if (p >= e || *p != '"' || !(p = jstring(p, e, &plain))) return NULL;
                p = skip_jws(p, e);
                if (p >= e || *p != ':') return NULL;
                p = skip_jws(p + 1, e);
            }
            if (!(p = jvalue(p, e, depth + 1, &t))) return NULL;
            p = skip_jws(p, e);
            if (p < e && *p == ',') { p = skip_jws(p + 1, e); continue; }
            if (p < e && *p == close) return p + 1;
            return NULL;
        }
    }
    case 't': *type = J_TRUE; return lit(&p, e, "true") ? p : NULL;
    case 'f': *type = J_FALSE; return lit(&p, e, "false") ? p : NULL;
    case 'n': *type = J_NULL; return lit(&p, e, "null") ? p : NULL;
    default: *type = J_NUM; return jnumber(p, e, &integer);
    }
}

static int span_is(Span s, const char *word) {
    size_t n = strlen(word);
    return (size_t)(s.b - s.a) == n && memcmp(s.a, word, n) == 0;
}

/* One object's members: for each of `keys`, the value's span and type (a->NULL: absent). 0 if the object
 * is not strict JSON, a wanted key comes twice or is written with an escape (it might be one of them), or
 * (strict) a key is not among `keys`. */
static int jmembers(const char *p, const char *e, const char *const *keys, int nkeys, Span *vals, int *types, int strict,
                    int depth) {
    int plain, t, i;
    for (i = 0; i < nkeys; i++) { vals[i].a = vals[i].b = NULL; types[i] = J_BAD; }
    if (p >= e || *p != '{') return 0;
    p = skip_jws(p + 1, e);
    if (p < e && *p == '}') return skip_jws(p + 1, e) == e;
    for (;;) {
        const char *ka = p + 1, *kb;
        if (p >= e || *p != '"' || !(kb = jstring(p, e, &plain))) return 0;
        Span key = {ka, kb - 1};
        p = skip_jws(kb, e);
        if (p >= e || *p != ':') return 0;
        p = skip_jws(p + 1, e);
        const char *va = p;
        if (!(p = jvalue(p, e, depth + 1, &t))) return 0;
        if (!plain) return 0;
        for (i = 0; i < nkeys && !span_is(key, keys[i]); i++) {}
        if (i < nkeys) {
            if (vals[i].a) return 0;
            vals[i].a = va; vals[i].b = p; types[i] = t;
        } else if (strict) return 0;
        p = skip_jws(p, e);
        if (p < e && *p == ',') { p = skip_jws(p + 1, e); continue; }
        if (p < e && *p == '}') return skip_jws(p + 1, e) == e;
        return 0;
    }
}

static const char *const REC_KEYS[3] = {"time", "name", "data"};
static const char *const STATE_KEYS[6] = {"new", "new_state", "state", "old", "old_state", "trigger"};
static const char *const METRIC_KEYS[10] = {"congestion_window", "cwnd", "current_cwnd", "bytes_in_flight", "inflight",
                                            "ssthresh", "slow_start_threshold", "pacing_rate", "min_rtt", "smoothed_rtt"};
/* qlog._METRIC_KEYS: (first key, keys) per field cwnd, inflight, ssthresh, pacing, min_rtt, smoothed_rtt */
static const int METRIC_FIRST[7] = {0, 3, 5, 7, 8, 9, 10};

static int ci_has(const char *p, const char *e, const char *w) {
    size_t n = strlen(w);
    for (; (size_t)(e - p) >= n; p++) {
        size_t i = 0;
        while (i < n && (p[i] | (p[i] >= 'A' && p[i] <= 'Z' ? 32 : 0)) == w[i]) i++;
        if (i == n) return 1;
    }
    return 0;
}

/* qlog._WANTED: records that may matter (others are not decoded, only their time kept). */
static int wanted(const char *p, const char *e) {
    return ci_has(p, e, "congestion") || ci_has(p, e, "metric") || ci_has(p, e, "cc_state");
}

static int rx_space(int c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

/* qlog._TIME then float(): the time of a record not decoded. 1 with *t when the regex matches and float()
 * takes the match; 0 otherwise (the record then has no time, as in the Python reader). */
static int regex_time(const char *p, const char *e, double *t) {
    for (;;) {
        const char *q = p;
        while ((size_t)(e - q) >= 6 && memcmp(q, "\"time\"", 6) != 0) q++;
        if ((size_t)(e - q) < 6) return 0;
        p = q + 1;
        q += 6;
        while (q < e && rx_space((unsigned char)*q)) q++;
        if (q >= e || *q != ':') continue;
        q++;
        while (q < e && rx_space((unsigned char)*q)) q++;
        const char *a = q;
        if (q < e && *q == '-' && q + 1 < e && q[1] >= '0' && q[1] <= '9') q++;
        if (q >= e || *q < '0' || *q > '9') continue;
        q++;
        for (int n = 0; n < 30 && q < e && strchr("0123456789.eE+-", *q) && *q; n++) q++;
        /* float(): digits ["." digits] [e [+-] digits], '-' only first (the match starts with a digit or '-') */
        const char *s = a;
        if (*s == '-') s++;
        while (s < q && *s >= '0' && *s <= '9') s++;
        if (s < q && *s == '.') { s++; while (s < q && *s >= '0' && *s <= '9') s++; }
        if (s < q && (*s == 'e' || *s == 'E')) {
            s++;
            if (s < q && (*s == '+' || *s == '-')) s++;
            if (s >= q || *s < '0' || *s > '9') return 0;
            while (s < q && *s >= '0' && *s <= '9') s++;
        }
        if (s != q) return 0; /* float() raises ValueError: no time */
        char tmp[40];
        memcpy(tmp, a, (size_t)(q - a));
        tmp[q - a] = 0;
        *t = strtod(tmp, NULL);
        return 1;
    }
}

static double num_of(Span s) {
    char tmp[40];
    size_t n = (size_t)(s.b - s.a);
    memcpy(tmp, s.a, n);
    tmp[n] = 0;
    return strtod(tmp, NULL);
}

/* A usable event time (qlog_values.time_value): a number, finite, |t| <= 1e15. */
static int good_time(Span s, int type, double *t) {
    if (type != J_NUM) return 0;
    *t = num_of(s);
    return isfinite(*t) && fabs(*t) <= 1e15;
}

typedef struct {
    Scan *s;
    Col src, kind, t, state, trig, metrics, timed;
    int file;
    long long rows;
} QScan;

static int qput(QScan *q, int kind, double t, int state, int trig, const long long *m, const double *timed) {
    signed char k = (signed char)kind;
    if (col_put(&q->src, &q->file, 4) || col_put(&q->kind, &k, 1) || col_put(&q->t, &t, 8) || col_put(&q->state, &state, 4) ||
        col_put(&q->trig, &trig, 4) || col_put(&q->metrics, m, 56) || col_put(&q->timed, timed, 16))
        return -1;
    q->rows++;
    return 0;
}

/* An ASCII name that qlog's _role knows: 1 state, 2 metrics, 3 mvfst, 0 none (after the last ':', any case). */
static int role_of(Span name) {
    const char *a = name.b;
    while (a > name.a && a[-1] != ':') a--;
    char low[32];
    size_t n = (size_t)(name.b - a);
    if (n >= sizeof low) return 0;
    for (size_t i = 0; i < n; i++) low[i] = (char)(a[i] >= 'A' && a[i] <= 'Z' ? a[i] | 32 : a[i]);
    low[n] = 0;
    static const char *const states[] = {"congestion_state_updated", "congestion_state_update", "cc_state_update", "congestion_state"};
    static const char *const metrics[] = {"metrics_updated", "recovery_metrics_updated", "metric_update", "metrics_update"};
    for (int i = 0; i < 4; i++) {
        if (!strcmp(low, states[i])) return 1;
        if (!strcmp(low, metrics[i])) return 2;
    }
    return !strcmp(low, "congestion_metric_update") ? 3 : 0;
}

/* One record decoded (a wanted one): 1 handled (maybe a row), 0 the file goes to the Python reader, -1 error. */
static int qrecord(QScan *q, const char *p, const char *e, double *max_t, int *has_max) {
    Span v[10];
    int ty[10], plain;
    if (!jmembers(p, e, REC_KEYS, 3, v, ty, 1, 0)) return 0;
    if (!v[1].a || ty[1] != J_STR || !jstring(v[1].a, v[1].b, &plain) || !plain || v[1].b - v[1].a <= 2) return 0;
    Span name = {v[1].a + 1, v[1].b - 1};
    int role = role_of(name);
    double t;
    if (role == 0) {
        if (!v[0].a || ty[0] == J_NULL) return 1;
        if (ty[0] == J_STR) return 0; /* a time as a string: float() decides */
        if (good_time(v[0], ty[0], &t)) {
            if (!*has_max || t > *max_t) *max_t = t;
            *has_max = 1;
        }
        return 1;
    }
    if (role == 3 || !v[2].a || ty[2] != J_OBJ || !v[0].a || !good_time(v[0], ty[0], &t)) return 0;
    if (!*has_max || t > *max_t) *max_t = t;
    *has_max = 1;
    long long m[7];
    double timed[2] = {NAN, NAN};
    for (int i = 0; i < 7; i++) m[i] = QNULL;
    if (role == 1) {
        if (!jmembers(v[2].a, v[2].b, STATE_KEYS, 6, v, ty, 0, 1) || v[3].a || v[4].a) return 0;
        int w = v[0].a ? 0 : v[1].a ? 1 : 2;
        if (!v[w].a || ty[w] != J_STR || !jstring(v[w].a, v[w].b, &plain) || !plain || v[w].b - v[w].a <= 2) return 0;
        int digits = 1;
        for (const char *c = v[w].a + 1; c < v[w].b - 1; c++) digits &= (*c >= '0' && *c <= '9');
        if (digits) return 0; /* picoquic's numbered states: the Python reader maps them */
        int state = intern(q->s->table, q->s->names, v[w].a + 1, v[w].b - 1, &q->s->seen), trig = -1;
        if (state < -1) return state == -3 ? -1 : 0;
        if (v[5].a && ty[5] == J_STR) {
            if (!jstring(v[5].a, v[5].b, &plain) || !plain) return 0;
            const char *b = v[5].b - 1;
            if (b - (v[5].a + 1) > 200) b = v[5].a + 1 + 200;
            trig = intern(q->s->table, q->s->names, v[5].a + 1, b, &q->s->seen);
            if (trig < -1) return trig == -3 ? -1 : 0;
        }
        return qput(q, 0, t, state, trig, m, timed) ? -1 : 1;
    }
    if (!jmembers(v[2].a, v[2].b, METRIC_KEYS, 10, v, ty, 0, 1)) return 0;
    for (int f = 0; f < 6; f++) {
        int k = METRIC_FIRST[f];
        while (k < METRIC_FIRST[f + 1] && !v[k].a) k++;
        if (k == METRIC_FIRST[f + 1] || ty[k] == J_NULL) continue;
        if (ty[k] != J_NUM || *v[k].a == '-') return 0;
        int integer;
        jnumber(v[k].a, v[k].b, &integer);
        if (f >= 4) { /* an RTT in the file's unit, scaled in Python: exact as a double below 2^53 */
            double x = num_of(v[k]);
            if (v[k].b - v[k].a > 15 || x >= 1e15) return 0;
            timed[f - 4] = x;
            continue;
        }
        if (!integer || v[k].b - v[k].a > 19) return 0;
        unsigned long long x = 0;
        for (const char *c = v[k].a; c < v[k].b; c++) x = x * 10 + (unsigned long long)(*c - '0');
        if (x >= (unsigned long long)QMAX) {
            if (f != 2) return 0; /* out of range: reported by the Python reader */
            x = (unsigned long long)QMAX; /* ssthresh: unbounded */
        }
        m[f == 3 ? 3 : f] = (long long)x;
    }
    return qput(q, 2, t, -1, -1, m, timed) ? -1 : 1;
}

static const char *strip_l(const char *p, const char *e) { while (p < e && rx_space((unsigned char)*p)) p++; return p; }
static const char *strip_r(const char *p, const char *e) { while (e > p && rx_space((unsigned char)e[-1])) e--; return e; }

static PyObject *scan_qlogs(PyObject *self, PyObject *args) {
    Py_buffer buf, bounds, seps;
    Scan s = {0};
    QScan q = {0};
    PyObject *res = NULL, *info = NULL, *maxes = NULL;
    long long *fi = NULL;
    double *mx = NULL;
    if (!PyArg_ParseTuple(args, "y*y*y*O!O!", &buf, &bounds, &seps, &PyDict_Type, &s.table, &PyList_Type, &s.names)) return NULL;
    Py_ssize_t nfiles = bounds.len / 8 - 1;
    const long long *b = (const long long *)bounds.buf;
    const char *base = (const char *)buf.buf;
    q.s = &s;
    if (nfiles < 0 || bounds.len % 8 || seps.len < nfiles) { PyErr_SetString(PyExc_ValueError, "bounds: int64 offsets; seps: a byte a file"); goto out; }
    for (Py_ssize_t i = 0; i < nfiles; i++)
        if (b[i] < 0 || b[i] > b[i + 1] || b[i + 1] > buf.len) { PyErr_SetString(PyExc_ValueError, "bounds out of order"); goto out; }
    if (seen_init(&s.seen, buf.len) < 0) goto out;
    fi = PyMem_Calloc((size_t)(nfiles ? nfiles : 1), 4 * sizeof(long long));
    mx = PyMem_Calloc((size_t)(nfiles ? nfiles : 1), sizeof(double));
    if (!fi || !mx) { PyErr_NoMemory(); goto out; }
    for (Py_ssize_t i = 0; i < nfiles; i++) {
        const char *a = base + b[i], *e = base + b[i + 1];
        char sep = ((const char *)seps.buf)[i];
        long long first_row = q.rows;
        size_t marks[7] = {q.src.len, q.kind.len, q.t.len, q.state.len, q.trig.len, q.metrics.len, q.timed.len};
        int header = 0, ok = 1, has_max = 0;
        double max_t = 0;
        q.file = (int)i;
        fi[4 * i + 1] = fi[4 * i + 2] = -1;
        while (ok) {
            const char *end = memchr(a, sep, (size_t)(e - a));
            if (!end) end = e;
            if (!header) {
                const char *x = strip_l(a, end), *y = strip_r(x, end);
                if (x < y) { header = 1; fi[4 * i + 1] = x - base; fi[4 * i + 2] = y - base; }
            } else if (!wanted(a, end)) {
                double t;
                if (regex_time(a, end, &t) && isfinite(t) && fabs(t) <= 1e15) {
                    if (!has_max || t > max_t) max_t = t;
                    has_max = 1;
                }
            } else {
                const char *x = strip_l(a, end), *y = strip_r(x, end);
                if (x < y) {
                    int r = qrecord(&q, x, y, &max_t, &has_max);
                    if (r < 0) goto out;
                    ok = r;
                }
            }
            if (end == e) break;
            a = end + 1;
        }
        if (!ok || !header) { /* the Python reader reads this file: its rows go */
            q.rows = first_row;
            q.src.len = marks[0]; q.kind.len = marks[1]; q.t.len = marks[2]; q.state.len = marks[3];
            q.trig.len = marks[4]; q.metrics.len = marks[5]; q.timed.len = marks[6];
        }
        fi[4 * i] = !ok || !header;
        fi[4 * i + 3] = q.rows - first_row;
        mx[i] = has_max ? max_t : NAN;
    }
    info = PyBytes_FromStringAndSize((const char *)fi, (Py_ssize_t)(32 * nfiles));
    maxes = PyBytes_FromStringAndSize((const char *)mx, (Py_ssize_t)(8 * nfiles));
    if (info && maxes) {
        Col *cols[7] = {&q.src, &q.kind, &q.t, &q.state, &q.trig, &q.metrics, &q.timed};
        PyObject *out = PyTuple_New(7);
        for (int c = 0; out && c < 7; c++) {
            PyObject *x = PyBytes_FromStringAndSize(cols[c]->data ? cols[c]->data : "", (Py_ssize_t)cols[c]->len);
            if (!x) { Py_CLEAR(out); break; }
            PyTuple_SET_ITEM(out, c, x);
        }
        if (out) res = Py_BuildValue("(NOON)", out, info, maxes, PyLong_FromLongLong(q.rows));
    }
out:
    Py_XDECREF(info);
    Py_XDECREF(maxes);
    PyMem_Free(fi);
    PyMem_Free(mx);
    {
        Col *cols[7] = {&q.src, &q.kind, &q.t, &q.state, &q.trig, &q.metrics, &q.timed};
        for (int c = 0; c < 7; c++) PyMem_Free(cols[c]->data);
    }
    PyMem_Free(s.seen.slot);
    PyBuffer_Release(&buf);
    PyBuffer_Release(&bounds);
    PyBuffer_Release(&seps);
    return res;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS, "scan(buffer, start, end, tag, lineno, parse=False) -> ([(line, payload) or parsed tuple], lineno_at_end)"},
    {"scan_columns", scan_columns, METH_VARARGS,
     "scan_columns(buffer, start, end, tag, lineno, table, names) -> (8 column bytes, [(row, line, payload)], lineno_at_end)"},
    {"scan_files", scan_files, METH_VARARGS,
     "scan_files(buffer, bounds, tag, table, names) -> (9 column bytes, [(row, line, payload)], lines per file as int64 bytes)"},
    {"scan_qlogs", scan_qlogs, METH_VARARGS,
     "scan_qlogs(buffer, bounds, seps, table, names) -> (7 column bytes, file info int64 x4, max times float64, rows)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_scan", "C tag finder for quicsm's log scanner", -1, methods};

PyMODINIT_FUNC PyInit__scan(void) { return PyModule_Create(&module); }
