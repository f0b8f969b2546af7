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
#include <structmember.h>
#include <stdarg.h>
#include <string.h>
#include <math.h>
#include <float.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>
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

/* strtod of the n bytes at a, a number in float()'s and JSON's grammar ([-]digits[.digits][(e|E)[+-]digits]),
 * exactly as strtod gives it, without strtod where that is cheap: when the decimal mantissa fits 2^53 and
 * its power of ten is within 10^22, both are exact doubles and one IEEE multiply or divide rounds correctly
 * (Clinger's fast path); every other text (long mantissas, large exponents, anything unexpected) goes to
 * strtod. Half of the qlog scanner's time went to strtod for record times and metrics. */
static const double POW10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* The fast path is exact only where a double operation rounds once: FLT_EVAL_METHOD 0 (SSE2, every x86-64 and
 * ARM build). Where it may be carried out in extended precision (x87: i386 without -mfpmath=sse) and round
 * twice, every number goes to strtod. */
#if defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD == 0
#define EXACT_FAST_PATH 1
#else
#define EXACT_FAST_PATH 0
#endif

static double exact_strtod(const char *a, size_t n) {
    const char *p = a, *e = a + n;
    if (!EXACT_FAST_PATH) goto slow;
    unsigned long long m = 0;
    int neg = 0, digits = 0, any = 0, exp10 = 0;
    if (p < e && *p == '-') { neg = 1; p++; }
    for (; p < e && *p >= '0' && *p <= '9'; p++) {
        any = 1;
        if (m || *p != '0') {
            if (digits >= 19) goto slow;
            m = m * 10 + (unsigned)(*p - '0');
            digits++;
        }
    }
    if (p < e && *p == '.') {
        for (p++; p < e && *p >= '0' && *p <= '9'; p++) {
            any = 1;
            if (m || *p != '0') {
                if (digits >= 19) goto slow;
                m = m * 10 + (unsigned)(*p - '0');
                digits++;
            }
            exp10--;
        }
    }
    if (!any) goto slow;
    if (p < e && (*p == 'e' || *p == 'E')) {
        int sign = 1, x = 0, xd = 0;
        p++;
        if (p < e && (*p == '+' || *p == '-')) sign = *p++ == '-' ? -1 : 1;
        for (; p < e && *p >= '0' && *p <= '9'; p++) {
            if (x > 100000) goto slow;
            x = x * 10 + (*p - '0');
            xd++;
        }
        if (!xd) goto slow;
        exp10 += sign * x;
    }
    if (p != e) goto slow;
    if (m == 0) return neg ? -0.0 : 0.0;
    if (m > (1ULL << 53) || exp10 < -22 || exp10 > 22) goto slow;
    double r = exp10 < 0 ? (double)m / POW10[-exp10] : (double)m * POW10[exp10];
    return neg ? -r : r;
slow:;
    char tmp[72];
    if (n >= sizeof tmp) n = sizeof tmp - 1; /* callers pass at most 64 bytes */
    memcpy(tmp, a, n);
    tmp[n] = 0;
    return strtod(tmp, NULL);
}

/* Bytes regex_time's number may hold: qlog._TIME's [0-9.eE+-]. */
static int time_byte(int c) { return (c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'; }

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
 * (other order, '-' numbers, inf, extra keys, ev=) is handed back as (line, payload) by scan(), the
 * object path's scanner, for the Python reader, which also owns every error message; the column scanner
 * reads those lines too (parse_general below) and hands back only lines the contract refuses. Same results
 * as contract._FAST and contract._parse_general, checked by the tests. */
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

/* ---- Any other line the contract allows, read here too (contract._parse_general's rules) ----
 * Fields in any order, '-' for "not known", ssthresh=inf/Infinity/2^64-1, decimals, ev= kinds, recovery=,
 * and fields the contract does not name (kept as the row's extra fields). Only a line the Python reader
 * would refuse (its messages are its own), a cc that is not ASCII, or more than MAX_EXTRA unknown
 * fields is handed back to it. */
#define SSTHRESH_INF 0x7fffffffffffffffLL /* events.SSTHRESH_INF */
#define MAX_EXTRA 32
enum { N_TUS, N_METRIC, N_SSTHRESH };

/* [a, b) as contract._number reads it (key N_TUS, N_METRIC or N_SSTHRESH): 1 with *out, 0 when the value
 * is an error (the Python reader reports it). */
static int contract_number(const char *a, const char *b, int key, long long *out) {
    static const char *const inf[] = {"inf", "Inf", "INF", "infinity", "Infinity", "INFINITY", "+inf", "+Infinity"};
    Py_ssize_t n = b - a;
    const char *p = a, *d;
    int neg = 0;
    if (p < b && *p == '-') { neg = 1; p++; }
    d = p;
    while (p < b && *p >= '0' && *p <= '9') p++;
    if (p == b && p > d && p - d <= 20) {  /* an integer: -?[0-9]{1,20} */
        unsigned long long v = 0;
        int over = 0;
        for (const char *q = d; q < b; q++) {
            unsigned digit = (unsigned)(*q - '0');
            if (v > (0xffffffffffffffffULL - digit) / 10) over = 1;
            else v = v * 10 + digit;
        }
        if (neg) {
            if (key == N_TUS) {
                if (over || v > 0x8000000000000000ULL) return 0;
                *out = v == 0x8000000000000000ULL ? (long long)(-0x7fffffffffffffffLL - 1) : -(long long)v;
                return 1;
            }
            if (v != 0) return 0;  /* below 0 */
            *out = 0;
            return 1;
        }
        if (!over && v <= 0x7fffffffffffffffULL && !(key == N_SSTHRESH && v == 0x7fffffffffffffffULL)) {
            *out = (long long)v;
            return 1;
        }
        if (key != N_SSTHRESH) return 0;  /* out of range */
        *out = SSTHRESH_INF;  /* 2^63-1 and up: unbounded */
        return 1;
    }
    if (key == N_SSTHRESH)
        for (size_t i = 0; i < sizeof inf / sizeof *inf; i++)
            if ((size_t)n == strlen(inf[i]) && memcmp(a, inf[i], (size_t)n) == 0) { *out = SSTHRESH_INF; return 1; }
    /* a decimal: -?(?:[0-9]{1,20}(?:\.[0-9]{0,20})?|\.[0-9]{1,20})(?:[eE][+-]?[0-9]{1,3})?, read as Python's
     * float() reads it (both round correctly) and truncated */
    p = d;
    while (p < b && *p >= '0' && *p <= '9') p++;
    Py_ssize_t whole = p - d, frac = -1;
    if (whole > 20) return 0;
    if (p < b && *p == '.') {
        const char *f0 = ++p;
        while (p < b && *p >= '0' && *p <= '9') p++;
        frac = p - f0;
        if (frac > 20 || (whole == 0 && frac == 0)) return 0;
    }
    if (whole == 0 && frac < 0) return 0;
    if (p < b && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < b && (*p == '+' || *p == '-')) p++;
        const char *e0 = p;
        while (p < b && *p >= '0' && *p <= '9') p++;
        if (p == e0 || p - e0 > 3) return 0;
    }
    if (p != b) return 0;
    if (n >= 64) return 0;
    double f = exact_strtod(a, (size_t)n);
    if (!isfinite(f)) return 0;  /* "not a finite number" */
    if (key == N_TUS) {
        if (f < -9223372036854775808.0 || f >= 9223372036854775808.0) return 0;
    } else if (f >= 9223372036854775808.0) {
        if (key != N_SSTHRESH) return 0;
        *out = SSTHRESH_INF;
        return 1;
    } else if (f <= -1.0) return 0;
    *out = (long long)f;  /* truncated toward zero, as int() */
    if (key == N_SSTHRESH && *out == 0x7fffffffffffffffLL) *out = SSTHRESH_INF;
    return 1;
}

/* A line read by the general rules: the canonical fields, plus the event kind, recovery and extra fields. */
typedef struct {
    Fields f;
    int kind;  /* index into events.EVENT_KINDS */
    int cc_upper;  /* the cc has upper-case letters: interned lower-cased */
    const char *rec_a, *rec_b;
    int nextra;
    const char *xk[MAX_EXTRA][2], *xv[MAX_EXTRA][2];
} General;

static const char *const KNOWN_KEYS[] = {"v", "conn", "t_us", "cc", "ev", "from", "to", "recovery", "trigger",
                                         "cwnd", "inflight", "ssthresh", "pacing_bps", "bw_bps", "min_rtt_us", "srtt_us"};
static const char *const KINDS[] = {"transition", "update", "metrics", "close"}; /* events.EVENT_KINDS */

static int is_sep(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

static int span_eq(const char *a, const char *b, const char *s) {
    size_t n = strlen(s);
    return (size_t)(b - a) == n && memcmp(a, s, n) == 0;
}

/* 1 if [p, e) is a line the contract allows, with its fields in *g; 0 if the Python reader must read it. */
static int parse_general(const char *p, const char *e, General *g) {
    const char *val[16][2] = {{0}};
    unsigned seen = 0;
    memset(g, 0, sizeof *g);
    while (p < e) {
        while (p < e && is_sep(*p)) p++;
        if (p == e) break;
        const char *k = p, *eq = NULL;
        while (p < e && !is_sep(*p)) { if (!eq && *p == '=') eq = p; p++; }
        if (!eq) return 0;  /* not key=value */
        int i;
        for (i = 0; i < 16; i++) if (span_eq(k, eq, KNOWN_KEYS[i])) break;
        if (i < 16) {
            if (seen & (1u << i)) return 0;  /* twice */
            seen |= 1u << i;
            val[i][0] = eq + 1; val[i][1] = p;
        } else {
            for (int j = 0; j < g->nextra; j++)
                if (g->xk[j][1] - g->xk[j][0] == eq - k && memcmp(g->xk[j][0], k, (size_t)(eq - k)) == 0) return 0;
            if (g->nextra == MAX_EXTRA) return 0;
            g->xk[g->nextra][0] = k; g->xk[g->nextra][1] = eq;
            g->xv[g->nextra][0] = eq + 1; g->xv[g->nextra][1] = p;
            g->nextra++;
        }
    }
#define HAS(i) (seen & (1u << (i)))
#define DASH(i) (val[i][1] - val[i][0] == 1 && *val[i][0] == '-')
#define EMPTY(i) (val[i][1] == val[i][0])
    Fields *f = &g->f;
    if (!HAS(0) || !span_eq(val[0][0], val[0][1], "1")) return 0;  /* v=1 */
    if (!HAS(1) || EMPTY(1) || DASH(1)) return 0;                   /* conn */
    if (!HAS(2) || !contract_number(val[2][0], val[2][1], N_TUS, &f->t_us)) return 0;
    if (!HAS(3) || EMPTY(3) || DASH(3)) return 0;                   /* cc: ASCII here (lower-cased) */
    for (const char *c = val[3][0]; c < val[3][1]; c++) {
        if (*c & 0x80) return 0;
        if (*c >= 'A' && *c <= 'Z') g->cc_upper = 1;
    }
    g->kind = 0;
    if (HAS(4)) {
        for (g->kind = 0; g->kind < 4; g->kind++) if (span_eq(val[4][0], val[4][1], KINDS[g->kind])) break;
        if (g->kind == 4) return 0;
    }
    if (!HAS(6) || EMPTY(6) || DASH(6)) {
        if (g->kind == 0) return 0;  /* a transition enters a state */
    } else { f->to_a = val[6][0]; f->to_b = val[6][1]; }
    f->conn_a = val[1][0]; f->conn_b = val[1][1];
    f->cc_a = val[3][0]; f->cc_b = val[3][1];
    if (HAS(5) && !EMPTY(5) && !DASH(5)) { f->from_a = val[5][0]; f->from_b = val[5][1]; }
    if (HAS(7) && !DASH(7)) { g->rec_a = val[7][0]; g->rec_b = val[7][1]; }
    if (HAS(8) && !DASH(8)) { f->trig_a = val[8][0]; f->trig_b = val[8][1]; }
    for (int i = 0; i < 7; i++) {
        if (!HAS(9 + i) || DASH(9 + i)) continue;
        if (!contract_number(val[9 + i][0], val[9 + i][1], i == 2 ? N_SSTHRESH : N_METRIC, &f->m[i])) return 0;
        f->has_m[i] = 1;
    }
#undef HAS
#undef DASH
#undef EMPTY
    return 1;
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
    if (v && n) memcpy(c->data + c->len, v, n); /* n == 0: data may still be NULL (memcpy's UB) */
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
typedef struct { Slot *slot; size_t mask; Py_ssize_t used, max; int gen; } Seen;

static int seen_init(Seen *s, Py_ssize_t bytes) {
    size_t n = 64;
    while (n < (1 << 13) && (Py_ssize_t)n * 16 < bytes) n <<= 1;
    s->slot = PyMem_Calloc(n, sizeof(Slot));
    s->mask = n - 1;
    s->used = 0;
    s->gen = 0;
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

/* intern() of [a, b) (ASCII) lower-cased, without the span cache (the bytes are not in the buffer): rare. */
static int intern_lower(PyObject *table, PyObject *names, const char *a, const char *b) {
    PyObject *key = PyBytes_FromStringAndSize(a, b - a);
    if (!key) return -3;
    char *k = PyBytes_AS_STRING(key);
    for (Py_ssize_t i = 0; i < b - a; i++) if (k[i] >= 'A' && k[i] <= 'Z') k[i] = (char)(k[i] + 32);
    PyObject *hit = PyDict_GetItemWithError(table, key);
    int id = -3;
    if (hit) id = (int)PyLong_AsLong(hit);
    else if (!PyErr_Occurred()) {
        PyObject *text = PyUnicode_DecodeASCII(k, b - a, "strict"), *num = PyLong_FromSsize_t(PyList_GET_SIZE(names));
        if (text && num && PyList_Append(names, text) == 0 && PyDict_SetItem(table, key, num) == 0) id = (int)PyLong_AsLong(num);
        Py_XDECREF(text);
        Py_XDECREF(num);
    }
    Py_DECREF(key);
    return id;
}

enum { C_LINE, C_CONN, C_CC, C_T, C_PREV, C_STATE, C_METRICS, C_TRIGGER, C_SRC, N_COLS };

/* The strings a second thread names (it may not touch the batch's table, a dict): spans into the buffer,
 * numbered in order of first appearance, with their uses; the merge gives them the table's ids in that order,
 * so the table's order of first appearance is the one a single thread gives. Memory from PyMem_Raw*. */
typedef struct WNames {
    const char **a;
    Py_ssize_t *n;
    long long *uses;
    int count, cap;
    int *slot; /* open addressing: 0 empty, else id + 1 */
    size_t mask;
} WNames;

static void wn_free(WNames *w) {
    PyMem_RawFree(w->a);
    PyMem_RawFree(w->n);
    PyMem_RawFree(w->uses);
    PyMem_RawFree(w->slot);
}

/* Whether [a, b) is printable ASCII (NULL: absent): a string wn_intern() and intern() both take. */
static int printable(const char *a, const char *b) {
    if (!a) return 1;
    for (; a < b; a++)
        if ((unsigned char)*a < 0x20 || (unsigned char)*a >= 0x7f) return 0;
    return 1;
}

/* The local id of [a, b); -2 for a byte outside printable ASCII (the single-thread path decides such a record),
 * -3 out of memory. */
static int wn_intern(WNames *w, const char *a, const char *b) {
    Py_ssize_t n = b - a;
    if (!printable(a, b)) return -2;
    if ((size_t)(w->count + 1) * 2 > w->mask + 1 || !w->slot) {
        size_t size = w->slot ? (w->mask + 1) * 2 : 64;
        int *slot = PyMem_RawCalloc(size, sizeof(int));
        if (!slot) return -3;
        for (int i = 0; i < w->count; i++) {
            size_t at = span_hash(w->a[i], w->n[i]) & (size - 1);
            while (slot[at]) at = (at + 1) & (size - 1);
            slot[at] = i + 1;
        }
        PyMem_RawFree(w->slot);
        w->slot = slot;
        w->mask = size - 1;
    }
    size_t at = span_hash(a, n) & w->mask;
    for (; w->slot[at]; at = (at + 1) & w->mask) {
        int i = w->slot[at] - 1;
        if (w->n[i] == n && memcmp(w->a[i], a, (size_t)n) == 0) return i;
    }
    if (w->count == w->cap) {
        int cap = w->cap ? w->cap * 2 : 16;
        const char **na = PyMem_RawRealloc(w->a, sizeof *na * (size_t)cap);
        if (na) w->a = na;
        Py_ssize_t *nn = PyMem_RawRealloc(w->n, sizeof *nn * (size_t)cap);
        if (nn) w->n = nn;
        long long *nu = PyMem_RawRealloc(w->uses, sizeof *nu * (size_t)cap);
        if (nu) w->uses = nu;
        if (!na || !nn || !nu) return -3;
        w->cap = cap;
    }
    w->a[w->count] = a;
    w->n[w->count] = n;
    w->uses[w->count] = 0;
    w->slot[at] = w->count + 1;
    return w->count++;
}

/* A Col of the scanner's side tables: from PyMem_Raw* (the second thread appends to its own). */
static int rcol_put(Col *c, const void *v, size_t n) {
    if (c->len + n > c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 1 << 12;
        while (cap < c->len + n) cap *= 2;
        char *d = PyMem_RawRealloc(c->data, cap);
        if (!d) return -1;
        c->data = d;
        c->cap = cap;
    }
    if (v && n) memcpy(c->data + c->len, v, n); /* n == 0: data may still be NULL (memcpy's UB) */
    c->len += n;
    return 0;
}

/* One call's output: the columns (C_SRC only for scan_files), rows the Python reader must parse, and the
 * kind, recovery and extra fields of rows that have them (side). */
typedef struct {
    PyObject *table, *names, *fallback, *side;
    const char *t;
    size_t tl;
    Col cols[N_COLS];
    Seen seen;
    long long rows;
} Scan;

/* One row of a contract line (ids: conn, cc, from, to, trigger) through put (col_put or rcol_put). */
static int put_row(Col *c, int (*put)(Col *, const void *, size_t), long long ln, const int *ids, const Fields *f) {
    long long ms[7];
    for (int i = 0; i < 7; i++) ms[i] = f->has_m[i] ? f->m[i] : (long long)(-0x7fffffffffffffffLL - 1);
    return put(&c[C_LINE], &ln, 8) || put(&c[C_CONN], &ids[0], 4) || put(&c[C_CC], &ids[1], 4) || put(&c[C_T], &f->t_us, 8) ||
           put(&c[C_PREV], &ids[2], 4) || put(&c[C_STATE], &ids[3], 4) || put(&c[C_METRICS], ms, sizeof ms) ||
           put(&c[C_TRIGGER], &ids[4], 4);
}

/* Contract lines of [pos, stop) into the columns (file number src when with_src), from line lineno: the
 * canonical ones by parse_canonical, the others by parse_general, whose event kind, recovery and extra
 * fields (when there are any) go to the side list as (row, kind, recovery id, extra tuple|None); lines the
 * contract refuses go to the fallback list. Returns the line number at stop, or -1 with an exception set. */
static Py_ssize_t scan_region(Scan *s, const char *pos, const char *stop, Py_ssize_t lineno, int src, int with_src) {
    const char *line_at = pos;
    while (pos < stop) {
        const char *hit, *eol;
        if (!next_line(pos, stop, s->t, s->tl, &hit, &eol, &lineno, &line_at)) break;
        Fields f;
        General g;
        PyObject *extra = NULL;
        int ids[5] = {-1, -1, -1, -1, -1}, ok = parse_canonical(hit + s->tl, eol, &f), i, general = 0, rec = -1;
        if (!ok && parse_general(hit + s->tl, eol, &g)) {
            f = g.f;
            ok = general = 1;
            if (g.nextra && !(extra = PyTuple_New(g.nextra))) return -1;
            for (i = 0; i < g.nextra && ok; i++) {  /* fields the contract does not name, as written */
                PyObject *kv = Py_BuildValue("(s#s#)", g.xk[i][0], (Py_ssize_t)(g.xk[i][1] - g.xk[i][0]), g.xv[i][0],
                                             (Py_ssize_t)(g.xv[i][1] - g.xv[i][0]));
                if (!kv) { PyErr_Clear(); ok = 0; break; }  /* not UTF-8: the Python reader says so */
                PyTuple_SET_ITEM(extra, i, kv);
            }
            if (ok && g.rec_a) {
                rec = intern(s->table, s->names, g.rec_a, g.rec_b, &s->seen);
                if (rec == -3) { Py_XDECREF(extra); return -1; }
                if (rec == -2) ok = 0;
            }
        }
        if (ok) {
            const char *spans[5][2] = {{f.conn_a, f.conn_b}, {f.cc_a, f.cc_b}, {f.from_a, f.from_b}, {f.to_a, f.to_b}, {f.trig_a, f.trig_b}};
            for (i = 0; i < 5 && ok; i++) {
                ids[i] = i == 1 && general && g.cc_upper ? intern_lower(s->table, s->names, f.cc_a, f.cc_b)
                                                         : intern(s->table, s->names, spans[i][0], spans[i][1], &s->seen);
                if (ids[i] == -3) { Py_XDECREF(extra); return -1; }
                if (ids[i] == -2) ok = 0;
            }
        }
        if (ok && general && (g.kind || rec >= 0 || extra)) {  /* what the columns do not hold: (row, kind, recovery, extra) */
            PyObject *item = Py_BuildValue("(LiiO)", s->rows, g.kind, rec, extra ? extra : Py_None);
            if (!item || PyList_Append(s->side, item) < 0) { Py_XDECREF(item); Py_XDECREF(extra); return -1; }
            Py_DECREF(item);
        }
        Py_XDECREF(extra);
        long long ln = (long long)lineno;
        if (!ok) {  /* the Python reader parses it (or reports it) and fills this row */
            PyObject *item = Py_BuildValue("(Lny#)", s->rows, lineno, hit + s->tl, (Py_ssize_t)(eol - hit - (Py_ssize_t)s->tl));
            if (!item || PyList_Append(s->fallback, item) < 0) { Py_XDECREF(item); return -1; }
            Py_DECREF(item);
            for (i = 0; i < 5; i++) ids[i] = -1;
            f.t_us = 0;
            for (i = 0; i < 7; i++) f.has_m[i] = 0;
        }
        if (put_row(s->cols, col_put, ln, ids, &f) || (with_src && col_put(&s->cols[C_SRC], &src, 4))) return -1;
        s->rows++;
        pos = eol;
    }
    return lineno + count_nl(line_at, stop);
}

/* ---- Two threads for a long window of a text log ----
 *
 * scan_columns() hands the part of a window after the first line start past its middle to a second thread
 * (a pthread, never holding the GIL) while this thread scans the first part as scan_region() does. The second
 * thread reads the lines it can decide without Python into columns of its own (PyMem_Raw* memory), its strings
 * numbered in order of first appearance (WNames): canonical lines, and general ones with no event kind, recovery
 * or extra field and a lower-case cc, whose strings are printable ASCII. It stops at the first other line (its
 * tag: reading goes on there, here) and never interns part of a line. The merge names its strings in the table
 * in their order, so ids and the table's order are one thread's; line numbers are carried from the first part's
 * end. A second part not begun when the first is done is read here (unless the split is negative: tests). */
typedef struct {
    Col cols[C_SRC];
    WNames names;
    const char *p, *e, *stop, *t;
    size_t tl;
    Py_ssize_t lines; /* newlines in [p, stop) */
    long long rows;
    int status; /* 0 read to e, 1 stopped at a line left to the first thread, -1 out of memory */
    int claim;  /* W_PENDING, then W_RUNNING (the second thread took it) or W_TAKEN_BACK */
} LWork;

enum { W_PENDING, W_RUNNING, W_TAKEN_BACK };

/* A second thread's part claimed from W_PENDING: by it (W_RUNNING) or back by the first (W_TAKEN_BACK). 1 if won. */
static int claim(int *at, int to) {
    int pending = W_PENDING;
    return __atomic_compare_exchange_n(at, &pending, to, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

static void lwork_free(LWork *k) {
    for (int i = 0; i < C_SRC; i++) PyMem_RawFree(k->cols[i].data);
    wn_free(&k->names);
    PyMem_RawFree(k);
}

static void *lwork_main(void *arg) {
    LWork *k = (LWork *)arg;
    if (!claim(&k->claim, W_RUNNING)) {
        lwork_free(k); /* taken back: nothing read; the copy is this thread's to free */
        return NULL;
    }
    const char *pos = k->p, *line_at = k->p, *hit, *eol;
    Py_ssize_t lineno = 0;
    k->status = 0;
    while (pos < k->e && next_line(pos, k->e, k->t, k->tl, &hit, &eol, &lineno, &line_at)) {
        Fields f;
        General g;
        int ok = parse_canonical(hit + k->tl, eol, &f);
        if (!ok) {
            ok = parse_general(hit + k->tl, eol, &g) && !g.kind && !g.rec_a && !g.nextra && !g.cc_upper;
            if (ok) f = g.f;
        }
        const char *spans[5][2] = {{f.conn_a, f.conn_b}, {f.cc_a, f.cc_b}, {f.from_a, f.from_b}, {f.to_a, f.to_b}, {f.trig_a, f.trig_b}};
        int ids[5], i;
        for (i = 0; i < 5 && ok; i++) ok = printable(spans[i][0], spans[i][1]);
        if (!ok) { /* the first thread reads it (and what follows) */
            k->status = 1;
            k->stop = hit;
            k->lines = lineno;
            return NULL;
        }
        for (i = 0; i < 5; i++) {
            ids[i] = spans[i][0] ? wn_intern(&k->names, spans[i][0], spans[i][1]) : -1;
            if (ids[i] < -1) break; /* -3 out of memory (-2 cannot be: printable) */
        }
        if (i < 5 || put_row(k->cols, rcol_put, (long long)lineno, ids, &f)) {
            k->status = -1;
            return NULL;
        }
        k->rows++;
        pos = eol;
    }
    k->stop = k->e;
    k->lines = lineno + count_nl(line_at, k->e);
    return NULL;
}

/* The second thread's rows after s's: its strings interned in their order, its line numbers from base. */
static int lwork_merge(Scan *s, LWork *k, Py_ssize_t base) {
    WNames *nm = &k->names;
    int *ids = PyMem_Malloc(sizeof(int) * (size_t)(nm->count ? nm->count : 1));
    if (!ids) { PyErr_NoMemory(); return -1; }
    for (int i = 0; i < nm->count; i++) {
        ids[i] = intern(s->table, s->names, nm->a[i], nm->a[i] + nm->n[i], &s->seen);
        if (ids[i] < 0) {
            if (ids[i] == -2) PyErr_SetString(PyExc_SystemError, "log scanner: a string not UTF-8 from the second thread");
            PyMem_Free(ids);
            return -1;
        }
    }
    long long *line = (long long *)k->cols[C_LINE].data;
    int *str[5] = {(int *)k->cols[C_CONN].data, (int *)k->cols[C_CC].data, (int *)k->cols[C_PREV].data,
                   (int *)k->cols[C_STATE].data, (int *)k->cols[C_TRIGGER].data};
    for (long long r = 0; r < k->rows; r++) {
        line[r] += base;
        for (int j = 0; j < 5; j++)
            if (str[j][r] >= 0) str[j][r] = ids[str[j][r]];
    }
    PyMem_Free(ids);
    for (int c = 0; c < C_SRC; c++)
        if (k->cols[c].len && col_put(&s->cols[c], k->cols[c].data, k->cols[c].len)) return -1;
    s->rows += k->rows;
    return 0;
}

/* scan_region() over [p, e), in two threads when split != 0 and the window holds at least 2 * |split| bytes. */
static Py_ssize_t scan_split(Scan *s, const char *p, const char *e, Py_ssize_t lineno, Py_ssize_t split) {
    Py_ssize_t least = split < 0 ? -split : split;
    const char *mid = NULL;
    LWork *k = NULL;
    pthread_t th;
    if (least > 0 && e - p >= 2 * least) {
        const char *half = p + (e - p) / 2;
        mid = memchr(half, '\n', (size_t)(e - half));
        if (mid && ++mid < e && (k = PyMem_RawCalloc(1, sizeof(LWork)))) {
            k->p = mid, k->e = e, k->t = s->t, k->tl = s->tl;
            if (pthread_create(&th, NULL, lwork_main, k)) {
                lwork_free(k);
                k = NULL;
            }
        }
    }
    if (!k) return scan_region(s, p, e, lineno, 0, 0);
    Py_ssize_t base = scan_region(s, p, mid, lineno, 0, 0);
    if ((split > 0 || base < 0) && claim(&k->claim, W_TAKEN_BACK)) {
        pthread_detach(th); /* it has not begun: its part is read here */
        return base < 0 ? -1 : scan_region(s, mid, e, base, 0, 0);
    }
    Py_BEGIN_ALLOW_THREADS
    pthread_join(th, NULL);
    Py_END_ALLOW_THREADS
    if (base < 0 || k->status < 0) { /* an error in the first part, or out of memory in the second: read it here */
        lwork_free(k);
        return base < 0 ? -1 : scan_region(s, mid, e, base, 0, 0);
    }
    if (lwork_merge(s, k, base) < 0) {
        lwork_free(k);
        return -1;
    }
    const char *stop = k->stop;
    Py_ssize_t at = base + k->lines;
    int status = k->status;
    lwork_free(k);
    return status == 0 ? at : scan_region(s, stop, e, at, 0, 0);
}

/* The default split: parts of 1 MiB and more (windows of 2 MiB: the 4 MiB windows of a large log) when this process
 * may run on two CPUs or more; else none. Starting and joining the thread costs about what a text log's 0.1-0.2 MiB
 * costs to scan: windows of 0.5-1 MiB split at 128 KiB were slower than one thread (88 against 140 us, 179 against
 * 195 us; 4 MiB: 915 against 737 us; best of 40, load 0.5). */
#define LOG_SPLIT_MIN (1 << 20)

static Py_ssize_t default_split(void) {
    cpu_set_t cpus;
    return sched_getaffinity(0, sizeof cpus, &cpus) == 0 && CPU_COUNT(&cpus) >= 2 ? LOG_SPLIT_MIN : 0;
}

/* (columns as bytes, fallback list, last, side list) of a finished scan; NULL on error. */
static PyObject *scan_result(Scan *s, int ncols, PyObject *last) {
    PyObject *out = last ? PyTuple_New(ncols) : NULL;
    if (!out) { Py_XDECREF(last); return NULL; }
    for (int i = 0; i < ncols; i++) {
        PyObject *b = PyBytes_FromStringAndSize(s->cols[i].data ? s->cols[i].data : "", (Py_ssize_t)s->cols[i].len);
        if (!b) { Py_DECREF(out); Py_DECREF(last); return NULL; }
        PyTuple_SET_ITEM(out, i, b);
    }
    return Py_BuildValue("(NONO)", out, s->fallback, last, s->side);
}

static void scan_free(Scan *s) {
    for (int i = 0; i < N_COLS; i++) PyMem_Free(s->cols[i].data);
    PyMem_Free(s->seen.slot);
    Py_XDECREF(s->fallback);
    Py_XDECREF(s->side);
}

static PyObject *scan_columns(PyObject *self, PyObject *args) {
    Py_buffer buf, tag;
    Py_ssize_t start, end, lineno, split = PY_SSIZE_T_MIN;
    Scan s = {0};
    PyObject *res = NULL;
    if (!PyArg_ParseTuple(args, "y*nny*nO!O!|n", &buf, &start, &end, &tag, &lineno, &PyDict_Type, &s.table, &PyList_Type, &s.names,
                          &split))
        return NULL;
    if (split == PY_SSIZE_T_MIN) split = default_split();
    clamp_window(buf.len, &start, &end);
    s.t = (const char *)tag.buf;
    s.tl = (size_t)tag.len;
    const char *base = (const char *)buf.buf;
    if (seen_init(&s.seen, end - start) == 0 && (s.fallback = PyList_New(0)) != NULL && (s.side = PyList_New(0)) != NULL) {
        lineno = scan_split(&s, base + start, base + end, lineno, split);
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
    if (seen_init(&s.seen, buf.len) < 0 || !(s.fallback = PyList_New(0)) || !(s.side = PyList_New(0))) goto out;
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

/* The escape whose backslash is at p: its last byte, or NULL with *why (a bad escape) or without (cut at e). */
static const char *escape_end(const char *p, const char *e, const char **why) {
    *why = NULL;
    if (++p >= e) return NULL;
    unsigned char c = (unsigned char)*p;
    if (c == 'u') {
        for (int i = 0; i < 4; i++) {
            if (++p >= e) return NULL;
            c = (unsigned char)*p;
            if (!((c >= '0' && c <= '9') || ((c | 32) >= 'a' && (c | 32) <= 'f'))) { *why = "a bad \\u escape"; return NULL; }
        }
    } else if (!c || !strchr("\"\\/bfnrt", c)) {
        *why = "a bad escape";
        return NULL;
    }
    return p;
}

/* A JSON string at p ('"'): its end (after the quote) or NULL; *plain = no escape, printable ASCII only.
 * Non-ASCII bytes are refused outright (no UTF-8 check here): such a file goes to the Python reader. */
static const char *jstring(const char *p, const char *e, int *plain) {
    const char *why;
    *plain = 1;
    for (p++; p < e; p++) {
#ifdef __SSE2__
        /* 16 bytes at a time up to the first that needs a look: '"', '\\', a control byte or a byte >= 0x7f
         * (signed compare: bytes >= 0x80 are negative, so "< 0x20" takes them too) */
        while (e - p >= 16) {
            __m128i v = _mm_loadu_si128((const __m128i *)p);
            __m128i hit = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')), _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'))),
                                       _mm_or_si128(_mm_cmplt_epi8(v, _mm_set1_epi8(0x20)), _mm_cmpeq_epi8(v, _mm_set1_epi8(0x7f))));
            unsigned int mask = (unsigned int)_mm_movemask_epi8(hit);
            if (mask) {
                p += __builtin_ctz(mask);
                break;
            }
            p += 16;
        }
        if (p >= e) break;
#endif
        unsigned char c = (unsigned char)*p;
        if (c == '"') return p + 1;
        if (c < 0x20 || c >= 0x7f) return NULL;
        if (c == '\\') {
            *plain = 0;
            if (!(p = escape_end(p, e, &why))) return NULL;
        }
    }
    return NULL;
}

/* A JSON number at p (RFC 8259 grammar), checked and, in the same pass, read as exact_strtod() reads it: the
 * decimal mantissa's first 19 significant digits and its power of ten (slow: more digits, or a huge exponent:
 * exact_strtod() then reads the text). num_value() gives exact_strtod()'s double without reading the text again. */
typedef struct { unsigned long long m; int e10; unsigned char neg, integer, slow, expo; } JNum; /* expo: an exponent */

static const char *digit_run(const char *p, const char *e) {
    while (p < e && (unsigned)(*p - '0') < 10) p++;
    return p;
}

/* The digits that start the 8 bytes at p (fewer than 8: the run ends there) and their value: the bytes checked and
 * read together (SWAR), not one by one. A byte is a digit when its high nibble is 3 and its low one at most 9; a
 * carry out of the "+ 6" only leaves a byte that is not a digit, for the bytes after it. */
static inline int digits8(const char *p, unsigned long long *v) {
    unsigned long long x, t;
    memcpy(&x, p, 8);
    t = x ^ 0x3030303030303030ULL;
    unsigned long long other = (t | (t + 0x0606060606060606ULL)) & 0xF0F0F0F0F0F0F0F0ULL;
    int n = other ? __builtin_ctzll(other) >> 3 : 8;
    if (!n) return 0;
    t <<= 8 * (8 - n); /* (little-endian) the run's digits last, after zeros: leading zeros add nothing */
    t = t * 10 + (t >> 8);
    t = ((t & 0x000000FF000000FFULL) * (100 + (1000000ULL << 32)) + ((t >> 16) & 0x000000FF000000FFULL) * (1 + (10000ULL << 32))) >> 32;
    *v = (unsigned int)t;
    return n;
}
static const unsigned long long P10U[9] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000};
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define SWAR_DIGITS 1
#else
#define SWAR_DIGITS 0
#endif

static const char *jnumber_m(const char *p, const char *e, JNum *n) {
    const char *s = p;
    unsigned long long m = 0, v = 0;
    int digits = 0, e10 = 0, slow = 0, k;
    n->neg = 0;
    n->integer = 1;
    n->expo = 0;
    if (p < e && *p == '-') { n->neg = 1; p++; }
    if (p >= e || *p < '0' || *p > '9') return NULL;
    /* A run of digits that fits 19 with those before it is read without a check per digit: the same m (a
     * leading zero adds nothing to m = 0) and no slow; only longer runs take the careful loops. */
    const char *q;
    if (*p == '0') p++;
    else if (SWAR_DIGITS && e - p >= 8 && (k = digits8(p, &v)) < 8) { /* most numbers: one step */
        digits = k;
        m = v;
        p += k;
    } else if ((q = digit_run(p, e)) - p <= 19) {
        digits = (int)(q - p);
        for (; p < q; p++) m = m * 10 + (unsigned)(*p - '0');
    } else
        for (; p < e && *p >= '0' && *p <= '9'; p++) {
            if (digits >= 19) slow = 1;
            else { m = m * 10 + (unsigned)(*p - '0'); digits++; }
        }
    if (p < e && *p == '.') {
        n->integer = 0; p++;
        if (p >= e || *p < '0' || *p > '9') return NULL;
        if (SWAR_DIGITS && e - p >= 8 && (k = digits8(p, &v)) < 8 && k <= 19 - digits) {
            e10 = -k;
            m = m * P10U[k] + v;
            p += k;
        } else if ((q = digit_run(p, e)) - p <= 19 - digits) {
            e10 = -(int)(q - p);
            for (; p < q; p++) m = m * 10 + (unsigned)(*p - '0');
        } else
            for (; p < e && *p >= '0' && *p <= '9'; p++) {
                if (m || *p != '0') {
                    if (digits >= 19) slow = 1;
                    else { m = m * 10 + (unsigned)(*p - '0'); digits++; }
                }
                e10--;
            }
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        int sign = 1, x = 0;
        n->integer = 0, n->expo = 1; p++;
        if (p < e && (*p == '+' || *p == '-')) sign = *p++ == '-' ? -1 : 1;
        if (p >= e || *p < '0' || *p > '9') return NULL;
        for (; p < e && *p >= '0' && *p <= '9'; p++) {
            if (x > 100000) slow = 1;
            else x = x * 10 + (*p - '0');
        }
        e10 += sign * x;
    }
    if (p - s > 30) return NULL; /* long numbers: the Python reader's guards decide */
    n->m = m;
    n->e10 = e10;
    n->slow = (unsigned char)slow;
    return p;
}

/* The digits that start [p, e): their end (8 bytes at a time, as digits8() tells them, where 8 can be read). */
static const char *digits_end(const char *p, const char *e) {
#if SWAR_DIGITS
    for (; e - p >= 8; p += 8) {
        unsigned long long x, t;
        memcpy(&x, p, 8);
        t = x ^ 0x3030303030303030ULL;
        unsigned long long other = (t | (t + 0x0606060606060606ULL)) & 0xF0F0F0F0F0F0F0F0ULL;
        if (other) return p + (__builtin_ctzll(other) >> 3);
    }
#endif
    return digit_run(p, e);
}

/* jnumber_m()'s check without its reading, for a number whose value is not needed: the same end (or NULL), and
 * n's neg, integer (no fraction, no exponent) and expo; not m, e10 or slow (jnumber_m() reads them). */
static inline __attribute__((always_inline)) const char *jnumber(const char *p, const char *e, JNum *n) {
    const char *s = p;
    n->neg = 0, n->integer = 1, n->expo = 0;
    if (p < e && *p == '-') { n->neg = 1; p++; }
    if (p >= e || *p < '0' || *p > '9') return NULL;
    p = *p == '0' ? p + 1 : digits_end(p, e);
    if (p < e && *p == '.') {
        n->integer = 0; p++;
        if (p >= e || *p < '0' || *p > '9') return NULL;
        p = digits_end(p, e);
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        n->integer = 0, n->expo = 1; p++;
        if (p < e && (*p == '+' || *p == '-')) p++;
        if (p >= e || *p < '0' || *p > '9') return NULL;
        p = digit_run(p, e);
    }
    if (p - s > 30) return NULL;
    return p;
}

/* exact_strtod() of the number [s.a, s.b) that jnumber_m() read into n. */
static double num_value(const JNum *n, Span s) {
    if (!EXACT_FAST_PATH || n->slow) return exact_strtod(s.a, (size_t)(s.b - s.a));
    if (n->m == 0) return n->neg ? -0.0 : 0.0;
    if (n->m > (1ULL << 53) || n->e10 < -22 || n->e10 > 22) return exact_strtod(s.a, (size_t)(s.b - s.a));
    double r = n->e10 < 0 ? (double)n->m / POW10[-n->e10] : (double)n->m * POW10[n->e10];
    return n->neg ? -r : r;
}

/* A number jnumber() checked, read now (the whole span: it checked so). */
static JNum span_read(Span s) {
    JNum n;
    jnumber_m(s.a, s.b, &n);
    return n;
}

static double span_value(Span s) {
    JNum n = span_read(s);
    return num_value(&n, s);
}

static int num_start(const char *p, const char *e) { return p < e && (*p == '-' || (*p >= '0' && *p <= '9')); }

/* Any JSON value at p: its end, or NULL if it is not (strict) JSON or nests deeper than 64. */
static const char *jvalue(const char *p, const char *e, int depth, int *type) {
    int plain;
    JNum num;
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
    default: *type = J_NUM; return jnumber(p, e, &num);
    }
}

/* Whether the span's bytes are word (compared as they go: no strlen per call; a span holds no NUL where it is
 * asked, and word's NUL differs from any byte it could hold there). */
static int span_is(Span s, const char *word) {
    const char *a = s.a;
    for (; a < s.b; a++, word++)
        if (*a != *word) return 0;
    return !*word;
}

/* The key sets a record's members are matched against (REC_KEYS, STATE_KEYS, METRIC_KEYS, TIMER_KEYS below),
 * indexed once at import: each key's length and, per first byte, which keys start with it. */
#define MAX_KEYS 16
#define KEY_WORDS 3 /* keys up to 23 bytes and their closing quote, compared 8 bytes at a time */
typedef struct {
    const char *const *w;
    int n;
    unsigned char len[MAX_KEYS];
    unsigned short first[128];
    unsigned long long word[MAX_KEYS][KEY_WORDS], mask[MAX_KEYS][KEY_WORDS]; /* the key's bytes and '"' */
} KeyIndex;
static KeyIndex key_index[4];

static void key_index_add(int j, const char *const *keys, int n) {
    KeyIndex *k = &key_index[j];
    k->w = keys;
    k->n = n;
    for (int i = 0; i < n && i < MAX_KEYS; i++) {
        size_t len = strlen(keys[i]);
        k->len[i] = (unsigned char)len;
        k->first[(unsigned char)keys[i][0] & 127] |= (unsigned short)(1u << i);
        unsigned char text[8 * KEY_WORDS] = {0}, on[8 * KEY_WORDS] = {0};
        for (size_t b = 0; b <= len && b < sizeof text; b++) {
            text[b] = b < len ? (unsigned char)keys[i][b] : '"';
            on[b] = 0xff;
        }
        memcpy(k->word[i], text, sizeof text);
        memcpy(k->mask[i], on, sizeof on);
    }
}

/* Which of keys is the JSON string at p ('"'), read as the key's bytes and its closing quote: the string's end
 * (after the quote) with *at its index, or NULL (*at nkeys) when none is written so. A key holds neither '"',
 * '\\' nor a control byte, so a string written so is the key jstring() would read, plain; any other string
 * (not a key, or a key with an escape) is left to jstring(). Most members of a record are wanted keys: they are
 * found here, among the keys with the string's first byte, without a second pass over their bytes. */
static const char *key_at(const char *p, const char *e, const char *const *keys, int nkeys, int *at) {
    *at = nkeys;
    if (e - p < 2) return NULL;
    const KeyIndex *k = NULL;
    for (int j = 0; j < 4; j++)
        if (key_index[j].w == keys) k = &key_index[j];
    if (k && (unsigned char)p[1] < 128) {
        for (unsigned m = k->first[(unsigned char)p[1]]; m; m &= m - 1) {
            int i = __builtin_ctz(m);
            size_t n = k->len[i], words = n / 8 + 1; /* the words that hold the key and its quote */
            if ((size_t)(e - p) >= 1 + 8 * words && words <= KEY_WORDS) {
                unsigned long long x, diff = 0;
                for (size_t w = 0; w < words; w++) {
                    memcpy(&x, p + 1 + 8 * w, 8);
                    diff |= (x & k->mask[i][w]) ^ k->word[i][w];
                }
                if (!diff) {
                    *at = i;
                    return p + n + 2;
                }
            } else if ((size_t)(e - p) >= n + 2 && p[1 + n] == '"' && memcmp(p + 1, keys[i], n) == 0) {
                *at = i;
                return p + n + 2;
            }
        }
        return NULL;
    }
    for (int i = 0; i < nkeys; i++) { /* (a key set not indexed) */
        const char *w = keys[i], *q = p + 1;
        if (*w != *q) continue;
        for (; *w && q < e && *q == *w; w++, q++) {}
        if (!*w && q < e && *q == '"') {
            *at = i;
            return q + 1;
        }
    }
    return NULL;
}

/* What the members of one kind of object were written as last time: per member position, the key's bytes with
 * their quotes and the colon after them (after the member before it: its comma too), and which of the keys it is
 * (nkeys: another key). Stacks write an event's members in one order with the same keys each time (quic-go's
 * metrics: 7 members, every time): a member whose bytes at the cursor are those is that key again, known without
 * the key matcher (key_at, jstring) or the white space around the comma and colon. Learnt from the matcher's
 * answer for the same bytes (only where no white space stood there), so a guess that holds gives what the matcher
 * would; one that fails costs one comparison. Each thread's scanner has its own. */
#define G_MEMBERS 8
#define G_WORDS 4 /* a comma, a key, its quotes and the colon: up to 32 bytes */
typedef struct {
    unsigned char words[G_MEMBERS], n[G_MEMBERS]; /* words 0: nothing learnt there */
    signed char at[G_MEMBERS];
    unsigned long long text[G_MEMBERS][G_WORDS], mask[G_MEMBERS][G_WORDS];
} Guess;

/* After the colon of member j's key at p ('"') when it is written as learnt (*at: which key), else NULL. */
static inline const char *guess_key(const Guess *g, int j, const char *p, const char *e, int *at) {
    if (!g || j >= G_MEMBERS || !g->words[j] || (size_t)(e - p) < 8u * g->words[j]) return NULL;
    unsigned long long x, diff = 0;
    for (int w = 0; w < g->words[j]; w++) {
        memcpy(&x, p + 8 * w, 8);
        diff |= (x & g->mask[j][w]) ^ g->text[j][w];
    }
    if (diff) return NULL;
    *at = g->at[j];
    return p + g->n[j];
}

/* Member j's key [p, colon] (its quotes and the colon right after) is key at (nkeys: another plain key). */
static void guess_learn(Guess *g, int j, const char *p, const char *colon, int at) {
    size_t n = (size_t)(colon + 1 - p);
    if (!g || j >= G_MEMBERS) return;
    g->words[j] = 0;
    if (n > 8 * G_WORDS) return;
    unsigned char text[8 * G_WORDS] = {0}, on[8 * G_WORDS] = {0};
    memcpy(text, p, n);
    memset(on, 0xff, n);
    memcpy(g->text[j], text, sizeof text);
    memcpy(g->mask[j], on, sizeof on);
    g->n[j] = (unsigned char)n;
    g->at[j] = (signed char)at;
    g->words[j] = (unsigned char)((n + 7) / 8);
}

/* The event names read last (a few: direct-mapped by two of their bytes), each with its role_of(): a name written
 * with the same bytes, quotes included, is a plain string with that role, known without jstring() or role_of(). */
#define N_NAMES 8
#define N_WORDS 5 /* a name and its quotes: up to 40 bytes */
typedef struct {
    unsigned char words, n; /* words 0: none */
    signed char role;
    unsigned long long text[N_WORDS], mask[N_WORDS];
} NameGuess;

typedef struct {
    Guess set[4]; /* per key set (key_index) */
    NameGuess name[N_NAMES];
} Guesses;

static inline NameGuess *name_slot(Guesses *g, const char *p, const char *e) {
    return e - p > 12 ? &g->name[((unsigned char)p[10] ^ (unsigned char)p[12]) & (N_NAMES - 1)] : NULL;
}

/* The end of the name string at p ('"') and its role (*role) when it is written as one learnt, else NULL. */
static inline const char *guess_name(Guesses *g, const char *p, const char *e, int *role) {
    NameGuess *ng = name_slot(g, p, e);
    if (!ng || !ng->words || (size_t)(e - p) < 8u * ng->words) return NULL;
    unsigned long long x, diff = 0;
    for (int w = 0; w < ng->words; w++) {
        memcpy(&x, p + 8 * w, 8);
        diff |= (x & ng->mask[w]) ^ ng->text[w];
    }
    if (diff) return NULL;
    *role = ng->role;
    return p + ng->n;
}

/* The plain name string [p, end) (its quotes) has role_of() role. */
static void name_learn(Guesses *g, const char *p, const char *end, const char *e, int role) {
    NameGuess *ng = name_slot(g, p, e);
    size_t n = (size_t)(end - p);
    if (!ng) return;
    ng->words = 0;
    if (n > 8 * N_WORDS) return;
    unsigned char text[8 * N_WORDS] = {0}, on[8 * N_WORDS] = {0};
    memcpy(text, p, n);
    memset(on, 0xff, n);
    memcpy(ng->text, text, sizeof text);
    memcpy(ng->mask, on, sizeof on);
    ng->n = (unsigned char)n;
    ng->role = (signed char)role;
    ng->words = (unsigned char)((n + 7) / 8);
}

/* Keys of an event that qlog._event_parts reads in place of time/name (a record holding one goes to Python). */
static const char *const REC_ALT[5] = {"event", "event_type", "category", "relative_time", "delta_time"};

/* One object's members: for each of `keys`, the value's span and type (a->NULL: absent); the object's end
 * (after its '}'), or NULL if the object is not strict JSON, a wanted key comes twice or is written with an
 * escape (it might be one of them), or a key is not among `keys` and strict is 1, or (strict 2: an event's
 * members, as qlog._event_parts reads them) is one it reads instead (REC_ALT) or not lower-case ASCII (it
 * lower-cases every key then). The wanted numbers go to nums (if given): read (read 1) or only checked (0:
 * jnumber()). g: the guesses for these keys (or NULL). */
static const char *jmembers_at(const char *p, const char *e, const char *const *keys, int nkeys, Span *vals, int *types,
                               JNum *nums, int read, int strict, int depth, Guess *g) {
    int plain, t, i;
    for (i = 0; i < nkeys; i++) { vals[i].a = vals[i].b = NULL; types[i] = J_BAD; }
    if (p >= e || *p != '{') return NULL;
    p = skip_jws(p + 1, e);
    if (p < e && *p == '}') return p + 1;
    for (int j = 0;; j++) {
        /* p: the first key (j 0) or where the value before ends; a member guessed from there: its key, its
         * quotes and colon, after the comma when j > 0 (learnt where nothing stood between them) */
        const char *at = p, *ka, *kb, *q;
        Span key;
        if ((q = guess_key(g, j, at, e, &i))) {
            key.a = at + 1 + (j > 0), key.b = q - 2;
            p = q;
        } else {
            if (j) {
                p = skip_jws(p, e);
                if (p < e && *p == '}') return p + 1;
                if (p >= e || *p != ',') return NULL;
                p = skip_jws(p + 1, e);
            }
            if (p >= e || *p != '"') return NULL;
            ka = p + 1;
            if (!(kb = key_at(p, e, keys, nkeys, &i)) && (!(kb = jstring(p, e, &plain)) || !plain)) return NULL;
            key.a = ka, key.b = kb - 1;
            p = skip_jws(kb, e);
            if (p >= e || *p != ':') return NULL;
            if (p == kb && ka - 1 == at + (j > 0)) guess_learn(g, j, at, p, i);
            p++;
        }
        p = skip_jws(p, e);
        const char *va = p;
        if (nums && i < nkeys && num_start(p, e)) { /* a wanted number: checked and read in one pass (or checked) */
            if (!(p = read ? jnumber_m(p, e, &nums[i]) : jnumber(p, e, &nums[i]))) return NULL;
            t = J_NUM;
        } else if (!(p = jvalue(p, e, depth + 1, &t))) return NULL;
        if (i < nkeys) {
            if (vals[i].a) return NULL;
            vals[i].a = va; vals[i].b = p; types[i] = t;
        } else if (strict == 1) return NULL;
        else if (strict == 2) { /* another member (quinn's "group_id"): passed over, as the Python reader does */
            for (const char *c = key.a; c < key.b; c++) if ((*c >= 'A' && *c <= 'Z') || (*c & 0x80)) return NULL;
            for (i = 0; i < 5; i++) if (span_is(key, REC_ALT[i])) return NULL;
        }
        if (p < e && *p == '}') return p + 1; /* (else the next member's guess, or the separator read above) */
    }
}

/* jmembers_at over the whole of [p, e): 1 if the object (and only white space after it) fills it. */
static int jmembers(const char *p, const char *e, const char *const *keys, int nkeys, Span *vals, int *types, JNum *nums,
                    int strict, int depth) {
    const char *q = jmembers_at(p, e, keys, nkeys, vals, types, nums, 1, strict, depth, NULL);
    return q && skip_jws(q, e) == e;
}

static const char *const REC_KEYS[3] = {"time", "name", "data"};
static const char *const STATE_KEYS[6] = {"new", "new_state", "state", "old", "old_state", "trigger"};
/* qlog._METRIC_KEYS: (first key, keys) per field cwnd, inflight, ssthresh, pacing, min_rtt, smoothed_rtt; then
 * the AUX keys (qlog.AUX_KEYS: what the metric-state reader reads besides, kept as written). */
#define N_AUX 3
static const char *const METRIC_KEYS[10 + N_AUX] = {"congestion_window", "cwnd", "current_cwnd", "bytes_in_flight", "inflight",
                                                    "ssthresh", "slow_start_threshold", "pacing_rate", "min_rtt", "smoothed_rtt",
                                                    "latest_rtt", "packets_in_flight", "pto_count"};
static const int METRIC_FIRST[7] = {0, 3, 5, 7, 8, 9, 10};

static int ci_at(const char *p, const char *e, const char *w, size_t n) {
    if ((size_t)(e - p) < n) return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c >= 'A' && c <= 'Z') c |= 32;
        if (c != (unsigned char)w[i]) return 0;
    }
    return 1;
}

/* Whether "congestion", "cc_state" or "metric" (any case) starts at p. */
static int wanted_at(const char *p, const char *e) {
    return (((unsigned char)*p | 32) == 'm') ? ci_at(p, e, "metric", 6) : ci_at(p, e, "congestion", 10) || ci_at(p, e, "cc_state", 8);
}

/* Whether one of qlog.SOFT_RE's words (packet_lost, loss_timer, spurious_loss) holds the "los" at q:
 * each holds "los" at a fixed place (7, 0 and 9), so every match of one is found from a match of "los". */
static int soft_at(const char *p, const char *q, const char *e) {
    if (e - q < 3 || q[1] != 'o' || q[2] != 's') return 0;
    return (q - p >= 7 && e - (q - 7) >= 11 && memcmp(q - 7, "packet_lost", 11) == 0) ||
           (e - q >= 10 && memcmp(q, "loss_timer", 10) == 0) ||
           (q - p >= 9 && e - (q - 9) >= 13 && memcmp(q - 9, "spurious_loss", 13) == 0);
}

enum { R_PACKET = 0, R_SOFT = 1, R_WANTED = 2 };

static int pop16(unsigned int x) { /* bits set in a 16-bit mask */
    x = x - ((x >> 1) & 0x5555u);
    x = (x & 0x3333u) + ((x >> 2) & 0x3333u);
    x = (x + (x >> 4)) & 0x0f0fu;
    return (int)((x + (x >> 8)) & 0x1fu);
}

/* The record that starts at p: its end (the first sep byte, or e when there is none), the newlines before that
 * end (*nl) and its class (*cls): R_WANTED if qlog._WANTED (congestion|metric|cc_state, any case) matches
 * anywhere in it (such records are decoded), else R_SOFT if qlog.SOFT_RE (packet_lost|loss_timer|spurious_loss)
 * does (a loss or timer record, if it reads as one), else R_PACKET (only its time is kept). One pass over the
 * record does all three, 16 bytes at a time with SSE2 (64 with AVX2 where the CPU has it and the scanner's simd is
 * 1: scan_record_avx2): the separator, the newlines, and the few places where a word may start, found by two of
 * its bytes (c..n, c..e, m..c at fixed distances, any case; l.s), then checked whole. A word holds neither
 * separator byte (0x1e, '\n'), so a word that fits before e fits in the record. */
#if defined(__x86_64__) && defined(__GNUC__)
#define SCAN_AVX2 1
#include <immintrin.h>
static int cpu_avx2; /* set once at import: the CPU has AVX2 */

/* scan_record's loop with AVX2, 64 bytes a step (two 32-byte halves, one 64-bit mask per test): the same
 * result as the SSE2 loop by fewer tests. The separator and the newlines are looked for only in a step that
 * holds a byte below 0x20 (the top bit of byte - 0x20; bytes >= 0xa0 set it too; sep is such a byte in every
 * caller, else both are looked for in every step). A wanted word's first byte is found by one pair that
 * "congestion" and "cc_state" share (c..t, 6 apart) and metric's (m..c, 5 apart), any case: fewer candidates,
 * each checked whole as before. It returns where it stopped (a separator: *done 1) with n, soft and wanted carried. */
__attribute__((target("avx2,popcnt"))) static inline __m256i wanted_pairs(const char *q) {
    const __m256i low = _mm256_set1_epi8(32);
    __m256i v = _mm256_or_si256(_mm256_loadu_si256((const __m256i *)q), low);
    __m256i at6 = _mm256_or_si256(_mm256_loadu_si256((const __m256i *)(q + 6)), low);
    __m256i at5 = _mm256_or_si256(_mm256_loadu_si256((const __m256i *)(q + 5)), low);
    return _mm256_or_si256(_mm256_and_si256(_mm256_cmpeq_epi8(v, _mm256_set1_epi8('c')), _mm256_cmpeq_epi8(at6, _mm256_set1_epi8('t'))),
                           _mm256_and_si256(_mm256_cmpeq_epi8(v, _mm256_set1_epi8('m')), _mm256_cmpeq_epi8(at5, _mm256_set1_epi8('c'))));
}

__attribute__((target("avx2,popcnt"))) static inline unsigned int soft_pairs(const char *q) { /* l.s */
    return (unsigned int)_mm256_movemask_epi8(_mm256_and_si256(_mm256_cmpeq_epi8(_mm256_loadu_si256((const __m256i *)q), _mm256_set1_epi8('l')),
                                                               _mm256_cmpeq_epi8(_mm256_loadu_si256((const __m256i *)(q + 2)), _mm256_set1_epi8('s'))));
}

__attribute__((target("avx2,popcnt"))) static unsigned long long mask64(__m256i a, __m256i b) {
    return (unsigned int)_mm256_movemask_epi8(a) | (unsigned long long)(unsigned int)_mm256_movemask_epi8(b) << 32;
}

__attribute__((target("avx2,popcnt"))) static const char *scan_record_avx2(const char *p, const char *q, const char *e,
                                                                             int sep, Py_ssize_t *nl, int *soft_io, int *wanted_io,
                                                                             int *done) {
    const __m256i vsep = _mm256_set1_epi8((char)sep), vnl = _mm256_set1_epi8('\n'), v20 = _mm256_set1_epi8(0x20);
    const int any_step = (unsigned)sep >= 0x20; /* (not a control byte: every step looked at) */
    Py_ssize_t n = *nl;
    int soft = *soft_io, wanted = *wanted_io;
    *done = 0;
    while (e - q >= 70) { /* the loads reach q + 69 */
        __m256i r0 = _mm256_loadu_si256((const __m256i *)q), r1 = _mm256_loadu_si256((const __m256i *)(q + 32));
        unsigned long long sepm = 0, before = ~0ULL;
        if (any_step || _mm256_movemask_epi8(_mm256_or_si256(_mm256_sub_epi8(r0, v20), _mm256_sub_epi8(r1, v20)))) {
            sepm = mask64(_mm256_cmpeq_epi8(r0, vsep), _mm256_cmpeq_epi8(r1, vsep));
            if (sepm) before = (sepm & (0 - sepm)) - 1;
            n += __builtin_popcountll(mask64(_mm256_cmpeq_epi8(r0, vnl), _mm256_cmpeq_epi8(r1, vnl)) & before);
        }
        if (!wanted) {
            for (unsigned long long mw = mask64(wanted_pairs(q), wanted_pairs(q + 32)) & before; mw; mw &= mw - 1)
                if (wanted_at(q + __builtin_ctzll(mw), e)) {
                    wanted = 1;
                    break;
                }
            if (!soft && !wanted)
                for (unsigned long long ms = (soft_pairs(q) | (unsigned long long)soft_pairs(q + 32) << 32) & before; ms; ms &= ms - 1)
                    if (soft_at(p, q + __builtin_ctzll(ms), e)) {
                        soft = 1;
                        break;
                    }
        }
        if (sepm) {
            *done = 1;
            q += __builtin_ctzll(sepm);
            break;
        }
        q += 64;
    }
    while (!*done && e - q >= 38) { /* the same 32 bytes a step: the loads reach q + 37 */
        __m256i raw = _mm256_loadu_si256((const __m256i *)q);
        unsigned int sepm = (unsigned int)_mm256_movemask_epi8(_mm256_cmpeq_epi8(raw, vsep));
        unsigned int before = sepm ? (unsigned int)((1ull << __builtin_ctz(sepm)) - 1) : 0xffffffffu;
        n += __builtin_popcount((unsigned int)_mm256_movemask_epi8(_mm256_cmpeq_epi8(raw, vnl)) & before);
        if (!wanted) {
            for (unsigned int mw = (unsigned int)_mm256_movemask_epi8(wanted_pairs(q)) & before; mw; mw &= mw - 1)
                if (wanted_at(q + __builtin_ctz(mw), e)) {
                    wanted = 1;
                    break;
                }
            if (!soft && !wanted)
                for (unsigned int ms = soft_pairs(q) & before; ms; ms &= ms - 1)
                    if (soft_at(p, q + __builtin_ctz(ms), e)) {
                        soft = 1;
                        break;
                    }
        }
        if (sepm) {
            *done = 1;
            q += __builtin_ctz(sepm);
            break;
        }
        q += 32;
    }
    *nl = n, *soft_io = soft, *wanted_io = wanted;
    return q;
}
#endif

static const char *scan_record(const char *p, const char *e, int sep, Py_ssize_t *nl, int *cls, int simd) {
    const char *q = p;
    Py_ssize_t n = 0;
    int soft = 0, wanted = 0;
#ifdef SCAN_AVX2
    if (simd && cpu_avx2) {
        int done;
        q = scan_record_avx2(p, q, e, sep, &n, &soft, &wanted, &done);
        if (done) goto done;
    }
#endif
#ifdef __SSE2__
    const __m128i low = _mm_set1_epi8(32), vsep = _mm_set1_epi8((char)sep), vnl = _mm_set1_epi8('\n');
    const __m128i vc = _mm_set1_epi8('c'), vm = _mm_set1_epi8('m'), vl = _mm_set1_epi8('l'), vn = _mm_set1_epi8('n'),
                  ve = _mm_set1_epi8('e'), vs = _mm_set1_epi8('s');
    while (e - q >= 25) { /* the loads reach q + 24 */
        __m128i raw = _mm_loadu_si128((const __m128i *)q);
        unsigned int sepm = (unsigned int)_mm_movemask_epi8(_mm_cmpeq_epi8(raw, vsep));
        unsigned int before = sepm ? (1u << __builtin_ctz(sepm)) - 1 : 0xffffu;
        unsigned int nlm = (unsigned int)_mm_movemask_epi8(_mm_cmpeq_epi8(raw, vnl)) & before;
        if (nlm) n += pop16(nlm); /* (__builtin_popcount is a library call without -mpopcnt) */
        if (!wanted) {
            __m128i v = _mm_or_si128(raw, low);
            __m128i at9 = _mm_or_si128(_mm_loadu_si128((const __m128i *)(q + 9)), low);
            __m128i at7 = _mm_or_si128(_mm_loadu_si128((const __m128i *)(q + 7)), low);
            __m128i at5 = _mm_or_si128(_mm_loadu_si128((const __m128i *)(q + 5)), low);
            __m128i hw = _mm_or_si128(
                _mm_and_si128(_mm_cmpeq_epi8(v, vc), _mm_or_si128(_mm_cmpeq_epi8(at9, vn), _mm_cmpeq_epi8(at7, ve))),
                _mm_and_si128(_mm_cmpeq_epi8(v, vm), _mm_cmpeq_epi8(at5, vc)));
            unsigned int mw = (unsigned int)_mm_movemask_epi8(hw) & before;
            for (; mw; mw &= mw - 1)
                if (wanted_at(q + __builtin_ctz(mw), e)) {
                    wanted = 1;
                    break;
                }
            if (!soft && !wanted) {
                __m128i hs = _mm_and_si128(_mm_cmpeq_epi8(raw, vl), _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(q + 2)), vs));
                for (unsigned int ms = (unsigned int)_mm_movemask_epi8(hs) & before; ms; ms &= ms - 1)
                    if (soft_at(p, q + __builtin_ctz(ms), e)) {
                        soft = 1;
                        break;
                    }
            }
        }
        if (sepm) {
            q += __builtin_ctz(sepm);
            goto done;
        }
        q += 16;
    }
#endif
    for (; q < e && (unsigned char)*q != sep; q++) {
        unsigned char x = (unsigned char)*q;
        if (x == '\n') n++;
        else if (wanted) continue;
        else if (x == 'l') soft = soft || soft_at(p, q, e);
        else if (((x | 32) == 'c' || (x | 32) == 'm') && wanted_at(q, e)) wanted = 1;
    }
#if defined(__SSE2__) || defined(SCAN_AVX2)
done:
#endif
    *nl = n;
    *cls = wanted ? R_WANTED : soft ? R_SOFT : R_PACKET;
    return q;
}

static int rx_space(int c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

/* qlog._TIME then float(): the time of a record not decoded. 1 with *t when the regex matches and float()
 * takes the match; 0 otherwise (the record then has no time, as in the Python reader). */
static int regex_time(const char *p, const char *e, double *t) {
    for (;;) {
        const char *q = p;
        while ((size_t)(e - q) >= 6 && (*q != '"' || memcmp(q + 1, "time\"", 5) != 0)) q++;
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
        JNum num; /* the common case, a JSON number that is the whole match: read in one pass */
        const char *x = jnumber_m(a, e, &num);
        if (x && (x == e || !time_byte((unsigned char)*x))) { /* (the match: at most 30 bytes after the first digit) */
            Span text = {a, x};
            *t = num_value(&num, text);
            return 1;
        }
        q++;
        for (int n = 0; n < 30 && q < e && time_byte((unsigned char)*q); n++) q++;
        if (jnumber_m(a, q, &num) == q) {
            Span text = {a, q};
            *t = num_value(&num, text);
            return 1;
        }
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
        *t = exact_strtod(a, (size_t)(q - a));
        return 1;
    }
}


/* A usable event time (qlog_values.time_value): a number (read into n), finite, |t| <= 1e15. */
static int good_time(Span s, int type, const JNum *n, double *t) {
    if (type != J_NUM) return 0;
    *t = num_value(n, s);
    return isfinite(*t) && fabs(*t) <= 1e15;
}

/* ---- The qlog scanner: records (JSON-SEQ, NDJSON) and JSON documents, read in windows ----
 *
 * A QlogScanner reads one qlog after the other, window by window, into rows of the batch it is filling
 * (the Python reader, quicsm/traces/qlog_columns.py, turns them into traces). The reader it stands for
 * is the record logic of quicsm/traces/qlog.py (QlogRecords): what that logic would do, without a word of
 * report, with a record in the plain shape stacks write, {"time": number, "name": "...", "data": {...}}
 * in strict JSON with ASCII strings, is done here; every other record (another key, an escape or a
 * number where it matters, a state given as a number, mvfst's event, a bad time or field) is handed to
 * the Python handler, which decides it with the same state (members below) and may add rows (put).
 *
 * Rows, per column: time as written after the file's deltas (float64, the file's unit), kind (int8: 0
 * transition, 2 metrics, 3 placeholder), state and from-state ids as written (int32: the Python side maps
 * them to canonical names; a metrics row's state is the state current then), trigger and recovery ids,
 * cwnd, inflight, ssthresh, pacing, bw, min_rtt, srtt (int64 x 7, INT64_MIN absent; the two RTTs as
 * written go to the next column), min_rtt and smoothed_rtt as written (float64 x 2, NaN absent). */

/* A column grown in a bytearray, handed over whole (no copy) when the batch is taken; or (raw: a second
 * thread's, which may not call Python) in memory of its own, appended to the batch's when the thread is done. */
typedef struct { PyObject *ba; char *data; size_t len, cap; int raw; } BCol;

/* Room for n more bytes (the column doubled). */
__attribute__((noinline)) static int bcol_grow(BCol *c, size_t n) {
    size_t cap = c->cap ? c->cap * 2 : 1 << 12;
    while (cap < c->len + n) cap *= 2;
    if (c->raw) {
        char *d = PyMem_RawRealloc(c->data, cap);
        if (!d) return -1;
        c->data = d;
    } else {
        if (!c->ba && !(c->ba = PyByteArray_FromStringAndSize(NULL, 0))) return -1;
        if (PyByteArray_Resize(c->ba, (Py_ssize_t)cap) < 0) return -1;
        c->data = PyByteArray_AS_STRING(c->ba);
    }
    c->cap = cap;
    return 0;
}

/* n bytes appended (inlined: at a row's call sites n is a constant, so the copy is a move or two, not a call). */
static inline __attribute__((always_inline)) int bcol_put(BCol *c, const void *v, size_t n) {
    if (c->len + n > c->cap && bcol_grow(c, n)) return -1;
    memcpy(c->data + c->len, v, n);
    c->len += n;
    return 0;
}

static PyObject *bcol_take(BCol *c) {
    PyObject *ba = c->ba;
    if (!ba) return PyByteArray_FromStringAndSize(NULL, 0);
    if (PyByteArray_Resize(ba, (Py_ssize_t)c->len) < 0) return NULL;
    c->ba = NULL;
    c->data = NULL;
    c->len = c->cap = 0;
    return ba;
}

typedef struct {
    PyObject_HEAD
    PyObject *table, *names;
    BCol t, kind, state, prev, trig, recov, metrics, rtt;
    Col uses, aux, marks;   /* side tables of the trace being read, for the metric-state reader */
    Py_ssize_t rows, trace_row0, max_value;
    /* the trace being read (the Python handler reads and writes these too) */
    int header, delta, has_t, current, first_prev, trans;
    int states;             /* where states come from: 0 logged, 1 auto (metrics kept until a state event), 2 metrics */
    int keep_metrics;       /* 1: every row's metrics and RTTs; 0 (a reader that needs none): only the trace being read's,
                             * from its first row, while they may give its states (qs_keeps_aux) */
    long long skipped;      /* state events not made rows (states=metrics) */
    double last_time, tmin, tmax, row_tmax;
    /* the file: newlines before the window's start, records so far */
    long long lines, record_no;
    /* the document walker */
    int dstate, dexpect, skip_depth, skip_str, skip_esc, skip_what;
    long long trace_index, event_index;
    int gen; /* bumped by tables(): ids a call cached are the old table's */
    int threads;            /* records() splits a long run of records between this many threads (1 or 2) */
    Py_ssize_t split_min;   /* ... each part at least this many bytes */
    int take_back;          /* a second part not begun when the first is done is read here (0: always waited for) */
    int simd;               /* 1: records are split and classified 32 bytes at a time where the CPU has AVX2, members and
                             * names guessed (guess), a metrics row's numbers only checked when it keeps none; 0: SSE2,
                             * the key matcher, every number read (the general paths, for tests) */
    long long in_bytes, in_rows; /* records() so far: bytes read, rows made (the rows a window is expected to make) */
    double split_at;        /* the first thread's share of a split run: what made both parts take as long so far */
    BCol spare[8];          /* a second thread's row columns, emptied, for the next one (not allocated again) */
    Guesses guess;          /* members and names as last written (used when simd is 1) */
    struct WNames *w;       /* set in the second thread's copy: strings are named there, not in the table */
} QS;

/* An ASCII name that qlog's _role knows: 1 state, 2 metrics, 3 mvfst, 4 lost, 5 timer, 6 spurious, 0 none (after the last
 * ':', any case). */
static int role_of(Span name) {
    static const struct { const char *word; size_t n; int role; } ROLES[] = {
        {"congestion_state_updated", 24, 1}, {"congestion_state_update", 23, 1}, {"cc_state_update", 15, 1},
        {"congestion_state", 16, 1},         {"metrics_updated", 15, 2},         {"recovery_metrics_updated", 24, 2},
        {"metric_update", 13, 2},            {"metrics_update", 14, 2},          {"congestion_metric_update", 24, 3},
        {"packet_lost", 11, 4},              {"loss_timer_updated", 18, 5},      {"spurious_loss", 13, 6}};
    /* the name ends with the word, after a ':' or alone: then the word (which holds no ':') is what follows the last
     * ':' (no search for it: a test of one byte per word; the first letter, any case, before a comparison) */
    size_t len = (size_t)(name.b - name.a);
    for (size_t i = 0; i < sizeof ROLES / sizeof *ROLES; i++) {
        size_t n = ROLES[i].n;
        const char *a = name.b - n;
        if (n > len || (a > name.a && a[-1] != ':') || ((unsigned char)*a | 32) != (unsigned char)ROLES[i].word[0]) continue;
        if (memcmp(a, ROLES[i].word, n) == 0 || ci_at(a, name.b, ROLES[i].word, n)) return ROLES[i].role;
    }
    return 0;
}

enum { K_TRANSITION = 0, K_METRICS = 2, K_PLACEHOLDER = 3 };

#define W_INHERIT (-1000) /* a metrics row's state before the thread's first state event: the state then current */


/* Id of the string [a, b) for a row: the table's (intern()), or in the second thread its own (wn_intern()). */
static int qs_intern(QS *s, const char *a, const char *b, Seen *seen) {
    return s->w ? wn_intern(s->w, a, b) : intern(s->table, s->names, a, b, seen);
}

/* uses[id] += k (k > 0). */
static int qs_use_n(QS *s, int id, long long k) {
    if (id < 0) return 0;
    size_t need = ((size_t)id + 1) * 8;
    if (s->uses.len < need) {
        size_t old = s->uses.len;
        if (rcol_put(&s->uses, NULL, need - old)) { PyErr_NoMemory(); return -1; }
        memset(s->uses.data + old, 0, need - old);
    }
    ((long long *)s->uses.data)[id] += k;
    return 0;
}

/* uses[id] += 1: a state name read by a C-decided record (the Python side lists the unknown ones). */
static int qs_use(QS *s, int id) {
    if (s->w) {
        if (id >= 0) s->w->uses[id]++;
        return 0;
    }
    return qs_use_n(s, id, 1);
}

/* Whether the trace's metric side tables are kept: states=metrics, or auto before any state event. */
static int qs_keeps_aux(QS *s) { return s->states == 2 || (s->states == 1 && !s->trans); }

static int qs_row(QS *s, int kind, double t, int state, int prev, int trig, int recov, const long long *m, const double *rtt,
                  const double *aux) {
    signed char k = (signed char)kind;
    if (kind == K_TRANSITION && s->states == 2) { /* the logged states set aside: the metrics tell them */
        s->skipped++;
        return 0;
    }
    if (kind == K_TRANSITION && s->states == 1 && !s->trans) { /* logged states: no need */
        s->aux.len = s->marks.len = 0;
        if (!s->keep_metrics) s->metrics.len = s->rtt.len = 0;
    }
    int with_metrics = s->keep_metrics || (kind != K_TRANSITION && qs_keeps_aux(s));
    if (kind == K_METRICS && qs_keeps_aux(s)) {
        long long row = (long long)(s->rows - s->trace_row0);
        if (rcol_put(&s->aux, &row, 8) || rcol_put(&s->aux, aux, 8 * N_AUX)) return s->w ? -1 : (PyErr_NoMemory(), -1);
    }
    if (bcol_put(&s->t, &t, 8) || bcol_put(&s->kind, &k, 1) || bcol_put(&s->state, &state, 4) || bcol_put(&s->prev, &prev, 4) ||
        bcol_put(&s->trig, &trig, 4) || bcol_put(&s->recov, &recov, 4) ||
        (with_metrics && (bcol_put(&s->metrics, m, 56) || bcol_put(&s->rtt, rtt, 16)))) {
        return -1; /* (a bytearray's resize set the error; a raw column's thread has none) */
    }
    if (kind != K_PLACEHOLDER) {
        if (kind == K_TRANSITION && s->trans++ == 0) s->first_prev = prev;
        if (s->rows == s->trace_row0 || t > s->row_tmax) s->row_tmax = t;
    }
    s->rows++;
    return 0;
}

/* A loss or timer event for the metric-state reader (code: 1 lost, 2 a timer expired, 3 the PTO expired, 4 a
 * loss found spurious). */
static int qs_mark(QS *s, double t, int code) {
    signed char c = (signed char)code;
    if (!qs_keeps_aux(s)) return 0;
    if (rcol_put(&s->marks, &t, 8) || rcol_put(&s->marks, &c, 1)) {
        if (!s->w) PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* TraceState.t_us in the file's unit: the delta added, the range checked (|t| <= 1e15, also after the
 * deltas), min and max kept. 0 (nothing changed) when the time is not usable. */
static int qs_time(QS *s, double raw, double *out) {
    double t = raw;
    if (s->delta) {
        t += s->last_time;
        if (!(fabs(t) <= 1e15)) return 0;
        s->last_time = t;
    }
    if (!s->has_t || t < s->tmin) s->tmin = t;
    if (!s->has_t || t > s->tmax) s->tmax = t;
    s->has_t = 1;
    *out = t;
    return 1;
}

static int plain_str(Span v, int type) {
    int plain;
    return type == J_STR && jstring(v.a, v.b, &plain) && plain;
}

static int all_digits(Span v) { /* the string's text (inside the quotes) is ASCII digits only */
    for (const char *c = v.a + 1; c < v.b - 1; c++)
        if (*c < '0' || *c > '9') return 0;
    return 1;
}

static const char *const TIMER_KEYS[2] = {"event_type", "timer_type"};

static int str_is(Span v, const char *word) { /* a plain string's text is word */
    Span in = {v.a + 1, v.b - 1};
    return span_is(in, word);
}

/* A record's event members as jmembers(REC_KEYS, strict 2) takes them, and in the same pass, when "name" comes
 * before "data" and names a state, metrics or timer event, data's members with that role's keys as
 * jmembers(data, keys, 0, 1) takes them (role: which; -1 not taken), so data is read once, not twice. A data
 * object those keys refuse refuses the record: the Python handler decides it, as it would have after the
 * second look. */
typedef struct {
    Span v[3], d[16];
    int ty[3], dt[16];
    JNum n[3], dn[16]; /* the numbers among them, read (time; data's wanted members: only checked if not `values`) */
    int name_plain, role, named; /* named: role_of(name) when the pass asked it, else -1 */
} Rec;

/* A role's data keys, their number (*n) and their key set's number (*set: as in key_index). */
static const char *const *role_keys(int role, int *n, int *set) {
    switch (role) {
    case 1: *n = 6, *set = 1; return STATE_KEYS;
    case 2: *n = 10 + N_AUX, *set = 2; return METRIC_KEYS;
    case 5: *n = 2, *set = 3; return TIMER_KEYS;
    default: *n = 0, *set = 0; return NULL;
    }
}

/* (g: the scanner's guesses per key set, or NULL: the key matcher only; values 0: a metrics event's numbers are only
 * checked, its row keeping none) */
static int rec_members(const char *p, const char *e, Rec *r, Guesses *g, int values) {
    int plain, vplain, t, i, nk, set, name_role = -1;
    const char *name_at = NULL; /* (the name string, when it is to be learnt) */
    r->name_plain = 0;
    r->role = r->named = -1;
    for (i = 0; i < 3; i++) { r->v[i].a = r->v[i].b = NULL; r->ty[i] = J_BAD; }
    if (p >= e || *p != '{') return 0;
    p = skip_jws(p + 1, e);
    if (p < e && *p == '}') return skip_jws(p + 1, e) == e;
    for (int j = 0;; j++) {
        const char *at = p, *ka, *kb, *q; /* (as in jmembers_at) */
        Span key;
        if ((q = guess_key(g ? g->set : NULL, j, at, e, &i))) {
            key.a = at + 1 + (j > 0), key.b = q - 2;
            p = q;
        } else {
            if (j) {
                p = skip_jws(p, e);
                if (p < e && *p == '}') return skip_jws(p + 1, e) == e;
                if (p >= e || *p != ',') return 0;
                p = skip_jws(p + 1, e);
            }
            if (p >= e || *p != '"') return 0;
            ka = p + 1;
            if (!(kb = key_at(p, e, REC_KEYS, 3, &i)) && (!(kb = jstring(p, e, &plain)) || !plain)) return 0;
            key.a = ka, key.b = kb - 1;
            p = skip_jws(kb, e);
            if (p >= e || *p != ':') return 0;
            if (p == kb && ka - 1 == at + (j > 0) && g) guess_learn(g->set, j, at, p, i);
            p++;
        }
        p = skip_jws(p, e);
        const char *va = p;
        const char *const *dk = NULL;
        if (i == 2 && r->role < 0 && r->name_plain && r->v[1].b - r->v[1].a > 2 && p < e && *p == '{') {
            Span name = {r->v[1].a + 1, r->v[1].b - 1};
            int role = r->named = name_role >= 0 ? name_role : role_of(name);
            if (name_at && name_role < 0) name_learn(g, name_at, r->v[1].b, e, role);
            if ((dk = role_keys(role, &nk, &set))) {
                if (!(p = jmembers_at(p, e, dk, nk, r->d, r->dt, r->dn, values || role != 2, 0, 1, g ? g->set + set : NULL))) return 0;
                t = J_OBJ;
                r->role = role;
            }
        }
        if (dk) {
        } else if (p < e && *p == '"') {
            t = J_STR;
            if (i == 1 && !r->v[1].a && g && (q = guess_name(g, p, e, &name_role))) {
                p = q;
                r->name_plain = 1;
            } else {
                if (!(p = jstring(p, e, &vplain))) return 0;
                if (i == 1 && !r->v[1].a) {
                    r->name_plain = vplain;
                    if (vplain && g) name_at = va;
                }
            }
        } else if (i < 3 && num_start(p, e)) {
            t = J_NUM;
            if (!(p = jnumber_m(p, e, &r->n[i]))) return 0;
        } else if (!(p = jvalue(p, e, 1, &t))) return 0;
        if (i < 3) {
            if (r->v[i].a) return 0;
            r->v[i].a = va; r->v[i].b = p; r->ty[i] = t;
        } else { /* another member (quinn's "group_id"): passed over, as the Python reader does */
            for (const char *c = key.a; c < key.b; c++) if ((*c >= 'A' && *c <= 'Z') || (*c & 0x80)) return 0;
            for (i = 0; i < 5; i++) if (span_is(key, REC_ALT[i])) return 0;
        }
        if (p < e && *p == '}') return skip_jws(p + 1, e) == e;
    }
}

/* A loss or timer event (role 4, 5) with its time, data and their types: for the metric-state reader,
 * never reported (qlog.QlogFile.event). 1 decided, 0 for the Python handler, -1 error. */
static int qs_lost_or_timer(QS *s, int role, const Rec *r) {
    double raw, t;
    int code = 0;
    Span time = r->v[0], data = r->v[2];
    int time_type = r->ty[0], data_type = r->ty[2];
    if (!time.a || time_type == J_NULL) return 1; /* no time: nothing (the time is not usable) */
    if (time_type == J_STR) return 0;
    if (data.a && data_type == J_OBJ) {
        if (role == 4) code = 1;
        else if (role == 6) code = 4;
        else {
            Span dd[2];
            int ddt[2];
            const Span *d = dd;
            const int *dt = ddt;
            if (r->role == 5) d = r->d, dt = r->dt; /* read in the record's pass */
            else if (!jmembers(data.a, data.b, TIMER_KEYS, 2, dd, ddt, NULL, 0, 1)) return 0;
            if (d[0].a && dt[0] == J_STR) {
                if (!plain_str(d[0], dt[0]) || (d[1].a && dt[1] == J_STR && !plain_str(d[1], dt[1]))) return 0;
                if (str_is(d[0], "expired")) code = d[1].a && dt[1] == J_STR && str_is(d[1], "pto") ? 3 : 2;
            }
        }
    }
    if (!good_time(time, time_type, &r->n[0], &raw) || !qs_time(s, raw, &t)) return 1;
    return code && qs_mark(s, t, code) ? -1 : 1;
}

/* One event {"time", "name", "data"}: 1 decided here (maybe a row), 0 for the Python handler, -1 error. */
static int qs_event(QS *s, const char *p, const char *e, Seen *seen) {
    if (!s->w && seen->gen != s->gen) { /* the handler started a new batch (a new string table) */
        memset(seen->slot, 0, (seen->mask + 1) * sizeof(Slot));
        seen->used = 0;
        seen->gen = s->gen;
    }
    Rec r;
    /* a metrics row keeps its numbers (qs_row) only so: else they are checked, not read (simd 0: always read) */
    int values = s->keep_metrics || qs_keeps_aux(s) || !s->simd;
    if (!rec_members(p, e, &r, s->simd ? &s->guess : NULL, values)) return 0;
    Span *v = r.v;
    int *ty = r.ty;
    if (!v[1].a || ty[1] != J_STR || !r.name_plain || v[1].b - v[1].a <= 2) return 0;
    Span name = {v[1].a + 1, v[1].b - 1};
    int role = r.named >= 0 ? r.named : role_of(name);
    double raw, t;
    if (role >= 4) return qs_lost_or_timer(s, role, &r);
    if (role == 0) {
        if (!v[0].a || ty[0] == J_NULL) return 1;
        if (ty[0] == J_STR) return 0; /* a time as a string: float() decides */
        if (good_time(v[0], ty[0], &r.n[0], &raw)) qs_time(s, raw, &t);
        return 1;
    }
    if (role == 3 || !v[2].a || ty[2] != J_OBJ || !v[0].a || !good_time(v[0], ty[0], &r.n[0], &raw)) return 0;
    if (s->delta && !(fabs(raw + s->last_time) <= 1e15)) return 0;
    long long m[7];
    double rtt[2] = {NAN, NAN};
    for (int i = 0; i < 7; i++) m[i] = QNULL;
    if (role == 1) {
        if (r.role != 1 && !jmembers(v[2].a, v[2].b, STATE_KEYS, 6, r.d, r.dt, NULL, 0, 1)) return 0;
        v = r.d, ty = r.dt;
        int w = v[0].a ? 0 : v[1].a ? 1 : 2;  /* data.get("new", data.get("new_state", data.get("state"))) */
        if (!v[w].a || !plain_str(v[w], ty[w]) || v[w].b - v[w].a <= 2 || all_digits(v[w])) return 0;
        int o = v[3].a ? 3 : v[4].a ? 4 : -1; /* data.get("old", data.get("old_state")); null: none */
        int old_given = 0;
        if (o >= 0 && ty[o] != J_NULL) {
            if (!plain_str(v[o], ty[o]) || all_digits(v[o])) return 0;
            old_given = v[o].b - v[o].a > 2; /* "" is no state (and not listed) */
        }
        int trig = -1;
        if (v[5].a && ty[5] == J_STR && !plain_str(v[5], ty[5])) return 0;
        int state = qs_intern(s, v[w].a + 1, v[w].b - 1, seen), prev = -1;
        if (state < -1) return state == -3 ? -1 : 0;
        if (old_given) {
            prev = qs_intern(s, v[o].a + 1, v[o].b - 1, seen);
            if (prev < -1) return prev == -3 ? -1 : 0;
        }
        if (v[5].a && ty[5] == J_STR) {
            const char *b = v[5].b - 1;
            if (b - (v[5].a + 1) > 200) b = v[5].a + 1 + 200;
            trig = qs_intern(s, v[5].a + 1, b, seen);
            if (trig < -1) return trig == -3 ? -1 : 0;
        }
        if (qs_use(s, state) || (old_given && qs_use(s, prev))) return -1;
        qs_time(s, raw, &t);
        s->current = state;
        return qs_row(s, K_TRANSITION, t, state, prev, trig, -1, m, rtt, NULL) ? -1 : 1;
    }
    if (r.role != 2 && !jmembers(v[2].a, v[2].b, METRIC_KEYS, 10 + N_AUX, r.d, r.dt, r.dn, 0, 1)) return 0;
    v = r.d, ty = r.dt;
    const JNum *num = r.dn;
    if (r.role != 2) values = 1; /* (read by jmembers) */
    double aux[N_AUX];
    int keep = qs_keeps_aux(s); /* only then does qs_row keep them */
    for (int i = 0; i < N_AUX; i++) /* as written; anything but a number is none (metric_states._num) */
        aux[i] = keep && v[10 + i].a && ty[10 + i] == J_NUM ? num_value(&num[10 + i], v[10 + i]) : NAN;
    unsigned present = 0; /* the keys given: each field's first given one found without a loop per field */
    for (int i = 0; i < 10; i++) present |= (unsigned)(v[i].a != NULL) << i;
    for (int f = 0; f < 6; f++) {
        unsigned given = present & ((1u << METRIC_FIRST[f + 1]) - (1u << METRIC_FIRST[f]));
        if (!given) continue;
        int k = __builtin_ctz(given);
        if (ty[k] == J_NULL) continue;
        if (ty[k] != J_NUM || *v[k].a == '-') return 0;
        int integer = num[k].integer;
        if (f >= 4) { /* an RTT in the file's unit, scaled in Python: exact as a double below 2^53 */
            if (v[k].b - v[k].a > 15) return 0;
            if (!values && !num[k].expo) continue; /* (15 characters or fewer, no exponent: below 1e15) */
            double x = values ? num_value(&num[k], v[k]) : span_value(v[k]);
            if (x >= 1e15) return 0;
            rtt[f - 4] = x;
            continue;
        }
        if (!integer) return 0;
        if (v[k].b - v[k].a > 19) {
            if (f != 2) return 0; /* out of range: reported by the Python handler */
            m[2] = QMAX;           /* ssthresh: 2^64-1 and beyond mean unbounded */
            continue;
        }
        if (!values && v[k].b - v[k].a < 19) continue; /* (18 digits or fewer: below QMAX) */
        /* at most 19 digits, none a leading zero: all of them */
        unsigned long long x = values ? num[k].m : span_read(v[k]).m;
        if (x >= (unsigned long long)QMAX) {
            if (f != 2) return 0;
            x = (unsigned long long)QMAX;
        }
        m[f == 3 ? 3 : f] = (long long)x;
    }
    qs_time(s, raw, &t);
    return qs_row(s, K_METRICS, t, s->current, -1, -1, -1, m, rtt, aux) ? -1 : 1;
}

static const char *strip_l(const char *p, const char *e) { while (p < e && rx_space((unsigned char)*p)) p++; return p; }
static const char *strip_r(const char *p, const char *e) { while (e > p && rx_space((unsigned char)e[-1])) e--; return e; }

/* One record of a JSON-SEQ/NDJSON file (the text between two separators): 1 decided, 0 handler, -1 error. */
static int qs_record(QS *s, const char *p, const char *e, int cls, Seen *seen) {
    if (!s->header) cls = R_WANTED;
    if (cls != R_WANTED) { /* packet-level events: only their time (it extends the last stay) */
        double raw, t;
        if (cls == R_SOFT) { /* a loss or timer record, if it reads as one (else only its time, as below) */
            const char *x = strip_l(p, e), *y = strip_r(x, e);
            Rec r;
            Span *v = r.v;
            int *ty = r.ty;
            if (!rec_members(x, y, &r, s->simd ? &s->guess : NULL, 1) || !v[1].a || ty[1] != J_STR || !r.name_plain || v[1].b - v[1].a <= 2) return 0;
            Span name = {v[1].a + 1, v[1].b - 1};
            int role = r.named >= 0 ? r.named : role_of(name);
            if (v[0].a && ty[0] == J_STR) return 0;
            if (role >= 4 && v[2].a && ty[2] == J_OBJ && v[0].a && good_time(v[0], ty[0], &r.n[0], &raw))
                return qs_lost_or_timer(s, role, &r);
        }
        if (regex_time(p, e, &raw) && isfinite(raw) && fabs(raw) <= 1e15) qs_time(s, raw, &t);
        return 1;
    }
    const char *x = strip_l(p, e), *y = strip_r(x, e);
    if (x == y) return 1;
    if (!s->header) return 0; /* the header record: the Python handler reads it */
    return qs_event(s, x, y, seen);
}

static int call_handler(PyObject *handler, const char *fmt, ...) {
    va_list va;
    va_start(va, fmt);
    PyObject *args = Py_VaBuildValue(fmt, va);
    va_end(va);
    if (!args) return -1;
    PyObject *r = PyObject_CallObject(handler, args);
    Py_DECREF(args);
    if (!r) return -1;
    Py_DECREF(r);
    return 0;
}

/* The records of [p, e) split at the byte sep, the last piece only when final. *stop: where reading stopped.
 * Returns 0 done (*stop: the unread start of the next window, or e), -1 error, or 1: (handler NULL: the second
 * thread) at a record this scanner does not decide (*stop: its start; it is not counted), or (header_stop)
 * after the record that was the header (*stop: the next record's start). */
static int qs_run(QS *s, const char *p, const char *e, int sep, int final, PyObject *handler, Seen *seen, const char **stop,
                  int header_stop) {
    for (;;) {
        Py_ssize_t nl;
        int cls;
        const char *q = scan_record(p, e, sep, &nl, &cls, s->simd);
        if (q == e && !final) break;
        s->record_no++;
        int r = qs_record(s, p, q, cls, seen);
        if (r < 0 || (r == 0 && !handler)) {
            s->record_no--;
            *stop = p;
            return r < 0 ? -1 : 1;
        }
        if (r == 0 && call_handler(handler, "(y#LL)", p, (Py_ssize_t)(q - p), s->lines + 1, s->record_no)) return -1;
        s->lines += nl + (q < e && sep == '\n');
        if (q == e) {
            p = e;
            break;
        }
        p = q + 1;
        if (header_stop && s->header) {
            *stop = p;
            return 1;
        }
    }
    *stop = p;
    return 0;
}

/* ---- Two threads: the second half of a long run of records read beside the first ----
 *
 * records() with threads == 2 and a run of at least 2 * split_min bytes (the header read, times not deltas)
 * hands the part after the first record boundary past the middle to a second thread, which reads it into
 * rows of its own (a copy of the scanner: its own raw columns, side tables and string numbering, and no
 * Python: it never holds the GIL) while this thread reads the first part as before (calling the handler).
 * The second thread stops at the first record it does not decide, or out of memory. Its part is then put
 * after this thread's rows, its strings named in the table in their order of first appearance, its state
 * carried over (the state current, the side tables kept before the trace's first state event, times, lines,
 * records), and reading goes on where it stopped (the record not decided: here, with the handler). If the
 * first part changed what the second assumed (the handler made times deltas), its part is read again here.
 * So rows, tables, reports and errors are those of one thread (an error in the first part is the first one).
 * When this thread is done with its part before the second has begun (the other core is busy), it takes the
 * second part back (the thread, detached, then only frees its copy) and reads on alone. */
typedef struct {
    QS ws;
    WNames names;
    const char *p, *e, *stop;
    int sep, final, status, trans0;
    int claim; /* W_PENDING, then W_RUNNING (the second thread took it) or W_TAKEN_BACK */
    char *ahead[8]; /* pages of the first thread's columns the second makes present (work_ahead) */
    size_t ahead_n[8];
    double took; /* seconds the second thread took */
} Work;

static double seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void work_free(Work *k);

static void *work_main(void *arg) {
    Work *k = (Work *)arg;
    if (!claim(&k->claim, W_RUNNING)) {
        work_free(k); /* taken back: nothing read; the copy is this thread's to free */
        return NULL;
    }
    double t0 = seconds();
#ifdef MADV_POPULATE_WRITE
    for (int i = 0; i < 8; i++) /* from the end back, 64 KiB at a time: ahead of the first thread's stores */
        for (size_t n = k->ahead_n[i], step = (size_t)1 << 16; n;) {
            size_t part = n % step ? n % step : step;
            n -= part;
            madvise(k->ahead[i] + n, part, MADV_POPULATE_WRITE);
        }
#endif
    k->status = qs_run(&k->ws, k->p, k->e, k->sep, k->final, NULL, NULL, &k->stop, 0);
    k->took = seconds() - t0;
    return NULL;
}

/* Room in s's columns for the rows a window of `bytes` is expected to make (the rows per byte so far, and a
 * quarter more; once 16 parts' worth of bytes are read), its fresh pages handed to k's thread, which makes them present (MADV_POPULATE_WRITE: no byte
 * changes) before its own part: the kernel's clearing of those pages is done on the second core, not in this
 * thread's row stores (or the merge's copy). Advice only: a page not made present is faulted in as before, and
 * one made present for a column that has moved since (more rows than expected) only costs memory. */
static void work_ahead(QS *s, Work *k, Py_ssize_t bytes) {
#ifdef MADV_POPULATE_WRITE
    static const size_t unit[8] = {8, 1, 4, 4, 4, 4, 56, 16};
    BCol *cols[8] = {&s->t, &s->kind, &s->state, &s->prev, &s->trig, &s->recov, &s->metrics, &s->rtt};
    if (s->in_bytes < 16 * s->split_min || s->in_rows <= 0) return; /* (tests: split_min 1, every split) */
    size_t rows = (size_t)((double)bytes * (double)s->in_rows / (double)s->in_bytes * 1.25) + 64;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    for (int i = 0; i < 8; i++) {
        BCol *c = cols[i];
        size_t need = rows * unit[i];
        if (i >= 6 && !s->keep_metrics) continue; /* (the metrics of a trace whose states they may give: few) */
        if (c->cap < c->len + need && bcol_grow(c, need)) {
            PyErr_Clear(); /* no room: the rows grow the column as they come */
            return;
        }
        uintptr_t a = ((uintptr_t)c->data + c->len + page - 1) & ~(page - 1), b = ((uintptr_t)c->data + c->len + need) & ~(page - 1);
        if (b > a) k->ahead[i] = (char *)a, k->ahead_n[i] = (size_t)(b - a);
    }
#else
    (void)s, (void)k, (void)bytes;
#endif
}

static void work_free(Work *k) {
    BCol *cols[8] = {&k->ws.t, &k->ws.kind, &k->ws.state, &k->ws.prev, &k->ws.trig, &k->ws.recov, &k->ws.metrics, &k->ws.rtt};
    for (int i = 0; i < 8; i++) PyMem_RawFree(cols[i]->data);
    PyMem_RawFree(k->ws.aux.data);
    PyMem_RawFree(k->ws.marks.data);
    wn_free(&k->names);
    PyMem_RawFree(k);
}

/* A copy of s reading [p, e) from the state s has now (rows, side tables and strings of its own). */
static Work *work_new(QS *s, const char *p, const char *e, int sep, int final) {
    Work *k = PyMem_RawCalloc(1, sizeof(Work));
    if (!k) return NULL;
    QS *w = &k->ws;
    memcpy(w, s, sizeof(QS));
    w->table = w->names = NULL;
    w->w = &k->names;
    BCol empty = {NULL, NULL, 0, 0, 1};
    BCol *cols[8] = {&w->t, &w->kind, &w->state, &w->prev, &w->trig, &w->recov, &w->metrics, &w->rtt};
    for (int i = 0; i < 8; i++) {
        *cols[i] = s->spare[i].data ? s->spare[i] : empty;
        s->spare[i] = empty;
    }
    memset(w->spare, 0, sizeof w->spare);
    memset(&w->uses, 0, sizeof(Col));
    memset(&w->aux, 0, sizeof(Col));
    memset(&w->marks, 0, sizeof(Col));
    w->rows = w->trace_row0 = 0;
    w->skipped = 0;
    w->has_t = 0;
    w->tmin = w->tmax = w->row_tmax = 0;
    w->current = W_INHERIT;
    w->first_prev = -1;
    w->lines = w->record_no = 0;
    k->trans0 = s->trans;
    k->p = p, k->e = e, k->sep = sep, k->final = final;
    return k;
}

/* The second thread's part after s's rows (see above); -1 with an exception set. */
static int work_merge(QS *s, Work *k, Seen *seen) {
    QS *w = &k->ws;
    WNames *nm = &k->names;
    int *ids = PyMem_Malloc(sizeof(int) * (size_t)(nm->count ? nm->count : 1));
    if (!ids) { PyErr_NoMemory(); return -1; }
    for (int i = 0; i < nm->count; i++) {
        ids[i] = intern(s->table, s->names, nm->a[i], nm->a[i] + nm->n[i], seen);
        if (ids[i] < 0) { /* -2 cannot be (printable ASCII) */
            if (ids[i] == -2) PyErr_SetString(PyExc_SystemError, "qlog scanner: a string not ASCII from the second thread");
            PyMem_Free(ids);
            return -1;
        }
    }
    int *state = (int *)w->state.data, *prev = (int *)w->prev.data, *trig = (int *)w->trig.data;
    for (Py_ssize_t i = 0; i < w->rows; i++) {
        state[i] = state[i] == W_INHERIT ? s->current : state[i] >= 0 ? ids[state[i]] : state[i];
        if (prev[i] >= 0) prev[i] = ids[prev[i]];
        if (trig[i] >= 0) trig[i] = ids[trig[i]];
    }
    for (int i = 0; i < nm->count; i++)
        if (nm->uses[i] && qs_use_n(s, ids[i], nm->uses[i])) { PyMem_Free(ids); return -1; }
    int wtrans = w->trans - k->trans0;
    if (wtrans && !s->trans) s->first_prev = w->first_prev >= 0 ? ids[w->first_prev] : w->first_prev;
    if (w->current != W_INHERIT) s->current = ids[w->current];
    PyMem_Free(ids);
    /* side tables: kept from s's point on only if s keeps them now (no state event in its part) */
    if (qs_keeps_aux(s)) {
        if (wtrans && s->states == 1) { /* the second part's first state event */
            s->aux.len = s->marks.len = 0;
            if (!s->keep_metrics) s->metrics.len = s->rtt.len = 0;
        }
        long long off = (long long)(s->rows - s->trace_row0), *row = (long long *)w->aux.data;
        for (size_t i = 0; i < w->aux.len / (8 * (1 + N_AUX)); i++) row[i * (1 + N_AUX)] += off;
        if (rcol_put(&s->aux, w->aux.data, w->aux.len) || rcol_put(&s->marks, w->marks.data, w->marks.len)) {
            PyErr_NoMemory();
            return -1;
        }
    } else if (!s->keep_metrics) /* the second part's metrics (the state events of the first tell the states) */
        w->metrics.len = w->rtt.len = 0;
    BCol *to[8] = {&s->t, &s->kind, &s->state, &s->prev, &s->trig, &s->recov, &s->metrics, &s->rtt};
    BCol *from[8] = {&w->t, &w->kind, &w->state, &w->prev, &w->trig, &w->recov, &w->metrics, &w->rtt};
    for (int i = 0; i < 8; i++)
        if (from[i]->len && bcol_put(to[i], from[i]->data, from[i]->len)) return -1;
    if (w->rows && (s->rows == s->trace_row0 || w->row_tmax > s->row_tmax)) s->row_tmax = w->row_tmax;
    s->trans += wtrans;
    s->skipped += w->skipped;
    s->rows += w->rows;
    if (w->has_t) {
        if (!s->has_t || w->tmin < s->tmin) s->tmin = w->tmin;
        if (!s->has_t || w->tmax > s->tmax) s->tmax = w->tmax;
        s->has_t = 1;
    }
    s->lines += w->lines;
    s->record_no += w->record_no;
    return 0;
}

/* k's row columns kept (emptied) for the next second thread, unless they grew past 16 MiB (a window grown for
 * a long record): work_free() then frees the rest. */
static void work_spare(QS *s, Work *k) {
    BCol *cols[8] = {&k->ws.t, &k->ws.kind, &k->ws.state, &k->ws.prev, &k->ws.trig, &k->ws.recov, &k->ws.metrics, &k->ws.rtt};
    for (int i = 0; i < 8; i++)
        if (!s->spare[i].data && cols[i]->data && cols[i]->cap <= ((size_t)1 << 24)) {
            s->spare[i] = *cols[i];
            s->spare[i].len = 0;
            cols[i]->data = NULL;
        }
}

/* The first thread's share of the next split moved halfway towards the one that would have made both parts of
 * this one (share of its bytes, seconds each) take as long: a thread slowed by Python, page faults or another
 * process on its core gets less. Where a run is split changes no row, table or report (see above). */
static void split_after(QS *s, double share, double took, double took2) {
    if (!(took > 0 && took2 > 0 && share > 0 && share < 1)) return;
    double r1 = share / took, r2 = (1 - share) / took2, best = r1 / (r1 + r2);
    double at = 0.5 * (s->split_at + best);
    s->split_at = at < 0.25 ? 0.25 : at > 0.75 ? 0.75 : at;
}

/* records(buffer, start, end, sep, final, handler) -> consumed: the records of buffer[start:end] split at
 * the byte sep; the last piece only when final (it is the start of the next window otherwise). Records
 * this scanner does not decide go to handler(record_bytes, line, record_number). */
static PyObject *qs_records(QS *s, PyObject *args) {
    Py_buffer buf;
    Py_ssize_t start, end;
    int sep, final;
    PyObject *handler;
    if (!PyArg_ParseTuple(args, "y*nnipO", &buf, &start, &end, &sep, &final, &handler)) return NULL;
    clamp_window(buf.len, &start, &end);
    const char *base = (const char *)buf.buf, *p = base + start, *e = base + end;
    Seen seen;
    PyObject *res = NULL;
    int split = s->threads > 1;
    Py_ssize_t rows0 = s->rows;
    if (seen_init(&seen, 0) < 0) goto out;
    for (;;) {
        const char *mid = NULL;
        Work *k = NULL;
        pthread_t th;
        if (split && s->header && !s->delta && e - p >= 2 * (s->split_min > 0 ? s->split_min : 1)) {
            Py_ssize_t least = s->split_min > 0 ? s->split_min : 1, first = (Py_ssize_t)((double)(e - p) * s->split_at);
            const char *at = p + (first < least ? least : first > (e - p) - least ? (e - p) - least : first);
            mid = memchr(at, sep, (size_t)(e - at));
            if (mid && ++mid < e && (k = work_new(s, mid, e, sep, final))) {
                work_ahead(s, k, e - p);
                if (pthread_create(&th, NULL, work_main, k)) {
                    work_free(k);
                    k = NULL;
                }
            }
        }
        if (!k) { /* one thread; while the header is not read, up to it (then the rest may be split) */
            int r = qs_run(s, p, e, sep, final, handler, &seen, &p, split && !s->header);
            if (r < 0) goto out;
            if (r == 0) break;
            continue;
        }
        int gen = s->gen;
        Py_ssize_t row0 = s->trace_row0;
        const char *at;
        double t0 = seconds();
        int r = qs_run(s, p, mid, sep, 0, handler, &seen, &at, 0);
        double took = seconds() - t0;
        if ((s->take_back || r < 0) && claim(&k->claim, W_TAKEN_BACK)) {
            pthread_detach(th); /* it has not begun: read its part here, and split no more in this call */
            if (r < 0) goto out;
            split = 0;
            p = mid;
            continue;
        }
        Py_BEGIN_ALLOW_THREADS
        pthread_join(th, NULL);
        Py_END_ALLOW_THREADS
        if (r < 0) {
            work_free(k);
            goto out;
        }
        if (k->status < 0 || !s->header || s->delta || s->gen != gen || s->trace_row0 != row0) {
            /* out of memory there, or what its part assumed changed: read it here */
            split = k->status >= 0 && !s->delta;
            work_free(k);
            p = mid;
            continue;
        }
        r = work_merge(s, k, &seen);
        int status = k->status;
        work_spare(s, k);
        split_after(s, (double)(mid - p) / (double)(k->e - p), took, k->took);
        p = k->stop;
        work_free(k);
        if (r < 0) goto out;
        if (status == 0) break;
    }
    res = PyLong_FromSsize_t(p - base);
    s->in_bytes += p - (base + start);
    if (s->rows > rows0) s->in_rows += s->rows - rows0;
out:
    PyMem_Free(seen.slot);
    PyBuffer_Release(&buf);
    return res;
}

/* ---- The JSON document walker: {"traces": [{..., "events": [event, ...]}, ...]} ----
 *
 * The document, each trace object and each events array are walked here; a member value or an event is
 * taken whole (it must fit the window; the Python side grows the window up to max_value bytes, then the
 * value is skipped and reported). The handler hears (code, key, value, line, trace, event):
 *   1 a member of the document (title, description, code_version, configuration)
 *   2 a trace begins (an object in traces[])        3 a member of a trace (all but events)
 *   4 the trace's events array begins               5 an event not decided here
 *   6 the events array ends                          7 the trace ends
 *   8 an element of traces[] that is not an object   9 the document is broken or cut here (value: why)
 *  10 a value longer than max_value, skipped (key: its member name or None for an event)
 *  11 bytes after the document                    12 the traces array begins
 * The grammar is Python's json module's (what the reader it stands for read with json.loads): NaN,
 * Infinity and -Infinity are values, strings hold no raw control character. */

enum { D_TOP, D_DOC, D_TRACES, D_TRACE, D_EVENTS, D_AFTER, D_DONE };
enum { V_OK, V_MORE, V_BAD };

static int is_delim(int c) { return c == ',' || c == ']' || c == '}' || c == ':' || jws(c); }

/* The end of the JSON value at p (Python json's grammar), iteratively: *end set for V_OK, *why for V_BAD;
 * V_MORE when the value runs past e. */
static int value_end(const char *p, const char *e, const char **end, const char **why) {
    int depth = 0, integer;
    char stack[1024];
    int expect_key = 0; /* inside an object, before a key */
    for (;;) {
        p = skip_jws(p, e);
        if (p >= e) return V_MORE;
        if (expect_key) {
            if (*p != '"') { *why = "a member name"; return V_BAD; }
        }
        int plain;
        const char *q;
        switch (*p) {
        case '"':
            q = jstring(p, e, &plain);
            if (!q) {
                /* jstring refuses non-ASCII: walk the string again allowing it */
                const char *r = p + 1;
                for (; r < e; r++) {
                    unsigned char c = (unsigned char)*r;
                    if (c == '"') break;
                    if (c < 0x20) { *why = "a control character in a string"; return V_BAD; }
                    if (c == '\\' && !(r = escape_end(r, e, why))) return *why ? V_BAD : V_MORE;
                }
                if (r >= e) return V_MORE;
                q = r + 1;
            }
            p = q;
            if (expect_key) {
                p = skip_jws(p, e);
                if (p >= e) return V_MORE;
                if (*p != ':') { *why = "':'"; return V_BAD; }
                p++;
                expect_key = 0;
                continue; /* the member's value */
            }
            break;
        case '{': case '[':
            if (depth >= (int)sizeof stack) { *why = "nesting deeper than 1024"; return V_BAD; }
            stack[depth++] = *p == '{' ? '}' : ']';
            p = skip_jws(p + 1, e);
            if (p >= e) return V_MORE;
            if (*p == stack[depth - 1]) { p++; depth--; break; }
            expect_key = stack[depth - 1] == '}';
            continue;
        case 't': case 'f': case 'n': case 'N': case 'I': {
            static const char *const words[] = {"true", "false", "null", "NaN", "Infinity"};
            int i = *p == 't' ? 0 : *p == 'f' ? 1 : *p == 'n' ? 2 : *p == 'N' ? 3 : 4;
            size_t n = strlen(words[i]);
            if ((size_t)(e - p) < n) { if (memcmp(p, words[i], (size_t)(e - p))) { *why = "a value"; return V_BAD; } return V_MORE; }
            if (memcmp(p, words[i], n)) { *why = "a value"; return V_BAD; }
            p += n;
            break;
        }
        default:
            if (*p == '-' && e - p >= 2 && p[1] == 'I') {
                if ((size_t)(e - p) < 9) { if (memcmp(p, "-Infinity", (size_t)(e - p))) { *why = "a value"; return V_BAD; } return V_MORE; }
                if (memcmp(p, "-Infinity", 9)) { *why = "a value"; return V_BAD; }
                p += 9;
                break;
            }
            {
                /* Python json's NUMBER_RE: -?(0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)? (no length limit) */
                const char *r = p;
                if (r < e && *r == '-') r++;
                if (r >= e) return V_MORE;
                if (*r < '0' || *r > '9') { *why = "a value"; return V_BAD; }
                if (*r == '0') r++;
                else while (r < e && *r >= '0' && *r <= '9') r++;
                if (r < e && *r == '.' && r + 1 < e && r[1] >= '0' && r[1] <= '9') {
                    r++;
                    while (r < e && *r >= '0' && *r <= '9') r++;
                } else if (r + 1 >= e && r < e && *r == '.') return V_MORE;
                if (r < e && (*r == 'e' || *r == 'E')) {
                    const char *x = r + 1;
                    if (x < e && (*x == '+' || *x == '-')) x++;
                    if (x < e && *x >= '0' && *x <= '9') {
                        while (x < e && *x >= '0' && *x <= '9') x++;
                        r = x;
                    } else if (x >= e) return V_MORE;
                }
                if (r >= e) return V_MORE; /* the number may go on */
                p = r;
                (void)integer;
            }
        }
        /* after a value: the end, or ',' / the container's close */
        if (!depth) { *end = p; return V_OK; }
        p = skip_jws(p, e);
        if (p >= e) return V_MORE;
        if (*p == ',') {
            p++;
            expect_key = stack[depth - 1] == '}';
            continue;
        }
        if (*p == stack[depth - 1]) {
            p++;
            depth--;
            while (depth) { /* closes may follow */
                const char *r = skip_jws(p, e);
                if (r >= e) return V_MORE;
                if (*r == ',') { p = r + 1; expect_key = stack[depth - 1] == '}'; break; }
                if (*r == stack[depth - 1]) { p = r + 1; depth--; continue; }
                *why = "',' or a closing bracket";
                return V_BAD;
            }
            if (!depth) { *end = p; return V_OK; }
            continue;
        }
        *why = "',' or a closing bracket";
        return V_BAD;
    }
}

static int key_is(const char *a, const char *b, const char *word) {
    size_t n = strlen(word);
    return (size_t)(b - a) == n && memcmp(a, word, n) == 0;
}

static const char *const DOC_KEYS[] = {"title", "description", "code_version", "configuration", NULL};
static const char *const TRACE_KEYS[] = {"title", "description", "configuration", "common_fields", "vantage_point",
                                         "event_fields", "events", NULL};

static int key_in(const char *a, const char *b, const char *const *keys) {
    for (; *keys; keys++)
        if (key_is(a, b, *keys)) return 1;
    return 0;
}

/* document(buffer, start, end, final, handler) -> consumed. */
static PyObject *qs_document(QS *s, PyObject *args) {
    Py_buffer buf;
    Py_ssize_t start, end;
    int final;
    PyObject *handler;
    if (!PyArg_ParseTuple(args, "y*nnpO", &buf, &start, &end, &final, &handler)) return NULL;
    clamp_window(buf.len, &start, &end);
    const char *base = (const char *)buf.buf, *p = base + start, *e = base + end, *line_at = p;
    PyObject *res = NULL;
    Seen seen;
    if (seen_init(&seen, 0) < 0) goto out;
#define LINE_AT(x) (s->lines += count_nl(line_at, (x)), line_at = (x), s->lines + 1)
#define BROKEN(at, why)                                                                                  \
    do {                                                                                                 \
        long long ln_ = LINE_AT(at);                                                                     \
        if (call_handler(handler, "(iysLLL)", 9, NULL, why, ln_, s->trace_index, s->event_index)) goto out; \
        s->dstate = D_DONE;                                                                              \
        p = e;                                                                                           \
        goto done;                                                                                       \
    } while (0)
    while (p < e) {
        if (s->skip_what) { /* inside a value longer than max_value: drop bytes to its end */
            int ended = 0;
            for (; p < e && !ended; p++) {
                unsigned char c = (unsigned char)*p;
                if (s->skip_str) {
                    if (s->skip_esc) s->skip_esc = 0;
                    else if (c == '\\') s->skip_esc = 1;
                    else if (c == '"') { s->skip_str = 0; ended = !s->skip_depth; }
                } else if (c == '"') s->skip_str = 1;
                else if (c == '{' || c == '[') s->skip_depth++;
                else if (c == '}' || c == ']') {
                    if (s->skip_depth <= 1) ended = 1;
                    s->skip_depth--;
                } else if (!s->skip_depth && is_delim(c)) { ended = 1; p--; } /* a scalar ends before this byte */
            }
            if (!ended) break;
            if (s->skip_what == 2) s->event_index++;
            s->skip_what = 0;
            s->dexpect = 1;
            continue;
        }
        p = skip_jws(p, e);
        if (p >= e) break;
        int st = s->dstate;
        if (st == D_DONE) { p = e; break; }
        if (st == D_AFTER) {
            long long ln_ = LINE_AT(p);
            if (call_handler(handler, "(iyyLLL)", 11, NULL, NULL, ln_, s->trace_index, s->event_index)) goto out;
            s->dstate = D_DONE;
            p = e;
            break;
        }
        if (st == D_TOP) {
            if (e - p >= 3 && (unsigned char)p[0] == 0xEF && (unsigned char)p[1] == 0xBB && (unsigned char)p[2] == 0xBF) { p += 3; continue; }
            if (*p != '{') { /* no object, so no traces[] array: the file is skipped as such, read no further */
                s->dstate = D_DONE;
                p = e;
                break;
            }
            p++;
            s->dstate = D_DOC;
            s->dexpect = 0;
            continue;
        }
        char close = st == D_DOC || st == D_TRACE ? '}' : ']';
        if (s->dexpect == 1) { /* after a member or element */
            if (*p == ',') { p++; s->dexpect = 2; continue; }
            if (*p != close) BROKEN(p, "',' or a closing bracket");
        }
        if (*p == close) {
            if (s->dexpect == 2) BROKEN(p, "a value after ','");
            p++;
            s->dexpect = 1;
            if (st == D_DOC) s->dstate = D_AFTER;
            else if (st == D_TRACES) s->dstate = D_DOC;
            else if (st == D_TRACE) {
                if (call_handler(handler, "(iyyLLL)", 7, NULL, NULL, s->lines + 1, s->trace_index, s->event_index)) goto out;
                s->trace_index++;
                s->dstate = D_TRACES;
            } else {
                if (call_handler(handler, "(iyyLLL)", 6, NULL, NULL, s->lines + 1, s->trace_index, s->event_index)) goto out;
                s->dstate = D_TRACE;
            }
            continue;
        }
        const char *ka = NULL, *kb = NULL, *v = p, *vend, *why = NULL;
        if (st == D_DOC || st == D_TRACE) { /* "key": value */
            int plain;
            const char *q;
            if (*p != '"') BROKEN(p, "a member name");
            if (value_end(p, e, &q, &why) != V_OK) {
                if (why) BROKEN(p, why);
                if (final) BROKEN(p, "the end of a member name");
                if (e - p > s->max_value) BROKEN(p, "a member name this long");
                break;
            }
            (void)plain;
            ka = p + 1;
            kb = q - 1;
            v = skip_jws(q, e);
            if (v >= e) { if (final) BROKEN(p, "':'"); break; }
            if (*v != ':') BROKEN(v, "':'");
            v = skip_jws(v + 1, e);
            if (v >= e) { if (final) BROKEN(p, "a value"); break; }
            if (st == D_DOC && *v == '[' && key_is(ka, kb, "traces")) {
                if (call_handler(handler, "(iyyLLL)", 12, NULL, NULL, s->lines + 1, s->trace_index, 0LL)) goto out;
                p = v + 1;
                s->dstate = D_TRACES;
                s->dexpect = 0;
                continue;
            }
            if (st == D_TRACE && *v == '[' && key_is(ka, kb, "events")) {
                long long ln_ = LINE_AT(v);
                if (call_handler(handler, "(iyyLLL)", 4, NULL, NULL, ln_, s->trace_index, 0LL)) goto out;
                p = v + 1;
                s->dstate = D_EVENTS;
                s->dexpect = 0;
                s->event_index = 0;
                continue;
            }
        } else if (st == D_TRACES && *p == '{') { /* a trace */
            long long ln_ = LINE_AT(p);
            if (call_handler(handler, "(iyyLLL)", 2, NULL, NULL, ln_, s->trace_index, 0LL)) goto out;
            p++;
            s->dstate = D_TRACE;
            s->dexpect = 0;
            continue;
        }
        /* a whole value at v: a member's, an event, or a traces[] element that is not an object */
        int type, r;
        vend = (st == D_EVENTS && *v == '{') ? jvalue(v, e, 0, &type) : NULL;
        if (vend) r = V_OK;
        else r = value_end(v, e, &vend, &why);
        if (r == V_BAD) BROKEN(v, why);
        if (r == V_MORE) {
            if (final) BROKEN(v, "the end of a value (the file is cut)");
            if (e - v > s->max_value) { /* too long: report, then skip it */
                long long ln_ = LINE_AT(v);
                if (call_handler(handler, "(iy#yLLL)", 10, ka, (Py_ssize_t)(ka ? kb - ka : 0), NULL, ln_, s->trace_index,
                                 s->event_index))
                    goto out;
                s->skip_what = st == D_EVENTS ? 2 : 1;
                s->skip_depth = 0;
                s->skip_str = 0;
                s->skip_esc = 0;
                if (*v == '"') { s->skip_str = 1; p = v + 1; }
                else if (*v == '{' || *v == '[') { s->skip_depth = 1; p = v + 1; }
                else p = v;
                continue;
            }
            break; /* more bytes first */
        }
        if (st == D_EVENTS) {
            r = *v == '{' ? qs_event(s, v, vend, &seen) : 0;
            if (r < 0) goto out;
            if (r == 0) {
                long long ln_ = LINE_AT(v);
                if (call_handler(handler, "(iyy#LLL)", 5, NULL, v, (Py_ssize_t)(vend - v), ln_, s->trace_index, s->event_index))
                    goto out;
            }
            s->event_index++;
        } else if (st == D_TRACES) {
            long long ln_ = LINE_AT(v);
            if (call_handler(handler, "(iyyLLL)", 8, NULL, NULL, ln_, s->trace_index, 0LL)) goto out;
            s->trace_index++;
        } else if (key_in(ka, kb, st == D_DOC ? DOC_KEYS : TRACE_KEYS)) {
            long long ln_ = LINE_AT(v);
            if (call_handler(handler, "(iy#y#LLL)", st == D_DOC ? 1 : 3, ka, (Py_ssize_t)(kb - ka), v, (Py_ssize_t)(vend - v), ln_,
                             s->trace_index, 0LL))
                goto out;
        }
        p = vend;
        s->dexpect = 1;
    }
    if (final && s->dstate != D_DONE && s->dstate != D_AFTER) BROKEN(e, "more (the file ends inside the document)");
done:
    s->lines += count_nl(line_at, p);
    res = PyLong_FromSsize_t(p - base);
out:
    PyMem_Free(seen.slot);
    PyBuffer_Release(&buf);
    return res;
#undef LINE_AT
#undef BROKEN
}

/* put(kind, t, state, prev, trigger, recovery, metrics 7-tuple, rtt 2-tuple): a row the Python handler made. */
static PyObject *qs_put(QS *s, PyObject *args) {
    int kind, state, prev, trig, recov;
    double t;
    long long m[7];
    double rtt[2], aux[N_AUX];
    if (!PyArg_ParseTuple(args, "idiiii(LLLLLLL)(dd)(ddd)", &kind, &t, &state, &prev, &trig, &recov, &m[0], &m[1], &m[2], &m[3],
                          &m[4], &m[5], &m[6], &rtt[0], &rtt[1], &aux[0], &aux[1], &aux[2]))
        return NULL;
    if (qs_row(s, kind, t, state, prev, trig, recov, m, rtt, aux)) return NULL;
    Py_RETURN_NONE;
}

/* mark(t, code): a loss (1), timer (2) or PTO (3) expiry the Python handler read. */
static PyObject *qs_mark_py(QS *s, PyObject *args) {
    double t;
    int code;
    if (!PyArg_ParseTuple(args, "di", &t, &code)) return NULL;
    if (qs_mark(s, t, code)) return NULL;
    Py_RETURN_NONE;
}

/* trace() -> (t, kind, metrics, rtt, aux, marks) of the trace being read, as copies: for the metric-state reader. */
static PyObject *qs_trace(QS *s, PyObject *unused) {
    Py_ssize_t r0 = s->trace_row0, n = s->rows - r0, m0 = s->keep_metrics ? r0 : 0; /* (not kept: the trace's only) */
    if ((Py_ssize_t)s->metrics.len != 56 * (m0 + n)) {
        PyErr_SetString(PyExc_RuntimeError, "qlog scanner: trace() of a trace whose metrics were not kept");
        return NULL;
    }
    return Py_BuildValue("(y#y#y#y#y#y#)", s->t.data ? s->t.data + 8 * r0 : "", 8 * n, s->kind.data ? s->kind.data + r0 : "", n,
                         s->metrics.data ? s->metrics.data + 56 * m0 : "", 56 * n, s->rtt.data ? s->rtt.data + 16 * m0 : "",
                         16 * n, s->aux.data ? s->aux.data : "", (Py_ssize_t)s->aux.len, s->marks.data ? s->marks.data : "",
                         (Py_ssize_t)s->marks.len);
}

static PyObject *col_bytes(Col *c) {
    PyObject *b = PyBytes_FromStringAndSize(c->data ? c->data : "", (Py_ssize_t)c->len);
    PyMem_RawFree(c->data);
    c->data = NULL;
    c->len = c->cap = 0;
    return b;
}

/* take() -> the rows as 8 bytearray columns (handed over, not copied); the scanner starts an empty batch
 * (between traces only). */
static PyObject *qs_take(QS *s, PyObject *unused) {
    BCol *cols[8] = {&s->t, &s->kind, &s->state, &s->prev, &s->trig, &s->recov, &s->metrics, &s->rtt};
    PyObject *out = PyTuple_New(8);
    if (!out) return NULL;
    if (!s->keep_metrics) s->metrics.len = s->rtt.len = 0; /* (the last trace's, if any: not the batch's) */
    for (int i = 0; i < 8; i++) {
        PyObject *b = bcol_take(cols[i]);
        if (!b) { Py_DECREF(out); return NULL; }
        PyTuple_SET_ITEM(out, i, b);
    }
    s->rows = s->trace_row0 = 0;
    return out;
}

static PyObject *qs_take_uses(QS *s, PyObject *unused) { return col_bytes(&s->uses); }

/* new_trace(): the next rows are a new trace's (the file's line and record counts go on). */
static PyObject *qs_new_trace(QS *s, PyObject *unused) {
    s->header = s->delta = s->has_t = s->trans = 0;
    s->skipped = 0;
    s->aux.len = s->marks.len = 0;
    if (!s->keep_metrics) s->metrics.len = s->rtt.len = 0;
    s->current = s->first_prev = -1;
    s->last_time = s->tmin = s->tmax = s->row_tmax = 0;
    s->trace_row0 = s->rows;
    Py_RETURN_NONE;
}

/* new_file(): a new file (line and record counts and the document walker from the start) and trace. */
static PyObject *qs_new_file(QS *s, PyObject *unused) {
    s->lines = s->record_no = 0;
    s->dstate = D_TOP;
    s->dexpect = 0;
    s->skip_what = s->skip_depth = s->skip_str = s->skip_esc = 0;
    s->trace_index = s->event_index = 0;
    return qs_new_trace(s, NULL);
}

/* drop_trace(): forget the rows of the trace being read (it has no transition). */
static PyObject *qs_drop_trace(QS *s, PyObject *unused) {
    BCol *cols[8] = {&s->t, &s->kind, &s->state, &s->prev, &s->trig, &s->recov, &s->metrics, &s->rtt};
    static const size_t width[8] = {8, 1, 4, 4, 4, 4, 56, 16};
    for (int i = 0; i < 8; i++) cols[i]->len = (size_t)(i < 6 || s->keep_metrics ? s->trace_row0 : 0) * width[i];
    s->rows = s->trace_row0;
    Py_RETURN_NONE;
}

/* tables(table, names): the string table of the next batch (between traces only). */
static PyObject *qs_tables(QS *s, PyObject *args) {
    PyObject *table, *names;
    if (!PyArg_ParseTuple(args, "O!O!", &PyDict_Type, &table, &PyList_Type, &names)) return NULL;
    Py_INCREF(table);
    Py_INCREF(names);
    Py_XSETREF(s->table, table);
    Py_XSETREF(s->names, names);
    s->gen++;
    Py_RETURN_NONE;
}

static int qs_init(QS *s, PyObject *args, PyObject *kw) {
    PyObject *table, *names;
    if (!PyArg_ParseTuple(args, "O!O!", &PyDict_Type, &table, &PyList_Type, &names)) return -1;
    Py_INCREF(table);
    Py_INCREF(names);
    Py_XSETREF(s->table, table);
    Py_XSETREF(s->names, names);
    s->max_value = 1 << 24;
    s->states = 1;
    s->keep_metrics = 1;
    cpu_set_t cpus;
    s->threads = sched_getaffinity(0, sizeof cpus, &cpus) == 0 && CPU_COUNT(&cpus) >= 2 ? 2 : 1;
    s->split_min = 1 << 16;
    s->split_at = 0.5;
    s->take_back = 1;
    s->simd = 1;
    qs_new_file(s, NULL);
    return 0;
}

static void qs_dealloc(QS *s) {
    BCol *cols[8] = {&s->t, &s->kind, &s->state, &s->prev, &s->trig, &s->recov, &s->metrics, &s->rtt};
    for (int i = 0; i < 8; i++) {
        Py_XDECREF(cols[i]->ba);
        PyMem_RawFree(s->spare[i].data);
    }
    PyMem_RawFree(s->uses.data);
    PyMem_RawFree(s->aux.data);
    PyMem_RawFree(s->marks.data);
    Py_XDECREF(s->table);
    Py_XDECREF(s->names);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

static PyMethodDef qs_methods[] = {
    {"records", (PyCFunction)qs_records, METH_VARARGS, "records(buffer, start, end, sep, final, handler) -> consumed"},
    {"document", (PyCFunction)qs_document, METH_VARARGS, "document(buffer, start, end, final, handler) -> consumed"},
    {"put", (PyCFunction)qs_put, METH_VARARGS, "put(kind, t, state, prev, trigger, recovery, metrics, rtt)"},
    {"take", (PyCFunction)qs_take, METH_NOARGS, "take() -> 8 column bytes"},
    {"take_uses", (PyCFunction)qs_take_uses, METH_NOARGS, "take_uses() -> int64 uses per name id"},
    {"new_trace", (PyCFunction)qs_new_trace, METH_NOARGS, "new_trace()"},
    {"new_file", (PyCFunction)qs_new_file, METH_NOARGS, "new_file()"},
    {"drop_trace", (PyCFunction)qs_drop_trace, METH_NOARGS, "drop_trace()"},
    {"tables", (PyCFunction)qs_tables, METH_VARARGS, "tables(table, names)"},
    {"mark", (PyCFunction)qs_mark_py, METH_VARARGS, "mark(t, code): a loss (1), timer (2) or PTO (3) expiry"},
    {"trace", (PyCFunction)qs_trace, METH_NOARGS, "trace() -> (t, kind, metrics, rtt, aux, marks) of the trace being read"},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef qs_members[] = {
    {"header", T_INT, offsetof(QS, header), 0, "the header record was read"},
    {"delta", T_INT, offsetof(QS, delta), 0, "times are deltas"},
    {"has_t", T_INT, offsetof(QS, has_t), 0, "a time was seen"},
    {"current", T_INT, offsetof(QS, current), 0, "id of the state current (-1: none yet)"},
    {"first_prev", T_INT, offsetof(QS, first_prev), READONLY, "from-state id of the trace's first transition"},
    {"trans", T_INT, offsetof(QS, trans), READONLY, "transitions of the trace"},
    {"states", T_INT, offsetof(QS, states), 0, "where states come from: 0 logged, 1 auto, 2 metrics"},
    {"keep_metrics", T_INT, offsetof(QS, keep_metrics), 0,
     "1: every row's metrics (the default); 0: take() gives none, trace() those of the trace being read while its states may come from them"},
    {"skipped", T_LONGLONG, offsetof(QS, skipped), READONLY, "state events not made rows (states=metrics)"},
    {"last_time", T_DOUBLE, offsetof(QS, last_time), 0, "the last time (deltas)"},
    {"tmin", T_DOUBLE, offsetof(QS, tmin), 0, "least time seen"},
    {"tmax", T_DOUBLE, offsetof(QS, tmax), 0, "greatest time seen"},
    {"row_tmax", T_DOUBLE, offsetof(QS, row_tmax), READONLY, "greatest time of the trace's rows"},
    {"lines", T_LONGLONG, offsetof(QS, lines), 0, "newlines before the next byte"},
    {"record_no", T_LONGLONG, offsetof(QS, record_no), 0, "records so far"},
    {"rows", T_PYSSIZET, offsetof(QS, rows), READONLY, "rows of the batch"},
    {"trace_row0", T_PYSSIZET, offsetof(QS, trace_row0), READONLY, "the trace's first row"},
    {"max_value", T_PYSSIZET, offsetof(QS, max_value), 0, "longest document value read"},
    {"trace_index", T_LONGLONG, offsetof(QS, trace_index), READONLY, "traces[] element"},
    {"event_index", T_LONGLONG, offsetof(QS, event_index), READONLY, "events[] element"},
    {"threads", T_INT, offsetof(QS, threads), 0, "threads records() reads a long run of records with (1 or 2)"},
    {"split_min", T_PYSSIZET, offsetof(QS, split_min), 0, "the least bytes a thread's part of records() holds"},
    {"take_back", T_INT, offsetof(QS, take_back), 0, "1: a second part not begun in time is read by the first thread"},
    {"simd", T_INT, offsetof(QS, simd), 0, "1: the fast paths (AVX2 where the CPU has it, guesses; the default), 0: SSE2 and the general matcher (the same results)"},
    {NULL},
};

static PyTypeObject QSType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "quicsm.traces._scan.QlogScanner",
    .tp_basicsize = sizeof(QS),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Rows of qlog traces, read window by window (see _scan.c).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)qs_init,
    .tp_dealloc = (destructor)qs_dealloc,
    .tp_methods = qs_methods,
    .tp_members = qs_members,
};

/* ---- Mapped plain files: a log's bytes scanned where the page cache holds them, no read() copy ----
 *
 * map_file(fd, size) -> Mapped: the first `size` bytes of the file, mapped read-only (a buffer). A file
 * truncated while it is mapped (logrotate's copytruncate on a live log) would kill the process with SIGBUS
 * at the first touch of a page past its new end; here a SIGBUS handler (installed when a file is mapped,
 * again if something replaced it) maps zero pages over that mapping from the file's end now, notes it
 * (`faulted`) and lets the access go on. The caller then stops using the mapping and reads the rest with
 * read(), which says what the file holds now (logscan.py reports the shrink). A SIGBUS elsewhere goes to
 * the handler that was there before (the default kills the process as ever). The handler touches only
 * this table and calls fstat and mmap (system calls), so it is safe in any thread. */
#include <sys/mman.h>
#include <sys/stat.h>
#include <errno.h>
#include <signal.h>
#include <unistd.h>
#include <stdint.h>
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

#define MAX_MAPS 64
static struct {
    char *volatile base;
    volatile size_t len;
    volatile sig_atomic_t faulted;
    volatile int fd;
} maps[MAX_MAPS];
static struct sigaction bus_before;
static int bus_ours;
static size_t page_size;

static void on_bus(int sig, siginfo_t *si, void *ctx) {
    char *a = (char *)si->si_addr;
    for (int i = 0; i < MAX_MAPS; i++) {
        char *b = maps[i].base;
        size_t n = maps[i].len;
        if (b && a >= b && a < b + n) {
            char *page = (char *)((uintptr_t)a & ~(uintptr_t)(page_size - 1));
            struct stat st; /* zeros from the file's end now: one signal, not one a page */
            if (fstat(maps[i].fd, &st) == 0 && st.st_size >= 0 && (size_t)st.st_size < n) {
                char *end = b + (((size_t)st.st_size + page_size - 1) & ~(page_size - 1));
                if (end < page) page = end;
            }
            if (mmap(page, (size_t)(b + n - page), PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != MAP_FAILED) {
                maps[i].faulted = 1;
                return; /* the access is retried and reads zeros */
            }
        }
    }
    if (bus_before.sa_flags & SA_SIGINFO) {
        bus_before.sa_sigaction(sig, si, ctx);
    } else if (bus_before.sa_handler != SIG_DFL && bus_before.sa_handler != SIG_IGN) {
        bus_before.sa_handler(sig);
    } else { /* not a mapped file's: the default action, when the access is retried */
        sigaction(SIGBUS, &bus_before, NULL);
        bus_ours = 0;
    }
}

/* Our handler in place (again, if something replaced it since: faulthandler.enable()). */
static int guard_bus(void) {
    struct sigaction now;
    if (sigaction(SIGBUS, NULL, &now) != 0) return -1;
    if (bus_ours && (now.sa_flags & SA_SIGINFO) && now.sa_sigaction == on_bus) return 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_bus;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGBUS, &sa, &now) != 0) return -1;
    if (!((now.sa_flags & SA_SIGINFO) && now.sa_sigaction == on_bus)) bus_before = now;
    bus_ours = 1;
    return 0;
}

typedef struct {
    PyObject_HEAD
    char *base;
    Py_ssize_t size;
    Py_ssize_t exports;
    int slot;
} Mapped;

static PyTypeObject MappedType;

static PyObject *map_file(PyObject *self, PyObject *args) {
    int fd;
    Py_ssize_t size;
    if (!PyArg_ParseTuple(args, "in", &fd, &size)) return NULL;
    if (size <= 0) {
        PyErr_SetString(PyExc_ValueError, "map_file: size must be positive");
        return NULL;
    }
    if (!page_size) page_size = (size_t)sysconf(_SC_PAGESIZE);
    int slot = -1;
    for (int i = 0; i < MAX_MAPS; i++)
        if (!maps[i].base) { slot = i; break; }
    if (slot < 0) {
        PyErr_SetString(PyExc_OSError, "map_file: too many files mapped at once");
        return NULL;
    }
    if (guard_bus() != 0) return PyErr_SetFromErrno(PyExc_OSError);
    void *base = mmap(NULL, (size_t)size, PROT_READ, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) return PyErr_SetFromErrno(PyExc_OSError);
    Mapped *m = PyObject_New(Mapped, &MappedType);
    if (!m) {
        munmap(base, (size_t)size);
        return NULL;
    }
    m->base = base;
    m->size = size;
    m->exports = 0;
    m->slot = slot;
    maps[slot].faulted = 0;
    maps[slot].fd = fd;
    maps[slot].len = (size_t)size;
    maps[slot].base = base; /* last: the handler reads base, then len */
    return (PyObject *)m;
}

static int mapped_unmap(Mapped *m) {
    if (!m->base) return 0;
    if (m->exports) {
        PyErr_SetString(PyExc_BufferError, "a mapped file with views of it cannot be closed");
        return -1;
    }
    maps[m->slot].base = NULL;
    munmap(m->base, (size_t)m->size);
    m->base = NULL;
    return 0;
}

static int mapped_open(Mapped *m) {
    if (m->base) return 0;
    PyErr_SetString(PyExc_ValueError, "the mapped file is closed");
    return -1;
}

static int mapped_range(Mapped *m, Py_ssize_t *a, Py_ssize_t *b) {
    if (mapped_open(m) < 0) return -1;
    if (*a < 0) *a = 0;
    if (*b > m->size) *b = m->size;
    if (*b < *a) *b = *a;
    return 0;
}

static PyObject *mapped_find(Mapped *m, PyObject *args) {
    int c;
    Py_ssize_t a, b;
    if (!PyArg_ParseTuple(args, "inn", &c, &a, &b) || mapped_range(m, &a, &b) < 0) return NULL;
    const char *hit = memchr(m->base + a, c, (size_t)(b - a));
    return PyLong_FromSsize_t(hit ? hit - m->base : -1);
}

static PyObject *mapped_rfind(Mapped *m, PyObject *args) {
    int c;
    Py_ssize_t a, b;
    if (!PyArg_ParseTuple(args, "inn", &c, &a, &b) || mapped_range(m, &a, &b) < 0) return NULL;
    const char *hit = memrchr(m->base + a, c, (size_t)(b - a));
    return PyLong_FromSsize_t(hit ? hit - m->base : -1);
}

/* The pages of [a, b) made present before a scan (one system call, not a fault a page); False if part of
 * the range is past the file's end now (it shrank: nothing is signalled, the caller reads on with read()). */
static PyObject *mapped_populate(Mapped *m, PyObject *args) {
    Py_ssize_t a, b;
    if (!PyArg_ParseTuple(args, "nn", &a, &b) || mapped_range(m, &a, &b) < 0) return NULL;
    uintptr_t from = (uintptr_t)(m->base + a) & ~(uintptr_t)(page_size - 1);
    if (b > a && madvise((void *)from, (size_t)((uintptr_t)(m->base + b) - from), MADV_POPULATE_READ) != 0 && errno == EFAULT)
        Py_RETURN_FALSE;
    Py_RETURN_TRUE; /* done, or a kernel before 5.14 (EINVAL): the scan faults the pages in */
}

/* The pages of [a, b) let go once scanned (everything before b is: the page holding a too): resident memory
 * stays about a window, not the file. */
static PyObject *mapped_release(Mapped *m, PyObject *args) {
    Py_ssize_t a, b;
    if (!PyArg_ParseTuple(args, "nn", &a, &b) || mapped_range(m, &a, &b) < 0) return NULL;
    uintptr_t from = (uintptr_t)(m->base + a) & ~(uintptr_t)(page_size - 1);
    uintptr_t to = (uintptr_t)(m->base + b) & ~(uintptr_t)(page_size - 1);
    if (b == m->size) to = ((uintptr_t)(m->base + b) + page_size - 1) & ~(uintptr_t)(page_size - 1);
    if (to > from) madvise((void *)from, (size_t)(to - from), MADV_DONTNEED);
    Py_RETURN_NONE;
}

static PyObject *mapped_close(Mapped *m, PyObject *unused) {
    if (mapped_unmap(m) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *mapped_faulted(Mapped *m, void *unused) {
    return PyBool_FromLong(m->base ? maps[m->slot].faulted : 0);
}

static Py_ssize_t mapped_len(Mapped *m) { return m->size; }

static PyObject *mapped_item(Mapped *m, Py_ssize_t i) {
    if (mapped_open(m) < 0) return NULL;
    if (i < 0 || i >= m->size) {
        PyErr_SetString(PyExc_IndexError, "index out of the mapped file");
        return NULL;
    }
    return PyLong_FromLong((unsigned char)m->base[i]);
}

static int mapped_getbuffer(Mapped *m, Py_buffer *view, int flags) {
    if (mapped_open(m) < 0) {
        view->obj = NULL;
        return -1;
    }
    if (PyBuffer_FillInfo(view, (PyObject *)m, m->base, m->size, 1, flags) < 0) return -1;
    m->exports++;
    return 0;
}

static void mapped_releasebuffer(Mapped *m, Py_buffer *view) { m->exports--; }

static void mapped_dealloc(Mapped *m) {
    if (m->base) { /* no views can be left: each holds a reference */
        maps[m->slot].base = NULL;
        munmap(m->base, (size_t)m->size);
    }
    PyObject_Free(m);
}

static PyMethodDef mapped_methods[] = {
    {"find", (PyCFunction)mapped_find, METH_VARARGS, "find(byte, start, end) -> offset or -1"},
    {"rfind", (PyCFunction)mapped_rfind, METH_VARARGS, "rfind(byte, start, end) -> offset or -1"},
    {"populate", (PyCFunction)mapped_populate, METH_VARARGS, "populate(start, end) -> False if the file shrank"},
    {"release", (PyCFunction)mapped_release, METH_VARARGS, "release(start, end): pages scanned let go"},
    {"close", (PyCFunction)mapped_close, METH_NOARGS, "close(): unmapped"},
    {NULL},
};

static PyGetSetDef mapped_getset[] = {
    {"faulted", (getter)mapped_faulted, NULL, "a page past the file's end was touched (it shrank): zeros were read", NULL},
    {NULL},
};

static PySequenceMethods mapped_sequence = {.sq_length = (lenfunc)mapped_len, .sq_item = (ssizeargfunc)mapped_item};
static PyBufferProcs mapped_buffer = {(getbufferproc)mapped_getbuffer, (releasebufferproc)mapped_releasebuffer};

static PyTypeObject MappedType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "quicsm.traces._scan.Mapped",
    .tp_basicsize = sizeof(Mapped),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A plain file mapped read-only, safe against its truncation (see map_file in _scan.c).",
    .tp_dealloc = (destructor)mapped_dealloc,
    .tp_methods = mapped_methods,
    .tp_getset = mapped_getset,
    .tp_as_sequence = &mapped_sequence,
    .tp_as_buffer = &mapped_buffer,
};

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS, "scan(buffer, start, end, tag, lineno, parse=False) -> ([(line, payload) or parsed tuple], lineno_at_end)"},
    {"scan_columns", scan_columns, METH_VARARGS,
     "scan_columns(buffer, start, end, tag, lineno, table, names, split=1 MiB with two CPUs, else 0) -> (8 column bytes, [(row, line, "
     "payload)], lineno_at_end, [(row, kind, recovery, extra)]); split: a window of 2 * |split| bytes or more is read in two threads "
     "(negative: the second part always read by the second thread)"},
    {"scan_files", scan_files, METH_VARARGS,
     "scan_files(buffer, bounds, tag, table, names) -> (9 column bytes, [(row, line, payload)], lines per file as int64 bytes, [(row, kind, recovery, extra)])"},
    {"map_file", map_file, METH_VARARGS, "map_file(fd, size) -> Mapped: the file's first size bytes, mapped read-only, safe if it shrinks"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_scan", "C scanners for quicsm's logs and qlogs", -1, methods};

/* The module's ABI number, checked at import by quicsm/traces/native.py against SCAN_ABI there: bump BOTH
   when a function's or QlogScanner method's signature or return shape changes (a new argument, one more
   element in a returned tuple, a column added or reordered), so a stale build left by a pull without a
   rebuild is set aside for the pure-Python twins with a warning instead of failing every read. */
#define SCAN_ABI 3

PyMODINIT_FUNC PyInit__scan(void) {
    if (PyType_Ready(&QSType) < 0 || PyType_Ready(&MappedType) < 0) return NULL;
#ifdef SCAN_AVX2
    cpu_avx2 = __builtin_cpu_supports("avx2");
#endif
    key_index_add(0, REC_KEYS, 3);
    key_index_add(1, STATE_KEYS, 6);
    key_index_add(2, METRIC_KEYS, 10 + N_AUX);
    key_index_add(3, TIMER_KEYS, 2);
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&QSType);
    if (PyModule_AddObject(m, "QlogScanner", (PyObject *)&QSType) < 0) {
        Py_DECREF(&QSType);
        Py_DECREF(m);
        return NULL;
    }
    if (PyModule_AddIntConstant(m, "ABI", SCAN_ABI) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
