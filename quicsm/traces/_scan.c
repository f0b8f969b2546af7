/* Tag finder for the log scanner: the one loop that touches every byte of a log.
 *
 * scan(buffer, end, tag, lineno) -> (hits, lineno_at_end)
 *   hits: list of (line_number, payload_bytes) for every line holding `tag`, payload = text after the tag
 *   up to (not including) the newline. Line numbers count from `lineno` at offset 0.
 * The pure-Python scanner does the same with bytes.find/count; this only removes the per-hit overhead.
 */
#define PY_SSIZE_T_CLEAN
#define _GNU_SOURCE
#include <Python.h>
#include <string.h>

static Py_ssize_t count_nl(const char *p, const char *q) {
    Py_ssize_t n = 0;
    while (p < q) {
        const char *nl = memchr(p, '\n', (size_t)(q - p));
        if (!nl) break;
        n++;
        p = nl + 1;
    }
    return n;
}

static PyObject *scan(PyObject *self, PyObject *args) {
    Py_buffer buf, tag;
    Py_ssize_t end, lineno;
    if (!PyArg_ParseTuple(args, "y*ny*n", &buf, &end, &tag, &lineno)) return NULL;
    if (end < 0 || end > buf.len) end = buf.len;
    const char *base = (const char *)buf.buf, *stop = base + end, *pos = base, *line_at = base;
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
    {"scan", scan, METH_VARARGS, "scan(buffer, end, tag, lineno) -> ([(line, payload)], lineno_at_end)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_scan", "C tag finder for quicsm's log scanner", -1, methods};

PyMODINIT_FUNC PyInit__scan(void) { return PyModule_Create(&module); }
