/* Tag finder for the log scanner: the one loop that touches every byte of a log.
 *
 * scan(buffer, start, end, tag, lineno) -> (hits, lineno_at_end)
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

static PyObject *scan(PyObject *self, PyObject *args) {
    Py_buffer buf, tag;
    Py_ssize_t start, end, lineno;
    if (!PyArg_ParseTuple(args, "y*nny*n", &buf, &start, &end, &tag, &lineno)) return NULL;
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
        PyObject *item = Py_BuildValue("(ny#)", lineno, hit + tl, (Py_ssize_t)(eol - hit - (Py_ssize_t)tl));
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
    {"scan", scan, METH_VARARGS, "scan(buffer, start, end, tag, lineno) -> ([(line, payload)], lineno_at_end)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_scan", "C tag finder for quicsm's log scanner", -1, methods};

PyMODINIT_FUNC PyInit__scan(void) { return PyModule_Create(&module); }
