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

/* Newlines in [p, q): a branch-free loop the compiler vectorises (-O3), several GB/s. */
static Py_ssize_t count_nl(const char *p, const char *q) {
    Py_ssize_t n = 0;
    while (p < q) {
        size_t len = (size_t)(q - p), block = len < 4096 ? len : 4096;
        unsigned int c = 0;
        for (size_t i = 0; i < block; i++) c += (p[i] == '\n');
        n += c;
        p += block;
    }
    return n;
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

static PyObject *fast_record(Py_ssize_t line, const char *p, const char *e) {
    const char *a, *b;
    PyObject *f[15] = {0};
    PyObject *res = NULL;
    int i;
    if (!lit(&p, e, "v=1 conn=")) return NULL;
    a = p; b = token_end(p, e); if (b == a || (b - a == 1 && *a == '-')) return NULL; p = b;
    f[0] = str_of(a, b);                                   /* conn ('-' = not known: the Python reader refuses it) */
    if (!f[0] || !lit(&p, e, " t_us=")) goto out;
    {
        long long v = 0; int neg = 0, nd = 0;
        if (p < e && *p == '-') { neg = 1; p++; }
        while (p < e && *p >= '0' && *p <= '9' && nd < 18) { v = v * 10 + (*p - '0'); p++; nd++; }
        if (nd == 0 || (p < e && *p >= '0' && *p <= '9')) goto out;
        f[2] = PyLong_FromLongLong(neg ? -v : v);          /* t_us */
    }
    if (!f[2] || !lit(&p, e, " cc=")) goto out;
    a = p; while (p < e && ((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9'))) p++;
    if (p == a) goto out;
    f[1] = str_of(a, p);                                   /* cc */
    if (!f[1]) goto out;
    if (lit(&p, e, " from=")) {
        a = p; b = token_end(p, e); if (b == a) goto out; p = b;
        if (b - a == 1 && *a == '-') { f[3] = Py_None; Py_INCREF(Py_None); }
        else f[3] = str_of(a, b);
        if (!f[3]) goto out;
    } else { f[3] = Py_None; Py_INCREF(Py_None); }
    if (!lit(&p, e, " to=")) goto out;
    a = p; b = token_end(p, e); if (b == a || (b - a == 1 && *a == '-')) goto out; p = b;
    f[4] = str_of(a, b);                                   /* to ('-' on a transition: the Python reader refuses it) */
    if (!f[4]) goto out;
    for (i = 0; i < 7; i++) {
        const char *save = p;
        if (p < e && *p == ' ' && (p++, lit(&p, e, INT_KEYS[i]))) {
            long long v = 0; int nd = 0;
            while (p < e && *p >= '0' && *p <= '9' && nd < 18) { v = v * 10 + (*p - '0'); p++; nd++; }
            if (nd == 0 || (p < e && *p != ' ' && *p != '\t' && *p != '\r' && *p != '\v' && *p != '\f')) goto out;
            f[5 + i] = PyLong_FromLongLong(v);
            if (!f[5 + i]) goto out;
        } else { p = save; f[5 + i] = Py_None; Py_INCREF(Py_None); }
    }
    {
        const char *save = p;
        if (p < e && *p == ' ' && (p++, lit(&p, e, "trigger="))) {
            a = p;
            while (p < e && (((*p | 32) >= 'a' && (*p | 32) <= 'z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == '.' || *p == '-')) p++;
            if (p == a) goto out;
            if (p - a == 1 && *a == '-') { f[12] = Py_None; Py_INCREF(Py_None); }  /* '-' = not known */
            else f[12] = str_of(a, p);
            if (!f[12]) goto out;
        } else { p = save; f[12] = Py_None; Py_INCREF(Py_None); }
    }
    while (p < e && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\v' || *p == '\f')) p++;
    if (p != e) goto out;
    res = Py_BuildValue("(nOOOOOOOOOOOOO)", line, f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7], f[8], f[9], f[10], f[11], f[12]);
out:
    for (i = 0; i < 15; i++) Py_XDECREF(f[i]);
    if (!res) PyErr_Clear();
    return res;
}

static PyObject *scan(PyObject *self, PyObject *args) {
    Py_buffer buf, tag;
    Py_ssize_t start, end, lineno;
    int parse_fields = 0;
    if (!PyArg_ParseTuple(args, "y*nny*n|p", &buf, &start, &end, &tag, &lineno, &parse_fields)) return NULL;
    if (end < 0 || end > buf.len) end = buf.len;
    if (start < 0) start = 0;
    if (start > end) start = end;
    const char *base = (const char *)buf.buf, *stop = base + end, *pos = base + start, *line_at = pos;
    const char *t = (const char *)tag.buf;
    size_t tl = (size_t)tag.len;
    PyObject *hits = PyList_New(0);
    if (!hits) goto fail;
    while (pos < stop) {
        const char *hit = memmem(pos, (size_t)(stop - pos), t, tl);
        if (!hit) break;
        const char *eol = memchr(hit, '\n', (size_t)(stop - hit));
        if (!eol) eol = stop;
        lineno += count_nl(line_at, hit);
        line_at = hit;
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

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS, "scan(buffer, start, end, tag, lineno, parse=False) -> ([(line, payload) or parsed tuple], lineno_at_end)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_scan", "C tag finder for quicsm's log scanner", -1, methods};

PyMODINIT_FUNC PyInit__scan(void) { return PyModule_Create(&module); }
