/*
 * provstream.connectors.neo4j._csv_c: the importer's CSV lines in C.
 *
 * node_lines(nodes, names, kinds, delimiter) and
 * relationship_lines(relationships, rel_type, names, kinds, delimiter) return
 * the UTF-8 bytes csv.writer(quoting=csv.QUOTE_NONNUMERIC, lineterminator="\n")
 * writes for the rows csvfiles.py builds of them: a node's IRI, its labels
 * (sorted, joined by the delimiter) and its property columns; a relationship's
 * start, end and type, then its property columns. Strings are quoted with
 * their quotes doubled, numbers bare (str()), booleans "true"/"false", a
 * Moment its text, a list its elements joined by the delimiter. They also
 * return what csvfiles.py's scan of the text cells gives: the longest in UTF-8
 * bytes and whether any holds a line break.
 *
 * One column kind per character of `kinds`: s string, l long, d double,
 * b boolean, m datetime (a Moment), S string[], L long[], D double[]. A value
 * of another class than its kind takes (a subclass, a mixed list) raises
 * Unsupported before anything is returned, and csvfiles.py writes those rows
 * in Python, which gives the same bytes or the error.
 *
 * shape_key(props, known, candidates, empty) is csvfiles.py's _shape_key_py:
 * the key a node's column signature is remembered under (its property names,
 * the class of each value, and of each list whether it is empty and its
 * elements' class), noting the names of its empty lists and the candidate
 * array delimiters its string list elements hold; None when a value's class
 * is not in `known` (nothing noted then).
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

static PyObject *Unsupported;
static PyObject *s_iri, *s_labels, *s_props, *s_start, *s_end, *s_text;

typedef struct {
    char *data;
    Py_ssize_t len, cap;
    Py_ssize_t longest;     /* the longest text cell so far, UTF-8 bytes */
    int multiline;          /* a text cell held \n or \r */
} Out;

static int
reserve(Out *o, Py_ssize_t more)
{
    if (o->len + more <= o->cap)
        return 0;
    Py_ssize_t cap = o->cap ? o->cap : 1 << 16;
    while (cap < o->len + more)
        cap *= 2;
    char *data = PyMem_Realloc(o->data, (size_t)cap);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    o->data = data;
    o->cap = cap;
    return 0;
}

static inline int
put(Out *o, const char *s, Py_ssize_t n)
{
    if (reserve(o, n) < 0)
        return -1;
    memcpy(o->data + o->len, s, (size_t)n);
    o->len += n;
    return 0;
}

static inline int
put_char(Out *o, char c)
{
    if (reserve(o, 1) < 0)
        return -1;
    o->data[o->len++] = c;
    return 0;
}

static int
unsupported(const char *why)
{
    PyErr_SetString(Unsupported, why);
    return -1;
}

/* The text of s, its quotes doubled (the cell's quotes are the caller's); its length is noted. */
static int
put_text(Out *o, PyObject *s, Py_ssize_t *cell)
{
    Py_ssize_t n;
    const char *u = PyUnicode_AsUTF8AndSize(s, &n);
    if (u == NULL)
        return -1;
    *cell += n;
    if (!o->multiline && (memchr(u, '\n', (size_t)n) != NULL || memchr(u, '\r', (size_t)n) != NULL))
        o->multiline = 1;
    const char *q;
    while ((q = memchr(u, '"', (size_t)n)) != NULL) {
        Py_ssize_t k = q - u + 1;
        if (put(o, u, k) < 0 || put_char(o, '"') < 0)
            return -1;
        u += k;
        n -= k;
    }
    return put(o, u, n);
}

static inline void
note_cell(Out *o, Py_ssize_t cell)
{
    if (cell > o->longest)
        o->longest = cell;
}

static int
put_string_cell(Out *o, PyObject *s)
{
    Py_ssize_t cell = 0;
    if (!PyUnicode_CheckExact(s))
        return unsupported("not a str");
    if (put_char(o, '"') < 0 || put_text(o, s, &cell) < 0 || put_char(o, '"') < 0)
        return -1;
    note_cell(o, cell);
    return 0;
}

/* str(x) of an exact int or float, bare; the number of bytes (ASCII). */
static Py_ssize_t
put_number(Out *o, PyObject *x, int kind)
{
    if (kind == 'l') {
        if (!PyLong_CheckExact(x))
            return unsupported("not an int");
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(x, &overflow);
        if (v == -1 && PyErr_Occurred())
            return -1;
        if (!overflow) {
            char buf[32];
            int n = snprintf(buf, sizeof buf, "%lld", v);
            return put(o, buf, n) < 0 ? -1 : n;
        }
    } else if (!PyFloat_CheckExact(x)) {
        return unsupported("not a float");
    }
    PyObject *text = PyObject_Str(x);
    if (text == NULL)
        return -1;
    Py_ssize_t n;
    const char *u = PyUnicode_AsUTF8AndSize(text, &n);
    int rc = u == NULL ? -1 : put(o, u, n);
    Py_DECREF(text);
    return rc < 0 ? -1 : n;
}

static int
put_cell(Out *o, PyObject *x, int kind, PyObject *delimiter)
{
    switch (kind) {
    case 's':
        return put_string_cell(o, x);
    case 'l':
    case 'd':
        return put_number(o, x, kind) < 0 ? -1 : 0;
    case 'b':
        if (x == Py_True)
            return put(o, "\"true\"", 6) < 0 ? -1 : (note_cell(o, 4), 0);
        if (x == Py_False)
            return put(o, "\"false\"", 7) < 0 ? -1 : (note_cell(o, 5), 0);
        return unsupported("not a bool");
    case 'm': {
        PyObject *text = PyObject_GetAttr(x, s_text);
        if (text == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_AttributeError))
                return -1;
            PyErr_Clear();
            return unsupported("not a Moment");
        }
        int rc = put_string_cell(o, text);
        Py_DECREF(text);
        return rc;
    }
    case 'S':
    case 'L':
    case 'D': {
        if (!PyList_CheckExact(x))
            return unsupported("not a list");
        Py_ssize_t cell = 0, n = PyList_GET_SIZE(x);
        if (put_char(o, '"') < 0)
            return -1;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *item = PyList_GET_ITEM(x, i);
            if (i > 0 && put_text(o, delimiter, &cell) < 0)
                return -1;
            if (kind == 'S') {
                if (!PyUnicode_CheckExact(item))
                    return unsupported("a list element not a str");
                if (put_text(o, item, &cell) < 0)
                    return -1;
            } else {
                Py_ssize_t k = put_number(o, item, kind == 'L' ? 'l' : 'd');
                if (k < 0)
                    return -1;
                cell += k;
            }
        }
        if (put_char(o, '"') < 0)
            return -1;
        note_cell(o, cell);
        return 0;
    }
    default:
        return unsupported("a column kind the C lines do not write");
    }
}

/* The property cells of one row, after its lead cells: ",v1,v2...\n". */
static int
put_props(Out *o, PyObject *owner, PyObject *names, const char *kinds, PyObject *delimiter)
{
    PyObject *props = PyObject_GetAttr(owner, s_props);
    if (props == NULL)
        return -1;
    int rc = 0;
    if (!PyDict_Check(props)) {
        rc = unsupported("props not a dict");
        goto done;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(names); i++) {
        PyObject *key = PyTuple_GET_ITEM(names, i);
        PyObject *value = PyDict_GetItemWithError(props, key);
        if (value == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetObject(PyExc_KeyError, key);
            rc = -1;
            goto done;
        }
        if (put_char(o, ',') < 0 || put_cell(o, value, kinds[i], delimiter) < 0) {
            rc = -1;
            goto done;
        }
    }
    rc = put_char(o, '\n');
done:
    Py_DECREF(props);
    return rc;
}

/* A node's labels, sorted and joined by the delimiter, as one quoted cell. */
static int
put_labels(Out *o, PyObject *node, PyObject *delimiter)
{
    PyObject *labels = PyObject_GetAttr(node, s_labels);
    if (labels == NULL)
        return -1;
    PyObject *sorted = PySequence_List(labels);
    Py_DECREF(labels);
    if (sorted == NULL)
        return -1;
    int rc = -1;
    Py_ssize_t cell = 0;
    if (PyList_Sort(sorted) < 0 || put_char(o, '"') < 0)
        goto done;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(sorted); i++) {
        PyObject *label = PyList_GET_ITEM(sorted, i);
        if (!PyUnicode_CheckExact(label)) {
            unsupported("a label not a str");
            goto done;
        }
        if ((i > 0 && put_text(o, delimiter, &cell) < 0) || put_text(o, label, &cell) < 0)
            goto done;
    }
    if (put_char(o, '"') < 0)
        goto done;
    note_cell(o, cell);
    rc = 0;
done:
    Py_DECREF(sorted);
    return rc;
}

static int
put_attr_cell(Out *o, PyObject *owner, PyObject *name)
{
    PyObject *value = PyObject_GetAttr(owner, name);
    if (value == NULL)
        return -1;
    int rc = put_string_cell(o, value);
    Py_DECREF(value);
    return rc;
}

static int
check_args(PyObject *names, PyObject *kinds, PyObject *delimiter, const char **codes)
{
    if (!PyTuple_Check(names) || !PyBytes_Check(kinds) || !PyUnicode_Check(delimiter)) {
        PyErr_SetString(PyExc_TypeError, "expected (sequence, ..., tuple of str, bytes, str)");
        return -1;
    }
    if (PyBytes_GET_SIZE(kinds) != PyTuple_GET_SIZE(names)) {
        PyErr_SetString(PyExc_ValueError, "one kind per name");
        return -1;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(names); i++)
        if (!PyUnicode_Check(PyTuple_GET_ITEM(names, i))) {
            PyErr_SetString(PyExc_TypeError, "names must be str");
            return -1;
        }
    *codes = PyBytes_AS_STRING(kinds);
    return 0;
}

static PyObject *
result(Out *o)
{
    PyObject *data = PyBytes_FromStringAndSize(o->data ? o->data : "", o->len);
    PyMem_Free(o->data);
    if (data == NULL)
        return NULL;
    return Py_BuildValue("(NnO)", data, o->longest, o->multiline ? Py_True : Py_False);
}

PyDoc_STRVAR(node_lines_doc,
"node_lines(nodes, names, kinds, delimiter) -> (bytes, longest, multiline)\n\n"
"The CSV lines of ``nodes`` (ImageNode: iri, labels, then ``props[name]`` per name,\n"
"of the column kind at the same place in ``kinds``); the longest text cell in UTF-8\n"
"bytes and whether a text cell holds a line break. Raises Unsupported for a value\n"
"of another class than its kind takes.");

static PyObject *
node_lines(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    const char *codes;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "node_lines takes 4 arguments");
        return NULL;
    }
    PyObject *nodes = args[0], *names = args[1], *delimiter = args[3];
    if (check_args(names, args[2], delimiter, &codes) < 0)
        return NULL;
    PyObject *seq = PySequence_Fast(nodes, "node_lines takes a sequence of nodes");
    if (seq == NULL)
        return NULL;
    Out o = {0};
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
        PyObject *node = PySequence_Fast_GET_ITEM(seq, i);
        if (put_attr_cell(&o, node, s_iri) < 0 || put_char(&o, ',') < 0 || put_labels(&o, node, delimiter) < 0
            || put_props(&o, node, names, codes, delimiter) < 0) {
            Py_DECREF(seq);
            PyMem_Free(o.data);
            return NULL;
        }
    }
    Py_DECREF(seq);
    return result(&o);
}

PyDoc_STRVAR(relationship_lines_doc,
"relationship_lines(relationships, rel_type, names, kinds, delimiter) -> (bytes, longest, multiline)\n\n"
"The CSV lines of ``relationships`` (ImageRelationship: start, end, ``rel_type``, then\n"
"``props[name]`` per name), as node_lines.");

static PyObject *
relationship_lines(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    const char *codes;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "relationship_lines takes 5 arguments");
        return NULL;
    }
    PyObject *rels = args[0], *rel_type = args[1], *names = args[2], *delimiter = args[4];
    if (check_args(names, args[3], delimiter, &codes) < 0)
        return NULL;
    PyObject *seq = PySequence_Fast(rels, "relationship_lines takes a sequence of relationships");
    if (seq == NULL)
        return NULL;
    Out o = {0};
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
        PyObject *rel = PySequence_Fast_GET_ITEM(seq, i);
        if (put_attr_cell(&o, rel, s_start) < 0 || put_char(&o, ',') < 0 || put_attr_cell(&o, rel, s_end) < 0
            || put_char(&o, ',') < 0 || put_string_cell(&o, rel_type) < 0
            || put_props(&o, rel, names, codes, delimiter) < 0) {
            Py_DECREF(seq);
            PyMem_Free(o.data);
            return NULL;
        }
    }
    Py_DECREF(seq);
    return result(&o);
}

/* Note the candidate array delimiters s holds (csvfiles.DELIMITER_CANDIDATES: U+001C-U+001F and
 * U+E000-U+E0FF; test_csv_lines_c.py checks the two lists agree). */
static int
note_candidates(PyObject *s, PyObject *candidates)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if ((c >= 0x1c && c <= 0x1f) || (c >= 0xE000 && c <= 0xE0FF)) {
            PyObject *ch = PyUnicode_FromOrdinal((int)c);
            if (ch == NULL)
                return -1;
            int rc = PySet_Add(candidates, ch);
            Py_DECREF(ch);
            if (rc < 0)
                return -1;
        }
    }
    return 0;
}

PyDoc_STRVAR(shape_key_doc,
"shape_key(props, known, candidates, empty) -> tuple | None\n\n"
"The key csvfiles.py remembers the column signature of ``props`` (a dict) under; the names\n"
"of its empty lists are appended to ``empty`` and the candidate delimiters of its string list\n"
"elements added to ``candidates`` (either may be None). None, noting nothing, when the class\n"
"of a value is not in ``known``. Raises Unsupported for props that are not a dict.");

static PyObject *
shape_key(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "shape_key takes 4 arguments");
        return NULL;
    }
    PyObject *props = args[0], *known = args[1], *candidates = args[2], *empty = args[3];
    if (!PyDict_CheckExact(props)) {
        PyErr_SetString(Unsupported, "props not a dict");
        return NULL;
    }
    if (!PyAnySet_Check(known) || (candidates != Py_None && !PySet_Check(candidates))
        || (empty != Py_None && !PyList_Check(empty))) {
        PyErr_SetString(PyExc_TypeError, "expected (dict, frozenset, set or None, list or None)");
        return NULL;
    }
    Py_ssize_t n = PyDict_GET_SIZE(props), pos = 0, i = 0;
    PyObject *names = PyTuple_New(n), *classes = PyTuple_New(n), *shape = NULL, *key = NULL;
    PyObject *name, *value;
    int lists = 0;
    if (names == NULL || classes == NULL)
        goto done;
    while (PyDict_Next(props, &pos, &name, &value)) {
        PyObject *cls = (PyObject *)Py_TYPE(value);
        int found = PySet_Contains(known, cls);
        if (found < 0)
            goto done;
        if (!found) {
            key = Py_NewRef(Py_None);
            goto done;
        }
        lists |= PyList_CheckExact(value);
        PyTuple_SET_ITEM(names, i, Py_NewRef(name));
        PyTuple_SET_ITEM(classes, i, Py_NewRef(cls));
        i++;
    }
    if (!lists) {
        key = PyTuple_Pack(2, names, classes);
        goto done;
    }
    if ((shape = PyList_New(0)) == NULL)
        goto done;
    pos = 0;
    while (PyDict_Next(props, &pos, &name, &value)) {
        if (!PyList_CheckExact(value))
            continue;
        Py_ssize_t size = PyList_GET_SIZE(value);
        PyObject *element = Py_None;
        if (size == 0) {
            if (empty != Py_None && PyList_Append(empty, name) < 0)
                goto done;
        } else {
            element = (PyObject *)Py_TYPE(PyList_GET_ITEM(value, 0));
            for (Py_ssize_t j = 1; j < size; j++)
                if ((PyObject *)Py_TYPE(PyList_GET_ITEM(value, j)) != element) {
                    element = (PyObject *)&PyBaseObject_Type;
                    break;
                }
            if (candidates != Py_None)
                for (Py_ssize_t j = 0; j < size; j++) {
                    PyObject *item = PyList_GET_ITEM(value, j);
                    if (PyUnicode_CheckExact(item) && note_candidates(item, candidates) < 0)
                        goto done;
                }
        }
        if (PyList_Append(shape, element) < 0)
            goto done;
    }
    PyObject *shape_tuple = PyList_AsTuple(shape);
    if (shape_tuple != NULL) {
        key = PyTuple_Pack(3, names, classes, shape_tuple);
        Py_DECREF(shape_tuple);
    }
done:
    Py_XDECREF(names);
    Py_XDECREF(classes);
    Py_XDECREF(shape);
    return key;
}

static PyMethodDef methods[] = {
    {"shape_key", (PyCFunction)(void (*)(void))shape_key, METH_FASTCALL, shape_key_doc},
    {"node_lines", (PyCFunction)(void (*)(void))node_lines, METH_FASTCALL, node_lines_doc},
    {"relationship_lines", (PyCFunction)(void (*)(void))relationship_lines, METH_FASTCALL, relationship_lines_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "provstream.connectors.neo4j._csv_c",
    "The importer's CSV lines in C: what csvfiles.py writes with csv.writer, in one pass.",
    -1,
    methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__csv_c(void)
{
    PyObject *module = PyModule_Create(&module_def);
    if (module == NULL)
        return NULL;
    if ((s_iri = PyUnicode_InternFromString("iri")) == NULL
        || (s_labels = PyUnicode_InternFromString("labels")) == NULL
        || (s_props = PyUnicode_InternFromString("props")) == NULL
        || (s_start = PyUnicode_InternFromString("start")) == NULL
        || (s_end = PyUnicode_InternFromString("end")) == NULL
        || (s_text = PyUnicode_InternFromString("text")) == NULL
        || (Unsupported = PyErr_NewException("provstream.connectors.neo4j._csv_c.Unsupported", NULL, NULL)) == NULL
        || PyModule_AddObjectRef(module, "Unsupported", Unsupported) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
