/*
 * provstream.codec._triples_c: the direct StepTriples reader and writer in C.
 *
 * write_step_triples writes what records._step_triples_body writes, byte for
 * byte, for values of the exact classes below (their fields read from their
 * slots); anything else raises and records.encode_triples asks fastavro.
 *
 * The same reader as provstream/codec/triples_reader.py, statement for
 * statement: it reads the Avro body of one canonical form of
 * provstream.StepTriples straight into the immutable values of
 * provstream.core.triples, returns equal values for every input the Python
 * reader takes and raises (ValueError, IndexError, UnicodeDecodeError) for
 * every input it refuses, so records.py may use either. The vocabulary IRIs
 * come back as the very Iri objects of triples_reader._IRIS.
 *
 * The classes, the enum members and the interned IRIs are read from
 * provstream.codec.triples_reader once, when the module is imported. The Avro
 * primitives and the way values are made (filling a fresh instance's slots
 * for classes that pass the import-time checks) are in _avro_c.h, shared with
 * _events_c.c.
 */

#include "_avro_c.h"

/* The canonical form of provstream.StepTriples this reader is written for: its
 * CRC-64-AVRO fingerprint, as records.DIRECT_TRIPLES_FINGERPRINT. records.py
 * uses the module only while the two agree. */
#define FINGERPRINT "537f9d68b2e5e159"

/* -- the classes the values are made of ----------------------------------- */

TRIPLES_CLASSES
#define NCLASSES ((Py_ssize_t)(sizeof(CLASSES) / sizeof(CLASSES[0])))

static PyObject *mechanisms;       /* triples_reader._MECHANISMS: tuple of Mechanism */
static PyObject *states;           /* triples_reader._STATES: tuple of SessionState */
static Py_ssize_t n_mechanisms, n_states;
#define TERM_KINDS 3               /* provstream.TermKind: IRI, LITERAL, TRIPLE */

/* -- the vocabulary: encoded IRI -> the interned Iri of triples_reader._IRIS */

#define VOCAB_SLOTS 256            /* a power of two, at least twice the vocabulary */

typedef struct {
    PyObject *key;                 /* bytes, strong reference (keeps data alive) */
    PyObject *iri;                 /* Iri, strong reference */
    const char *data;
    Py_ssize_t len;
    uint64_t hash;
} VocabSlot;

static VocabSlot vocab[VOCAB_SLOTS];

static inline uint64_t
fnv1a(const unsigned char *p, Py_ssize_t n)
{
    uint64_t h = 1469598103934665603ULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 1099511628211ULL;
    }
    return h;
}

/* The interned Iri (borrowed) for these bytes, or NULL. */
static inline PyObject *
vocab_get(const unsigned char *p, Py_ssize_t n)
{
    uint64_t h = fnv1a(p, n);
    size_t i = (size_t)h & (VOCAB_SLOTS - 1);
    while (vocab[i].key != NULL) {
        if (vocab[i].hash == h && vocab[i].len == n && memcmp(vocab[i].data, p, (size_t)n) == 0)
            return vocab[i].iri;
        i = (i + 1) & (VOCAB_SLOTS - 1);
    }
    return NULL;
}

static int
vocab_fill(PyObject *iris)
{
    PyObject *key, *value;
    Py_ssize_t it = 0;
    if (!PyDict_Check(iris) || PyDict_GET_SIZE(iris) * 2 > VOCAB_SLOTS) {
        PyErr_SetString(PyExc_ImportError, "triples_reader._IRIS is not a dict of at most 128 IRIs");
        return -1;
    }
    while (PyDict_Next(iris, &it, &key, &value)) {
        if (!PyBytes_CheckExact(key) || Py_TYPE(value) != IRI.type) {
            PyErr_SetString(PyExc_ImportError, "triples_reader._IRIS does not map bytes to Iri");
            return -1;
        }
        const char *data = PyBytes_AS_STRING(key);
        Py_ssize_t len = PyBytes_GET_SIZE(key);
        uint64_t h = fnv1a((const unsigned char *)data, len);
        size_t i = (size_t)h & (VOCAB_SLOTS - 1);
        while (vocab[i].key != NULL)
            i = (i + 1) & (VOCAB_SLOTS - 1);
        Py_INCREF(key);
        Py_INCREF(value);
        vocab[i] = (VocabSlot){key, value, data, len, h};
    }
    return 0;
}

/* -- the values: each returns a new reference, or NULL with an exception set -- */

static PyObject *
new_iri(PyObject *value)
{
    return value == NULL ? NULL : make(&IRI, &value);
}

/* An IRI, interned when it is one of the vocabulary's. */
static PyObject *
read_iri(Reader *r)
{
    Py_ssize_t start, length;
    if (read_span(r, &start, &length) < 0)
        return NULL;
    PyObject *iri = vocab_get(r->buf + start, length);
    if (iri != NULL)
        return Py_NewRef(iri);
    return new_iri(PyUnicode_DecodeUTF8((const char *)r->buf + start, length, NULL));
}

static PyObject *
read_quoted(Reader *r)
{
    PyObject *f[3] = {NULL, NULL, NULL};     /* s, p, o */
    PyObject *lit[3] = {NULL, NULL, NULL};   /* value, datatype, language */
    Py_ssize_t kind;
    if ((f[0] = read_iri(r)) == NULL || (f[1] = read_iri(r)) == NULL || read_enum(r, TERM_KINDS, &kind) < 0
        || (lit[0] = read_str(r)) == NULL || (lit[1] = read_optional(r)) == NULL
        || (lit[2] = read_optional(r)) == NULL)
        goto error;
    if (kind == 0) {
        clear_all(lit + 1, 2);
        f[2] = new_iri(lit[0]);     /* not interned, as in the Python reader */
    }
    else {
        f[2] = make(&LITERAL, lit);
    }
    if (f[2] == NULL) {
        clear_all(f, 2);
        return NULL;
    }
    return make(&QUOTED, f);
error:
    clear_all(f, 3);
    clear_all(lit, 3);
    return NULL;
}

/* A triple's object: an Iri, a Literal or a QuotedTriple. */
static PyObject *
read_term(Reader *r)
{
    PyObject *value = NULL;                  /* the Iri, or the literal's text */
    PyObject *lit[3] = {NULL, NULL, NULL};   /* text, datatype, language */
    PyObject *quoted = NULL;
    Py_ssize_t kind;
    int present;
    if (read_enum(r, TERM_KINDS, &kind) < 0)
        return NULL;
    if ((value = kind == 0 ? read_iri(r) : read_str(r)) == NULL || (lit[1] = read_optional(r)) == NULL
        || (lit[2] = read_optional(r)) == NULL || read_branch(r, &present) < 0
        || (present && (quoted = read_quoted(r)) == NULL))
        goto error;
    if (kind == 0) {
        clear_all(lit + 1, 2);
        Py_XDECREF(quoted);
        return value;
    }
    if (kind == 1) {
        Py_XDECREF(quoted);
        lit[0] = value;
        return make(&LITERAL, lit);
    }
    if (quoted == NULL) {
        PyErr_SetString(PyExc_ValueError, "TRIPLE term without a triple");
        goto error;
    }
    Py_DECREF(value);
    clear_all(lit + 1, 2);
    return quoted;
error:
    Py_XDECREF(value);
    clear_all(lit + 1, 2);
    Py_XDECREF(quoted);
    return NULL;
}

static PyObject *
read_triples(Reader *r)
{
    PyObject *out = PyList_New(0), *tuple;
    int64_t count;
    if (out == NULL)
        return NULL;
    if (read_count(r, &count) < 0)
        goto error;
    while (count) {
        for (; count; count--) {
            PyObject *f[3] = {NULL, NULL, NULL};
            if ((f[0] = read_iri(r)) == NULL || (f[1] = read_iri(r)) == NULL || (f[2] = read_term(r)) == NULL) {
                clear_all(f, 3);
                goto error;
            }
            PyObject *triple = make(&TRIPLE, f);
            if (triple == NULL)
                goto error;
            int failed = PyList_Append(out, triple);
            Py_DECREF(triple);
            if (failed < 0)
                goto error;
        }
        if (read_count(r, &count) < 0)
            goto error;
    }
    tuple = PyList_AsTuple(out);
    Py_DECREF(out);
    return tuple;
error:
    Py_DECREF(out);
    return NULL;
}

static PyObject *
read_status(Reader *r)
{
    PyObject *f[5] = {NULL, NULL, NULL, NULL, NULL};  /* state, steps, expected, late, missing */
    PyObject *missing = NULL;
    Py_ssize_t state;
    int64_t n, count;
    int present;
    if (read_enum(r, n_states, &state) < 0)
        return NULL;
    f[0] = Py_NewRef(PyTuple_GET_ITEM(states, state));
    if (read_int(r, &n) < 0 || (f[1] = PyLong_FromLongLong(n)) == NULL || read_branch(r, &present) < 0)
        goto error;
    if (present) {
        if (read_int(r, &n) < 0 || (f[2] = PyLong_FromLongLong(n)) == NULL)
            goto error;
    }
    else {
        f[2] = Py_NewRef(Py_None);
    }
    if (read_int(r, &n) < 0 || (f[3] = PyLong_FromLongLong(n)) == NULL || (missing = PyList_New(0)) == NULL
        || read_count(r, &count) < 0)
        goto error;
    while (count) {
        for (; count; count--) {
            PyObject *item;
            if (read_int(r, &n) < 0 || (item = PyLong_FromLongLong(n)) == NULL)
                goto error;
            int failed = PyList_Append(missing, item);
            Py_DECREF(item);
            if (failed < 0)
                goto error;
        }
        if (read_count(r, &count) < 0)
            goto error;
    }
    if ((f[4] = PyList_AsTuple(missing)) == NULL)
        goto error;
    Py_DECREF(missing);
    return make(&STATUS, f);
error:
    clear_all(f, 5);
    Py_XDECREF(missing);
    return NULL;
}

static PyObject *
read_step(Reader *r)
{
    /* event_id, session_id, mechanism, seq, user, collection, question, triples, status, duplicate, graph */
    PyObject *f[11] = {NULL};
    Py_ssize_t mechanism;
    int64_t seq;
    if ((f[0] = read_str(r)) == NULL || (f[1] = read_str(r)) == NULL || read_enum(r, n_mechanisms, &mechanism) < 0)
        goto error;
    f[2] = Py_NewRef(PyTuple_GET_ITEM(mechanisms, mechanism));
    if (read_long(r, &seq) < 0 || (f[3] = PyLong_FromLongLong(seq)) == NULL || (f[4] = read_str(r)) == NULL
        || (f[5] = read_str(r)) == NULL || (f[6] = read_str(r)) == NULL || (f[10] = read_str(r)) == NULL
        || (f[7] = read_triples(r)) == NULL || (f[8] = read_status(r)) == NULL)
        goto error;
    if (r->pos >= r->len) {
        past_end();
        goto error;
    }
    unsigned int duplicate = r->buf[r->pos];
    if (duplicate > 1) {
        PyErr_SetString(PyExc_ValueError, "not a boolean");
        goto error;
    }
    if (r->pos + 1 != r->len) {
        PyErr_SetString(PyExc_ValueError, "trailing bytes");
        goto error;
    }
    f[9] = Py_NewRef(duplicate ? Py_True : Py_False);
    return make(&STEP, f);
error:
    clear_all(f, 11);
    return NULL;
}

/* -- the writer: the Avro body of a StepTriples, as records._step_triples_body writes it -- */

/* A growing output buffer: bytes [0, len) are written; it starts in `small`. */
typedef struct {
    char *buf;
    Py_ssize_t len, cap;
    char small[4096];
} Writer;

static int
w_reserve(Writer *w, Py_ssize_t n)
{
    if (w->len + n <= w->cap)
        return 0;
    Py_ssize_t cap = w->cap;
    while (cap < w->len + n)
        cap *= 2;
    char *grown = w->buf == w->small ? PyMem_Malloc((size_t)cap) : PyMem_Realloc(w->buf, (size_t)cap);
    if (grown == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (w->buf == w->small)
        memcpy(grown, w->small, (size_t)w->len);
    w->buf = grown;
    w->cap = cap;
    return 0;
}

static inline int
w_raw(Writer *w, const void *data, Py_ssize_t n)
{
    if (w_reserve(w, n) < 0)
        return -1;
    memcpy(w->buf + w->len, data, (size_t)n);
    w->len += n;
    return 0;
}

static inline int
w_byte(Writer *w, unsigned char b)
{
    return w_raw(w, &b, 1);
}

/* A zig-zag varint. */
static inline int
w_long(Writer *w, int64_t v)
{
    unsigned char out[10];
    int n = 0;
    uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    while (z > 0x7F) {
        out[n++] = (unsigned char)((z & 0x7F) | 0x80);
        z >>= 7;
    }
    out[n++] = (unsigned char)z;
    return w_raw(w, out, n);
}

/* A Python int of exactly type int within [low, high] (binary.long's rule), written as a varint. */
static int
w_number(Writer *w, PyObject *o, int64_t low, int64_t high)
{
    int overflow;
    long long v;
    if (!PyLong_CheckExact(o))
        return fail(PyExc_TypeError, "not an Avro number");
    v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (overflow || v < low || v > high)
        return fail(PyExc_TypeError, "not an Avro number");
    return w_long(w, (int64_t)v);
}

/* A str (or subclass) as its UTF-8 length and bytes; a str with a lone surrogate raises UnicodeEncodeError. */
static int
w_str(Writer *w, PyObject *s)
{
    Py_ssize_t n;
    const char *utf8;
    if (!PyUnicode_Check(s))
        return fail(PyExc_TypeError, "not a str");
    if ((utf8 = PyUnicode_AsUTF8AndSize(s, &n)) == NULL)
        return -1;
    if (w_long(w, (int64_t)n) < 0)
        return -1;
    return w_raw(w, utf8, n);
}

/* A ["null", "string"] union. */
static int
w_optional(Writer *w, PyObject *s)
{
    if (s == Py_None)
        return w_byte(w, 0);
    if (w_byte(w, 2) < 0)
        return -1;
    return w_str(w, s);
}

/* Field i of obj, an instance of exactly class c (borrowed); NULL with TypeError/AttributeError otherwise. */
static inline PyObject *
field(PyObject *obj, Cls *c, Py_ssize_t i)
{
    PyObject *value;
    if (!Py_IS_TYPE(obj, c->type)) {
        PyErr_Format(PyExc_TypeError, "not a %s", c->name);
        return NULL;
    }
    value = *(PyObject **)((char *)obj + c->offsets[i]);
    if (value == NULL)
        PyErr_Format(PyExc_AttributeError, "%s.%s is not set", c->name, c->fields[i]);
    return value;
}

/* The value of an Iri, as a str to write. */
static int
w_iri(Writer *w, PyObject *iri)
{
    PyObject *value = field(iri, &IRI, 0);
    return value == NULL ? -1 : w_str(w, value);
}

/* A Literal as the Term's kind LITERAL and its value, datatype and language. */
static int
w_literal(Writer *w, PyObject *lit)
{
    PyObject *value, *datatype, *language;
    if ((value = field(lit, &LITERAL, 0)) == NULL || (datatype = field(lit, &LITERAL, 1)) == NULL
        || (language = field(lit, &LITERAL, 2)) == NULL)
        return -1;
    if (w_byte(w, 2) < 0 || w_str(w, value) < 0 || w_optional(w, datatype) < 0)
        return -1;
    return w_optional(w, language);
}

/* A provstream.Term record: kind, value, datatype, language, triple. */
static int
w_term(Writer *w, PyObject *o)
{
    PyObject *s, *p, *qo;
    if (Py_IS_TYPE(o, IRI.type)) {
        if (w_byte(w, 0) < 0 || w_iri(w, o) < 0)
            return -1;
        return w_raw(w, "\x00\x00\x00", 3);
    }
    if (Py_IS_TYPE(o, LITERAL.type))
        return w_literal(w, o) < 0 ? -1 : w_byte(w, 0);  /* no quoted triple */
    if (!Py_IS_TYPE(o, QUOTED.type))
        return fail(PyExc_TypeError, "not a term");
    /* kind TRIPLE, value null, datatype null, language null, then the quoted triple's branch and fields */
    if ((s = field(o, &QUOTED, 0)) == NULL || (p = field(o, &QUOTED, 1)) == NULL || (qo = field(o, &QUOTED, 2)) == NULL)
        return -1;
    if (w_raw(w, "\x04\x00\x00\x00\x02", 5) < 0 || w_iri(w, s) < 0 || w_iri(w, p) < 0)
        return -1;
    if (Py_IS_TYPE(qo, IRI.type)) {
        if (w_byte(w, 0) < 0 || w_iri(w, qo) < 0)
            return -1;
        return w_raw(w, "\x00\x00", 2);
    }
    if (!Py_IS_TYPE(qo, LITERAL.type))
        return fail(PyExc_TypeError, "not a quoted object");
    return w_literal(w, qo);
}

/* The index of member in members (a tuple of enum members), as a varint; TypeError if it is not one. */
static int
w_member(Writer *w, PyObject *member, PyObject *members, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++)
        if (PyTuple_GET_ITEM(members, i) == member)
            return w_long(w, (int64_t)i);
    return fail(PyExc_TypeError, "not an enum member");
}

/* A tuple or list (borrowed items via PySequence_Fast_ITEMS); NULL with TypeError otherwise. */
static inline PyObject **
items_of(PyObject *seq, Py_ssize_t *n)
{
    if (PyTuple_CheckExact(seq)) {
        *n = PyTuple_GET_SIZE(seq);
        return ((PyTupleObject *)seq)->ob_item;
    }
    if (PyList_CheckExact(seq)) {
        *n = PyList_GET_SIZE(seq);
        return ((PyListObject *)seq)->ob_item;
    }
    PyErr_SetString(PyExc_TypeError, "not a tuple or list");
    return NULL;
}

static int
w_status(Writer *w, PyObject *st)
{
    PyObject *state, *steps, *expected, *late, *missing, **items;
    Py_ssize_t n;
    if ((state = field(st, &STATUS, 0)) == NULL || (steps = field(st, &STATUS, 1)) == NULL
        || (expected = field(st, &STATUS, 2)) == NULL || (late = field(st, &STATUS, 3)) == NULL
        || (missing = field(st, &STATUS, 4)) == NULL)
        return -1;
    if (w_member(w, state, states, n_states) < 0 || w_number(w, steps, INT32_MIN, INT32_MAX) < 0)
        return -1;
    if (expected == Py_None) {
        if (w_byte(w, 0) < 0)
            return -1;
    }
    else if (w_byte(w, 2) < 0 || w_number(w, expected, INT32_MIN, INT32_MAX) < 0)
        return -1;
    if (w_number(w, late, INT32_MIN, INT32_MAX) < 0 || (items = items_of(missing, &n)) == NULL)
        return -1;
    if (n > 0) {
        if (w_long(w, (int64_t)n) < 0)
            return -1;
        for (Py_ssize_t i = 0; i < n; i++)
            if (w_number(w, items[i], INT32_MIN, INT32_MAX) < 0)
                return -1;
    }
    return w_byte(w, 0);
}

static int
w_step(Writer *w, PyObject *msg)
{
    PyObject *f[11], **items;
    Py_ssize_t n;
    for (Py_ssize_t i = 0; i < 11; i++)
        if ((f[i] = field(msg, &STEP, i)) == NULL)
            return -1;
    /* event_id, session_id, mechanism, seq, user, collection, question, graph */
    if (w_str(w, f[0]) < 0 || w_str(w, f[1]) < 0 || w_member(w, f[2], mechanisms, n_mechanisms) < 0
        || w_number(w, f[3], INT64_MIN, INT64_MAX) < 0 || w_str(w, f[4]) < 0 || w_str(w, f[5]) < 0
        || w_str(w, f[6]) < 0 || w_str(w, f[10]) < 0)
        return -1;
    if ((items = items_of(f[7], &n)) == NULL)
        return -1;
    if (n > 0) {
        if (w_long(w, (int64_t)n) < 0)
            return -1;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *s, *p, *o;
            if ((s = field(items[i], &TRIPLE, 0)) == NULL || (p = field(items[i], &TRIPLE, 1)) == NULL
                || (o = field(items[i], &TRIPLE, 2)) == NULL)
                return -1;
            if (w_iri(w, s) < 0 || w_iri(w, p) < 0 || w_term(w, o) < 0)
                return -1;
        }
    }
    if (w_byte(w, 0) < 0 || w_status(w, f[8]) < 0)
        return -1;
    if (f[9] != Py_True && f[9] != Py_False)
        return fail(PyExc_TypeError, "not a boolean");
    return w_byte(w, f[9] == Py_True);
}

PyDoc_STRVAR(write_step_triples_doc,
"write_step_triples(msg, prefix, /)\n--\n\n"
"``prefix`` followed by the Avro body of ``msg``: what ``prefix + records._step_triples_body(msg)`` is.\n\n"
"Takes only the exact classes of :mod:`provstream.core.triples` (a ``tuple`` or ``list`` of\n"
"triples and of missing steps) and raises ``TypeError`` (or ``AttributeError``,\n"
"``UnicodeEncodeError``) for anything else, where the Python writer may still take a look-alike:\n"
"its caller then encodes the message another way.\n\n"
"Parameters:\n"
"    msg: the ``StepTriples`` value.\n"
"    prefix: ``bytes`` to start the result with (the single-object header).\n\n"
"Returns:\n"
"    the whole message, ``bytes``.\n\n"
"Example::\n\n"
"    >>> from provstream.codec import records\n"
"    >>> from provstream.core.triples import Iri, SessionState, SessionStatus, StepTriples, Triple\n"
"    >>> from provstream.core.vocab import Mechanism\n"
"    >>> step = StepTriples(\"e1\", \"s1\", Mechanism.AGENT, 0, \"u\", \"c\", \"urn:q\",\n"
"    ...                    (Triple(Iri(\"urn:a\"), Iri(\"urn:b\"), Iri(\"urn:c\")),), SessionStatus(SessionState.OPEN, 1))\n"
"    >>> write_step_triples(step, b\"\") == records._step_triples_body(step)\n"
"    True\n");

static PyObject *
write_step_triples(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    Writer w;
    PyObject *out = NULL;
    (void)module;
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "write_step_triples() takes 2 arguments (%zd given)", nargs);
        return NULL;
    }
    if (!PyBytes_Check(args[1])) {
        PyErr_Format(PyExc_TypeError, "write_step_triples() needs a bytes prefix, not %.100s",
                     Py_TYPE(args[1])->tp_name);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < NCLASSES; i++)
        if (!CLASSES[i]->direct)
            return PyErr_Format(PyExc_TypeError, "%s did not pass the checks for direct access", CLASSES[i]->name);
    w.buf = w.small;
    w.len = 0;
    w.cap = (Py_ssize_t)sizeof(w.small);
    if (w_raw(&w, PyBytes_AS_STRING(args[1]), PyBytes_GET_SIZE(args[1])) == 0 && w_step(&w, args[0]) == 0)
        out = PyBytes_FromStringAndSize(w.buf, w.len);
    if (w.buf != w.small)
        PyMem_Free(w.buf);
    return out;
}

/* -- the module --------------------------------------------------------------- */

PyDoc_STRVAR(read_step_triples_doc,
"read_step_triples(buf, pos, /)\n--\n\n"
"The ``StepTriples`` whose Avro body starts at ``pos`` and ends at the end of ``buf``.\n\n"
"What :func:`provstream.codec.triples_reader.read_step_triples` returns (equal values,\n"
"the same interned vocabulary IRIs) and raises for the same inputs.\n\n"
"Parameters:\n"
"    buf: the whole single-object message (``bytes``; any other type is a ``TypeError``).\n"
"    pos: where the body starts (``provstream.codec.avro.HEADER_LEN``), 0 <= pos <= len(buf).\n\n"
"Returns:\n"
"    the ``StepTriples`` value.\n\n"
"Raises:\n"
"    ValueError, IndexError or UnicodeDecodeError on anything the Python reader refuses.\n\n"
"Example::\n\n"
"    >>> from provstream.codec import avro, records\n"
"    >>> from provstream.core.triples import Iri, SessionState, SessionStatus, StepTriples, Triple\n"
"    >>> from provstream.core.vocab import Mechanism\n"
"    >>> step = StepTriples(\"e1\", \"s1\", Mechanism.AGENT, 0, \"u\", \"c\", \"urn:q\",\n"
"    ...                    (Triple(Iri(\"urn:a\"), Iri(\"urn:b\"), Iri(\"urn:c\")),), SessionStatus(SessionState.OPEN, 1))\n"
"    >>> read_step_triples(records.encode_triples(step), avro.HEADER_LEN) == step\n"
"    True\n");

static PyObject *
read_step_triples(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    Reader r;
    (void)module;
    if (reader_args("read_step_triples", args, nargs, &r) < 0)
        return NULL;
    return read_step(&r);
}

PyDoc_STRVAR(direct_construction_doc, DIRECT_CONSTRUCTION_DOC);

static PyObject *
direct_construction(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    return switch_direct(CLASSES, NCLASSES, args, nargs);
}

static PyMethodDef methods[] = {
    {"read_step_triples", (PyCFunction)(void (*)(void))read_step_triples, METH_FASTCALL, read_step_triples_doc},
    {"write_step_triples", (PyCFunction)(void (*)(void))write_step_triples, METH_FASTCALL, write_step_triples_doc},
    {"direct_construction", (PyCFunction)(void (*)(void))direct_construction, METH_FASTCALL,
     direct_construction_doc},
    {NULL, NULL, 0, NULL},
};

static int
load_enum(PyObject *reader, const char *name, PyObject **out, Py_ssize_t *n)
{
    *out = PyObject_GetAttrString(reader, name);
    if (*out == NULL)
        return -1;
    if (!PyTuple_CheckExact(*out) || PyTuple_GET_SIZE(*out) == 0) {
        PyErr_Format(PyExc_ImportError, "triples_reader.%s is not a tuple of enum members", name);
        return -1;
    }
    *n = PyTuple_GET_SIZE(*out);
    return 0;
}

/* Forget everything a failed import loaded, so that a later import starts afresh. */
static void
unload(void)
{
    unload_classes(CLASSES, NCLASSES);
    Py_CLEAR(mechanisms);
    Py_CLEAR(states);
    for (size_t i = 0; i < VOCAB_SLOTS; i++) {
        Py_CLEAR(vocab[i].key);
        Py_CLEAR(vocab[i].iri);
    }
}

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "provstream.codec._triples_c",
    "The direct StepTriples reader and writer in C: provstream.codec.triples_reader.read_step_triples and\n"
    "records._step_triples_body, faster.\n\n"
    "FINGERPRINT is the schema fingerprint (hex) of the form it reads.",
    -1,
    methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__triples_c(void)
{
    PyObject *reader = NULL, *iris = NULL, *module = NULL;
    if (IRI.type != NULL) {
        PyErr_SetString(PyExc_ImportError, "provstream.codec._triples_c cannot be loaded twice in one process");
        return NULL;
    }
    if ((reader = PyImport_ImportModule("provstream.codec.triples_reader")) == NULL
        || load_classes(CLASSES, NCLASSES, reader) < 0
        || load_enum(reader, "_MECHANISMS", &mechanisms, &n_mechanisms) < 0
        || load_enum(reader, "_STATES", &states, &n_states) < 0
        || (iris = PyObject_GetAttrString(reader, "_IRIS")) == NULL || vocab_fill(iris) < 0)
        goto done;
    module = PyModule_Create(&module_def);
    if (module != NULL && PyModule_AddStringConstant(module, "FINGERPRINT", FINGERPRINT) < 0)
        Py_CLEAR(module);
done:
    if (module == NULL) {
        unload();
        as_import_error("provstream.codec._triples_c");
    }
    Py_XDECREF(reader);
    Py_XDECREF(iris);
    return module;
}
