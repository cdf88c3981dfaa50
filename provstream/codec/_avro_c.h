/*
 * provstream/codec/_avro_c.h: what the C readers (_triples_c.c, _events_c.c)
 * share: the Avro binary primitives and the way values are made.
 *
 * Each extension includes it once (its functions are static: every module has
 * its own copy and its own direct-construction switch). The primitives read
 * the Avro binary encoding (Avro spec, "Binary Encoding") from a Reader and
 * return 0, or -1 with an exception set (ValueError, IndexError,
 * UnicodeDecodeError ...); they are strict: a reader raises on anything they
 * do not take and its caller decodes the message through fastavro instead.
 *
 * Values are made the way their dataclass __init__ makes them (a fresh
 * instance whose slots hold the fields), without running that __init__: at
 * import, load_class() checks that each class is a plain slotted dataclass
 * with the expected fields (no __post_init__, no __new__, no __dict__, every
 * field a writable object slot of its own) and otherwise make() calls the
 * class.
 */

#ifndef PROVSTREAM_AVRO_C_H
#define PROVSTREAM_AVRO_C_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>

/* -- the classes the values are made of ----------------------------------- */

#define MAX_FIELDS 11

typedef struct {
    const char *name;
    const char *fields[MAX_FIELDS];
    Py_ssize_t nfields;
    PyTypeObject *type;            /* strong reference */
    Py_ssize_t offsets[MAX_FIELDS];
    int direct;                    /* 1: allocate and fill the slots; 0: call the class */
} Cls;

static int use_direct = 1;         /* direct_construction(): off makes every value by calling its class */

/* The classes of provstream.core.triples and their fields, in the order of their dataclass fields: the
 * statics IRI ... STEP and CLASSES of a module that reads or builds those values (_triples_c.c, _rows_c.c). */
#define TRIPLES_CLASSES \
    static Cls IRI = {"Iri", {"value"}, 1, NULL, {0}, 0}; \
    static Cls LITERAL = {"Literal", {"value", "datatype", "language"}, 3, NULL, {0}, 0}; \
    static Cls QUOTED = {"QuotedTriple", {"s", "p", "o"}, 3, NULL, {0}, 0}; \
    static Cls TRIPLE = {"Triple", {"s", "p", "o"}, 3, NULL, {0}, 0}; \
    static Cls STATUS = {"SessionStatus", {"state", "steps", "expected", "late", "missing"}, 5, NULL, {0}, 0}; \
    static Cls STEP = {"StepTriples", \
                       {"event_id", "session_id", "mechanism", "seq", "user", "collection", "question", "triples", \
                        "status", "duplicate", "graph"}, \
                       11, NULL, {0}, 0}; \
    static Cls *const CLASSES[] = {&IRI, &LITERAL, &QUOTED, &TRIPLE, &STATUS, &STEP};

/* A value of class c from its fields; steals the n references in args (all non-NULL). */
static inline PyObject *
make(Cls *c, PyObject **args)
{
    PyObject *obj;
    Py_ssize_t i;
    if (c->direct && use_direct) {
        obj = c->type->tp_alloc(c->type, 0);
        if (obj != NULL) {
            for (i = 0; i < c->nfields; i++)
                *(PyObject **)((char *)obj + c->offsets[i]) = args[i];
            return obj;
        }
    }
    else {
        obj = PyObject_Vectorcall((PyObject *)c->type, args, (size_t)c->nfields, NULL);
    }
    for (i = 0; i < c->nfields; i++)
        Py_DECREF(args[i]);
    return obj;
}

static inline void
clear_all(PyObject **args, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++)
        Py_CLEAR(args[i]);
}

/* -- the Avro primitives: each returns 0, or -1 with an exception set ---------- */

typedef struct {
    const unsigned char *buf;
    Py_ssize_t len;
    Py_ssize_t pos;
} Reader;

static inline int
past_end(void)
{
    PyErr_SetString(PyExc_IndexError, "message ends early");
    return -1;
}

static inline int
fail(PyObject *type, const char *message)
{
    PyErr_SetString(type, message);
    return -1;
}

/* A zig-zag varint of at most ten bytes within the long range. */
static inline int
read_long(Reader *r, int64_t *out)
{
    uint64_t n = 0;
    int shift = 0;
    unsigned int b;
    for (;;) {
        if (r->pos >= r->len)
            return past_end();
        b = r->buf[r->pos++];
        if (shift == 63) {
            if (b & 0x80)
                return fail(PyExc_ValueError, "varint longer than 10 bytes");
            if (b > 1)
                return fail(PyExc_ValueError, "varint out of the long range");
        }
        n |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80))
            break;
        shift += 7;
    }
    *out = (int64_t)(n >> 1) ^ -(int64_t)(n & 1);
    return 0;
}

static inline int
read_int(Reader *r, int64_t *out)
{
    if (read_long(r, out) < 0)
        return -1;
    if (*out < INT32_MIN || *out > INT32_MAX)
        return fail(PyExc_ValueError, "int out of range");
    return 0;
}

static inline int
read_enum(Reader *r, Py_ssize_t symbols, Py_ssize_t *out)
{
    int64_t index;
    if (read_long(r, &index) < 0)
        return -1;
    if (index < 0 || index >= symbols)
        return fail(PyExc_IndexError, "enum index out of range");
    *out = (Py_ssize_t)index;
    return 0;
}

/* A string's bytes: its start in buf and its length. */
static inline int
read_span(Reader *r, Py_ssize_t *start, Py_ssize_t *length)
{
    int64_t n;
    if (read_long(r, &n) < 0)
        return -1;
    if (n < 0)
        return fail(PyExc_ValueError, "negative length");
    if (n > r->len - r->pos)
        return fail(PyExc_ValueError, "string runs past the end");
    *start = r->pos;
    *length = (Py_ssize_t)n;
    r->pos += (Py_ssize_t)n;
    return 0;
}

/* An array block's item count; blocks with a byte size (negative count) are left to fastavro. */
static inline int
read_count(Reader *r, int64_t *out)
{
    if (read_long(r, out) < 0)
        return -1;
    if (*out < 0)
        return fail(PyExc_ValueError, "array block with a byte size");
    return 0;
}

/* A ["null", T] union's branch in its one-byte form: 0 (null) or 2 (the value). */
static inline int
read_branch(Reader *r, int *present)
{
    if (r->pos >= r->len)
        return past_end();
    unsigned int b = r->buf[r->pos++];
    if (b != 0 && b != 2)
        return fail(PyExc_ValueError, "union index out of range");
    *present = b == 2;
    return 0;
}

/* -- the values: each returns a new reference, or NULL with an exception set -- */

static inline PyObject *
read_str(Reader *r)
{
    Py_ssize_t start, length;
    if (read_span(r, &start, &length) < 0)
        return NULL;
    return PyUnicode_DecodeUTF8((const char *)r->buf + start, length, NULL);
}

/* An optional string: None or a str. */
static inline PyObject *
read_optional(Reader *r)
{
    int present;
    if (read_branch(r, &present) < 0)
        return NULL;
    return present ? read_str(r) : Py_NewRef(Py_None);
}

/* -- the module's arguments and switches -------------------------------------- */

/* The (buf, pos) of a reader function's arguments; 0, or -1 with an exception set. */
static inline int
reader_args(const char *function, PyObject *const *args, Py_ssize_t nargs, Reader *r)
{
    Py_ssize_t pos;
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "%s() takes 2 arguments (%zd given)", function, nargs);
        return -1;
    }
    if (!PyBytes_Check(args[0])) {
        PyErr_Format(PyExc_TypeError, "%s() needs bytes, not %.100s", function, Py_TYPE(args[0])->tp_name);
        return -1;
    }
    pos = PyLong_AsSsize_t(args[1]);
    if (pos == -1 && PyErr_Occurred())
        return -1;
    r->buf = (const unsigned char *)PyBytes_AS_STRING(args[0]);
    r->len = PyBytes_GET_SIZE(args[0]);
    if (pos < 0 || pos > r->len) {
        PyErr_SetString(PyExc_ValueError, "pos outside the message");
        return -1;
    }
    r->pos = pos;
    return 0;
}

#define DIRECT_CONSTRUCTION_DOC \
"direct_construction(enabled=None, /)\n--\n\n" \
"Whether values are made by filling a fresh instance's slots (True) or by calling their class.\n\n" \
"Parameters:\n" \
"    enabled: ``None`` only asks; ``True``/``False`` switches (``True`` is refused with\n" \
"        ``ValueError`` when a class did not pass the import-time checks).\n\n" \
"Returns:\n" \
"    the setting before the call.\n\n" \
"Example::\n\n" \
"    >>> before = direct_construction(False)  # from now on every value through its dataclass __init__\n" \
"    >>> direct_construction(before)\n" \
"    False\n"

/* direct_construction(enabled=None, /) over the module's classes: the setting before the call.
 * (Inline, as reader_args: a module that includes this header without either gets no warning.) */
static inline PyObject *
switch_direct(Cls *const *classes, Py_ssize_t nclasses, PyObject *const *args, Py_ssize_t nargs)
{
    int before = use_direct, possible = 1;
    if (nargs > 1) {
        PyErr_SetString(PyExc_TypeError, "direct_construction() takes at most 1 argument");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < nclasses; i++)
        possible &= classes[i]->direct;
    before &= possible;
    if (nargs == 1 && args[0] != Py_None) {
        int enabled = PyObject_IsTrue(args[0]);
        if (enabled < 0)
            return NULL;
        if (enabled && !possible) {
            PyErr_SetString(PyExc_ValueError, "a class did not pass the checks for direct construction");
            return NULL;
        }
        use_direct = enabled;
    }
    return PyBool_FromLong(before);
}

/* -- loading the classes at import -------------------------------------------- */

/* Whether instances of c can be made by filling their slots: 1 yes, 0 no, -1 error. */
static int
check_direct(Cls *c, PyObject *fields)
{
    PyTypeObject *t = c->type;
    if (t->tp_new != PyBaseObject_Type.tp_new || t->tp_dictoffset != 0 || t->tp_alloc == NULL
        || PyObject_HasAttrString((PyObject *)t, "__post_init__"))
        return 0;
    for (Py_ssize_t i = 0; i < c->nfields; i++) {
        PyObject *field = PyTuple_GET_ITEM(fields, i);
        PyObject *init = PyObject_GetAttrString(field, "init");
        if (init == NULL)
            return -1;
        int takes = PyObject_IsTrue(init);
        Py_DECREF(init);
        if (takes != 1)
            return takes < 0 ? -1 : 0;
        PyObject *descr = PyDict_GetItemString(t->tp_dict, c->fields[i]);  /* borrowed */
        if (descr == NULL || !Py_IS_TYPE(descr, &PyMemberDescr_Type))
            return 0;
        PyMemberDescrObject *member = (PyMemberDescrObject *)descr;
        if (member->d_common.d_type != t || member->d_member->type != T_OBJECT_EX
            || (member->d_member->flags & READONLY) || member->d_member->offset < (Py_ssize_t)sizeof(PyObject)
            || member->d_member->offset + (Py_ssize_t)sizeof(PyObject *) > t->tp_basicsize)
            return 0;
        c->offsets[i] = member->d_member->offset;
    }
    return 1;
}

/* Fetch class c from module and check its fields are the ones the reader fills, in order. */
static int
load_class(Cls *c, PyObject *module, PyObject *dataclass_fields)
{
    PyObject *type = PyObject_GetAttrString(module, c->name), *fields = NULL;
    int ok = -1;
    if (type == NULL)
        return -1;
    if (!PyType_Check(type)) {
        PyErr_Format(PyExc_ImportError, "%s is not a class", c->name);
        goto done;
    }
    c->type = (PyTypeObject *)type;
    type = NULL;
    fields = PyObject_CallOneArg(dataclass_fields, (PyObject *)c->type);
    if (fields == NULL)
        goto done;
    if (!PyTuple_Check(fields) || PyTuple_GET_SIZE(fields) != c->nfields) {
        PyErr_Format(PyExc_ImportError, "%s does not have the %zd fields this reader fills", c->name, c->nfields);
        goto done;
    }
    for (Py_ssize_t i = 0; i < c->nfields; i++) {
        PyObject *name = PyObject_GetAttrString(PyTuple_GET_ITEM(fields, i), "name");
        if (name == NULL)
            goto done;
        int same = PyUnicode_Check(name) && PyUnicode_CompareWithASCIIString(name, c->fields[i]) == 0;
        Py_DECREF(name);
        if (!same) {
            PyErr_Format(PyExc_ImportError, "%s's field %zd is not %s", c->name, i, c->fields[i]);
            goto done;
        }
    }
    if ((c->direct = check_direct(c, fields)) < 0)
        goto done;
    ok = 0;
done:
    Py_XDECREF(type);
    Py_XDECREF(fields);
    return ok;
}

/* Load every class from module (dataclasses.fields checks their fields). */
static int
load_classes(Cls *const *classes, Py_ssize_t nclasses, PyObject *module)
{
    PyObject *dataclasses = PyImport_ImportModule("dataclasses"), *dataclass_fields = NULL;
    int ok = -1;
    if (dataclasses == NULL || (dataclass_fields = PyObject_GetAttrString(dataclasses, "fields")) == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < nclasses; i++)
        if (load_class(classes[i], module, dataclass_fields) < 0)
            goto done;
    ok = 0;
done:
    Py_XDECREF(dataclasses);
    Py_XDECREF(dataclass_fields);
    return ok;
}

static void
unload_classes(Cls *const *classes, Py_ssize_t nclasses)
{
    for (Py_ssize_t i = 0; i < nclasses; i++) {
        Py_CLEAR(classes[i]->type);
        classes[i]->direct = 0;
    }
}

/* Turn the pending exception into an ImportError (callers fall back on ImportError only). */
static void
as_import_error(const char *module_name)
{
    if (PyErr_ExceptionMatches(PyExc_ImportError))
        return;
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PyErr_NormalizeException(&type, &value, &traceback);
    PyErr_Format(PyExc_ImportError, "%s cannot load: %R", module_name, value);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(traceback);
}

#endif /* PROVSTREAM_AVRO_C_H */
