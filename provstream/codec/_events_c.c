/*
 * provstream.codec._events_c: the direct Event reader in C.
 *
 * Reads the Avro body of one canonical form of provstream.Event (the one
 * provstream/codec/event_writer.py writes) straight into the frozen
 * dataclasses of provstream.core.events, and returns what
 * records.decode_event's fastavro path (fastavro + records.event_from_avro)
 * returns for the same message: equal values, the Mechanism members, None for
 * an absent optional field, tuples for the arrays, and event_time as the
 * aware datetime in datetime.timezone.utc that fastavro makes of the
 * timestamp-micros (epoch + timedelta(microseconds=n)). It raises
 * (ValueError, IndexError, OverflowError, UnicodeDecodeError) on anything it
 * does not take: what fastavro refuses (a truncated body, invalid UTF-8, an
 * index out of range, a time outside the datetime range, trailing bytes) and
 * a few valid encodings it leaves to fastavro (array blocks with byte sizes,
 * an optional field's union index in more than one byte, ints out of the
 * 32-bit range); records.py then decodes the message through fastavro, which
 * returns the value or raises DecodeError.
 *
 * The classes are read from provstream.core.events, the Mechanism members from
 * provstream.core.vocab (Mechanism(symbol), as event_from_avro makes them),
 * once, when the module is imported. The Avro primitives and the way values
 * are made are in _avro_c.h, shared with _triples_c.c.
 */

#include "_avro_c.h"
#include <datetime.h>

/* The canonical form of provstream.Event this reader is written for: its
 * CRC-64-AVRO fingerprint, as event_writer.DIRECT_EVENT_FINGERPRINT. records.py
 * uses the module only while the two agree. */
#define FINGERPRINT "0cb27ee565374378"

/* -- the classes the values are made of (provstream.core.events) ------------ */

static Cls EVENT = {"Event",
                    {"event_id", "session_id", "mechanism", "seq", "event_time", "payload", "user", "collection"},
                    8, NULL, {0}, 0};
static Cls SUBTRACE = {"SubTrace", {"mechanism", "session_id"}, 2, NULL, {0}, 0};
static Cls EDGE = {"SelectedEdge", {"subject", "predicate", "object", "reasoning"}, 4, NULL, {0}, 0};
static Cls AGENT_QUESTION = {"AgentQuestion", {"query", "conversation_id", "agent_name"}, 3, NULL, {0}, 0};
static Cls AGENT_ITERATION = {"AgentIteration",
                              {"iteration", "thought", "action", "arguments", "observation", "used", "subtrace"},
                              7, NULL, {0}, 0};
static Cls AGENT_CONCLUSION = {"AgentConclusion", {"answer", "iterations"}, 2, NULL, {0}, 0};
static Cls GRAPHRAG_QUESTION = {"GraphRagQuestion", {"query"}, 1, NULL, {0}, 0};
static Cls GRAPHRAG_EXPLORATION = {"GraphRagExploration", {"edge_count"}, 1, NULL, {0}, 0};
static Cls GRAPHRAG_FOCUS = {"GraphRagFocus", {"edges"}, 1, NULL, {0}, 0};
static Cls GRAPHRAG_SYNTHESIS = {"GraphRagSynthesis", {"content"}, 1, NULL, {0}, 0};
static Cls DOCRAG_QUESTION = {"DocRagQuestion", {"query"}, 1, NULL, {0}, 0};
static Cls DOCRAG_EXPLORATION = {"DocRagExploration", {"chunk_count", "chunks"}, 2, NULL, {0}, 0};
static Cls DOCRAG_SYNTHESIS = {"DocRagSynthesis", {"content"}, 1, NULL, {0}, 0};

/* The payload union's branches, in the schema's order. */
static Cls *const PAYLOADS[] = {
    &AGENT_QUESTION, &AGENT_ITERATION, &AGENT_CONCLUSION,
    &GRAPHRAG_QUESTION, &GRAPHRAG_EXPLORATION, &GRAPHRAG_FOCUS, &GRAPHRAG_SYNTHESIS,
    &DOCRAG_QUESTION, &DOCRAG_EXPLORATION, &DOCRAG_SYNTHESIS,
};
#define NPAYLOADS ((Py_ssize_t)(sizeof(PAYLOADS) / sizeof(PAYLOADS[0])))
#define MAX_PAYLOAD_FIELDS 7

static Cls *const CLASSES[] = {
    &EVENT, &SUBTRACE, &EDGE,
    &AGENT_QUESTION, &AGENT_ITERATION, &AGENT_CONCLUSION,
    &GRAPHRAG_QUESTION, &GRAPHRAG_EXPLORATION, &GRAPHRAG_FOCUS, &GRAPHRAG_SYNTHESIS,
    &DOCRAG_QUESTION, &DOCRAG_EXPLORATION, &DOCRAG_SYNTHESIS,
};
#define NCLASSES ((Py_ssize_t)(sizeof(CLASSES) / sizeof(CLASSES[0])))

/* provstream.Mechanism's symbols, in the schema's order; mechanisms holds Mechanism(symbol) for each. */
static const char *const MECHANISM_SYMBOLS[] = {"AGENT", "GRAPHRAG", "DOCRAG"};
#define NMECHANISMS ((Py_ssize_t)(sizeof(MECHANISM_SYMBOLS) / sizeof(MECHANISM_SYMBOLS[0])))
static PyObject *mechanisms;       /* tuple of Mechanism */

/* -- timestamp-micros ------------------------------------------------------------ */

#define MICROS_PER_DAY 86400000000LL
#define MIN_MICROS (-62135596800000000LL)   /* 0001-01-01T00:00:00Z: datetime.min */
#define MAX_MICROS 253402300799999999LL     /* 9999-12-31T23:59:59.999999Z: datetime.max */

/* What fastavro makes of a timestamp-micros: epoch + timedelta(microseconds=micros), in timezone.utc. */
static PyObject *
utc_datetime(int64_t micros)
{
    int64_t days, rest, era, doe, yoe, doy, mp, year, month, day;
    if (micros < MIN_MICROS || micros > MAX_MICROS) {
        PyErr_SetString(PyExc_OverflowError, "date value out of range");
        return NULL;
    }
    days = micros / MICROS_PER_DAY;
    rest = micros % MICROS_PER_DAY;
    if (rest < 0) {
        rest += MICROS_PER_DAY;
        days -= 1;
    }
    /* The civil date of a day count from 1970-01-01 (proleptic Gregorian, in 400-year eras from 0000-03-01). */
    days += 719468;
    era = (days >= 0 ? days : days - 146096) / 146097;
    doe = days - era * 146097;                                       /* [0, 146096] */
    yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;     /* [0, 399] */
    doy = doe - (365 * yoe + yoe / 4 - yoe / 100);                   /* [0, 365], from March 1 */
    mp = (5 * doy + 2) / 153;                                        /* [0, 11], March = 0 */
    day = doy - (153 * mp + 2) / 5 + 1;
    month = mp < 10 ? mp + 3 : mp - 9;
    year = yoe + era * 400 + (month <= 2);
    return PyDateTimeAPI->DateTime_FromDateAndTime(
        (int)year, (int)month, (int)day, (int)(rest / 3600000000LL), (int)(rest / 60000000LL % 60),
        (int)(rest / 1000000LL % 60), (int)(rest % 1000000LL), PyDateTime_TimeZone_UTC, PyDateTimeAPI->DateTimeType);
}

/* -- the values: each returns a new reference, or NULL with an exception set -- */

typedef PyObject *(*ReadItem)(Reader *r);

static PyObject *
read_int_item(Reader *r)
{
    int64_t n;
    if (read_int(r, &n) < 0)
        return NULL;
    return PyLong_FromLongLong(n);
}

static PyObject *
read_edge(Reader *r)
{
    PyObject *f[4] = {NULL, NULL, NULL, NULL};   /* subject, predicate, object, reasoning */
    if ((f[0] = read_str(r)) == NULL || (f[1] = read_str(r)) == NULL || (f[2] = read_str(r)) == NULL
        || (f[3] = read_str(r)) == NULL) {
        clear_all(f, 4);
        return NULL;
    }
    return make(&EDGE, f);
}

/* An array as a tuple of its items. */
static PyObject *
read_array(Reader *r, ReadItem read_item)
{
    PyObject *items, *tuple;
    int64_t count;
    if (read_count(r, &count) < 0)
        return NULL;
    if (count == 0)
        return PyTuple_New(0);
    if ((items = PyList_New(0)) == NULL)
        return NULL;
    while (count) {
        for (; count; count--) {
            PyObject *item = read_item(r);
            if (item == NULL)
                goto error;
            int failed = PyList_Append(items, item);
            Py_DECREF(item);
            if (failed < 0)
                goto error;
        }
        if (read_count(r, &count) < 0)
            goto error;
    }
    tuple = PyList_AsTuple(items);
    Py_DECREF(items);
    return tuple;
error:
    Py_DECREF(items);
    return NULL;
}

/* An optional provstream.SubTrace: None or a SubTrace. */
static PyObject *
read_subtrace(Reader *r)
{
    PyObject *f[2] = {NULL, NULL};   /* mechanism, session_id */
    Py_ssize_t mechanism;
    int present;
    if (read_branch(r, &present) < 0)
        return NULL;
    if (!present)
        return Py_NewRef(Py_None);
    if (read_enum(r, NMECHANISMS, &mechanism) < 0)
        return NULL;
    f[0] = Py_NewRef(PyTuple_GET_ITEM(mechanisms, mechanism));
    if ((f[1] = read_str(r)) == NULL) {
        Py_DECREF(f[0]);
        return NULL;
    }
    return make(&SUBTRACE, f);
}

static PyObject *
read_long_value(Reader *r)
{
    int64_t n;
    if (read_long(r, &n) < 0)
        return NULL;
    return PyLong_FromLongLong(n);
}

/* The payload union: its branch index, then that record. */
static PyObject *
read_payload(Reader *r)
{
    PyObject *f[MAX_PAYLOAD_FIELDS] = {NULL};
    int64_t branch;
    if (read_long(r, &branch) < 0)
        return NULL;
    if (branch < 0 || branch >= NPAYLOADS) {
        PyErr_SetString(PyExc_IndexError, "union index out of range");
        return NULL;
    }
    switch (branch) {
    case 0:   /* AgentQuestion: query, conversation_id, agent_name */
        if ((f[0] = read_str(r)) == NULL || (f[1] = read_optional(r)) == NULL || (f[2] = read_optional(r)) == NULL)
            goto error;
        break;
    case 1:   /* AgentIteration: iteration, thought, action, arguments, observation, used, subtrace */
        if ((f[0] = read_int_item(r)) == NULL || (f[1] = read_str(r)) == NULL || (f[2] = read_str(r)) == NULL
            || (f[3] = read_str(r)) == NULL || (f[4] = read_str(r)) == NULL
            || (f[5] = read_array(r, read_int_item)) == NULL || (f[6] = read_subtrace(r)) == NULL)
            goto error;
        break;
    case 2:   /* AgentConclusion: answer, iterations */
        if ((f[0] = read_str(r)) == NULL || (f[1] = read_int_item(r)) == NULL)
            goto error;
        break;
    case 4:   /* GraphRagExploration: edge_count */
        if ((f[0] = read_long_value(r)) == NULL)
            goto error;
        break;
    case 5:   /* GraphRagFocus: edges */
        if ((f[0] = read_array(r, read_edge)) == NULL)
            goto error;
        break;
    case 8:   /* DocRagExploration: chunk_count, chunks */
        if ((f[0] = read_long_value(r)) == NULL || (f[1] = read_array(r, read_str)) == NULL)
            goto error;
        break;
    default:  /* GraphRagQuestion, DocRagQuestion: query; GraphRagSynthesis, DocRagSynthesis: content */
        if ((f[0] = read_str(r)) == NULL)
            goto error;
    }
    return make(PAYLOADS[branch], f);
error:
    clear_all(f, MAX_PAYLOAD_FIELDS);
    return NULL;
}

/* The provstream.Event record, which must end the message. */
static PyObject *
read_event_record(Reader *r)
{
    /* event_id, session_id, mechanism, seq, event_time, payload, user, collection (the dataclass's order) */
    PyObject *f[8] = {NULL};
    Py_ssize_t mechanism;
    int64_t micros;
    if ((f[0] = read_str(r)) == NULL || (f[1] = read_str(r)) == NULL || read_enum(r, NMECHANISMS, &mechanism) < 0)
        goto error;
    f[2] = Py_NewRef(PyTuple_GET_ITEM(mechanisms, mechanism));
    /* the wire's order: ... seq, event_time, user, collection, payload */
    if ((f[3] = read_long_value(r)) == NULL || read_long(r, &micros) < 0 || (f[4] = utc_datetime(micros)) == NULL
        || (f[6] = read_str(r)) == NULL || (f[7] = read_str(r)) == NULL || (f[5] = read_payload(r)) == NULL)
        goto error;
    if (r->pos != r->len) {
        PyErr_SetString(PyExc_ValueError, "trailing bytes");
        goto error;
    }
    return make(&EVENT, f);
error:
    clear_all(f, 8);
    return NULL;
}

/* -- the module --------------------------------------------------------------- */

PyDoc_STRVAR(read_event_doc,
"read_event(buf, pos, /)\n--\n\n"
"The ``Event`` whose Avro body starts at ``pos`` and ends at the end of ``buf``.\n\n"
"What :func:`provstream.codec.records.decode_event` returns through fastavro (equal\n"
"values; ``event_time`` an aware datetime in ``timezone.utc``) for a body written with\n"
"the form of ``FINGERPRINT``; raises for every body fastavro refuses, and for the few\n"
"valid encodings it leaves to fastavro.\n\n"
"Parameters:\n"
"    buf: the whole single-object message (``bytes``; any other type is a ``TypeError``).\n"
"    pos: where the body starts (``provstream.codec.avro.HEADER_LEN``), 0 <= pos <= len(buf).\n\n"
"Returns:\n"
"    the ``Event``.\n\n"
"Raises:\n"
"    ValueError, IndexError, OverflowError or UnicodeDecodeError on anything it does not take.\n\n"
"Example::\n\n"
"    >>> from datetime import UTC, datetime\n"
"    >>> from provstream.codec import avro, records\n"
"    >>> from provstream.core import events as ev\n"
"    >>> from provstream.core.vocab import Mechanism\n"
"    >>> e = ev.Event(\"e1\", \"s1\", Mechanism.AGENT, 1, datetime(2025, 1, 1, tzinfo=UTC),\n"
"    ...              ev.AgentIteration(1, \"think\", \"Search\", \"{}\", \"saw\", (), None), \"u\", \"c\")\n"
"    >>> read_event(records.encode_event(e), avro.HEADER_LEN) == e\n"
"    True\n");

static PyObject *
read_event(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    Reader r;
    (void)module;
    if (reader_args("read_event", args, nargs, &r) < 0)
        return NULL;
    return read_event_record(&r);
}

PyDoc_STRVAR(direct_construction_doc, DIRECT_CONSTRUCTION_DOC);

static PyObject *
direct_construction(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    return switch_direct(CLASSES, NCLASSES, args, nargs);
}

static PyMethodDef methods[] = {
    {"read_event", (PyCFunction)(void (*)(void))read_event, METH_FASTCALL, read_event_doc},
    {"direct_construction", (PyCFunction)(void (*)(void))direct_construction, METH_FASTCALL,
     direct_construction_doc},
    {NULL, NULL, 0, NULL},
};

/* mechanisms = tuple(Mechanism(symbol) for symbol in MECHANISM_SYMBOLS). */
static int
load_mechanisms(void)
{
    PyObject *vocab = PyImport_ImportModule("provstream.core.vocab"), *mechanism = NULL;
    int ok = -1;
    if (vocab == NULL || (mechanism = PyObject_GetAttrString(vocab, "Mechanism")) == NULL
        || (mechanisms = PyTuple_New(NMECHANISMS)) == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < NMECHANISMS; i++) {
        PyObject *member = PyObject_CallFunction(mechanism, "s", MECHANISM_SYMBOLS[i]);
        if (member == NULL)
            goto done;
        PyTuple_SET_ITEM(mechanisms, i, member);
    }
    ok = 0;
done:
    Py_XDECREF(vocab);
    Py_XDECREF(mechanism);
    return ok;
}

/* Forget everything a failed import loaded, so that a later import starts afresh. */
static void
unload(void)
{
    unload_classes(CLASSES, NCLASSES);
    Py_CLEAR(mechanisms);
}

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "provstream.codec._events_c",
    "The direct Event reader in C: what provstream.codec.records.decode_event returns, faster.\n\n"
    "FINGERPRINT is the schema fingerprint (hex) of the form it reads.",
    -1,
    methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__events_c(void)
{
    PyObject *events = NULL, *module = NULL;
    if (EVENT.type != NULL) {
        PyErr_SetString(PyExc_ImportError, "provstream.codec._events_c cannot be loaded twice in one process");
        return NULL;
    }
    PyDateTime_IMPORT;
    if (PyDateTimeAPI == NULL || (events = PyImport_ImportModule("provstream.core.events")) == NULL
        || load_classes(CLASSES, NCLASSES, events) < 0 || load_mechanisms() < 0)
        goto done;
    module = PyModule_Create(&module_def);
    if (module != NULL && PyModule_AddStringConstant(module, "FINGERPRINT", FINGERPRINT) < 0)
        Py_CLEAR(module);
done:
    if (module == NULL) {
        unload();
        as_import_error("provstream.codec._events_c");
    }
    Py_XDECREF(events);
    return module;
}
