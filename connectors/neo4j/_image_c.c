/*
 * provstream.connectors.neo4j._image_c: GraphImage.write in C.
 *
 * write(nodes, rels, adjacent, rows) applies the sink's write rows (what
 * rows.batch_rows gives) to an image's node dict, relationship dict and
 * adjacency (or None) as image.py's _write_py does, clause by clause as
 * cypher.WRITE_BATCH runs them: every row's node first, then every row's
 * relationships. The result is the same image: the same nodes and
 * relationships in the same insertion order, each node's properties in the
 * same order, the same labels, Moments and adjacency.
 *
 * It first checks that it takes the input (a list of exact dicts, each with an
 * ``iri`` str, a ``props`` dict and ``labels``, the status fields when it has
 * ``steps``, a lineage dict with the four offsets, relationship lists of
 * dicts with ``o`` and ``graph``) and raises Unsupported otherwise, before
 * anything is changed, so that image.py applies those rows in Python. From
 * then on the values are handled with the generic calls Python makes (rich
 * comparison for the steps, ``in`` for the appended lists, ``list()`` copies
 * where Python copies), so that any value behaves, and fails, as in Python.
 *
 * configure() hands over the classes and names image.py defines (ImageNode,
 * Moment, the labels' RESOURCE, RELATIONSHIP_TYPES, LINK and the property
 * names), so there is one definition of each. Nodes and Moments are made as
 * their dataclass __init__ makes them: object.__new__, then the fields set in
 * order (image.py checks the fields and compares a sample with _write_py's).
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define NAPPENDED 3
#define NSTATUS 5
#define NLINEAGE 4
#define NRELS 8                     /* at most this many relationship types */

static PyObject *Unsupported;

/* -- what configure() hands over ------------------------------------------------- */

static PyTypeObject *node_type, *moment_type;
static PyObject *resource_label, *link_type;
static PyObject *rel_types[NRELS];
static int rel_is_link[NRELS];
static Py_ssize_t nrels;
static PyObject *appended_keys[NAPPENDED], *appended_names[NAPPENDED];
static PyObject *status_names[NSTATUS], *lineage_names[NLINEAGE];
static int configured = 0;

/* The names image.py writes out, interned once. */
static PyObject *s_iri, *s_props, *s_labels, *s_graph, *s_started, *s_steps, *s_lineage, *s_o, *s_predicate,
    *s_text, *s_get, *s_pop, *s_add, *s_update, *s_items, *empty_tuple;

static int
intern_names(void)
{
    struct { PyObject **slot; const char *text; } names[] = {
        {&s_iri, "iri"}, {&s_props, "props"}, {&s_labels, "labels"}, {&s_graph, "graph"},
        {&s_started, "startedAtTime"}, {&s_steps, "steps"}, {&s_lineage, "lineage"}, {&s_o, "o"},
        {&s_predicate, "predicate"}, {&s_text, "text"}, {&s_get, "get"}, {&s_pop, "pop"}, {&s_add, "add"},
        {&s_update, "update"}, {&s_items, "items"},
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if ((*names[i].slot = PyUnicode_InternFromString(names[i].text)) == NULL)
            return -1;
    return (empty_tuple = PyTuple_New(0)) == NULL ? -1 : 0;
}

/* -- the rows, checked and noted before anything changes ------------------------------- */

/* One row's values, each a strong reference or NULL (the key is absent). */
enum { R_IRI, R_PROPS, R_LABELS, R_GRAPH, R_APPENDED, R_STARTED = R_APPENDED + NAPPENDED, R_STEPS,
       R_STATUS, R_LINEAGE = R_STATUS + NSTATUS, R_RELS, R_SIZE = R_RELS + NRELS };

static inline int
bail(const char *why)
{
    PyErr_SetString(Unsupported, why);
    return -1;
}

/* row.get(key) as a strong reference in *slot (NULL when absent); -1 on error. */
static inline int
note(PyObject *row, PyObject *key, PyObject **slot)
{
    PyObject *value = PyDict_GetItemWithError(row, key);
    if (value == NULL)
        return PyErr_Occurred() ? -1 : 0;
    *slot = Py_NewRef(value);
    return 1;
}

static inline int
is_none(PyObject *x)
{
    return x == NULL || x == Py_None;
}

/* A relationship list: a list of dicts, each with "o" and "graph". */
static int
check_relationships(PyObject *found)
{
    if (!PyList_CheckExact(found))
        return bail("a relationship group not a list");
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(found); i++) {
        PyObject *rel = PyList_GET_ITEM(found, i);
        if (!PyDict_CheckExact(rel))
            return bail("a relationship row not a dict");
        int has_o = PyDict_Contains(rel, s_o), has_graph = has_o > 0 ? PyDict_Contains(rel, s_graph) : 0;
        if (has_o < 0 || has_graph < 0)
            return -1;
        if (!has_o || !has_graph)
            return bail("a relationship row without o or graph");
    }
    return 0;
}

/* Note one row's values in out[R_SIZE]; Unsupported for a row this module does not take. */
static int
note_row(PyObject *row, PyObject **out)
{
    int rc, known = 0;
    if (!PyDict_CheckExact(row))
        return bail("a row not a dict");
    if ((rc = note(row, s_iri, &out[R_IRI])) <= 0 || !PyUnicode_CheckExact(out[R_IRI]))
        return rc < 0 ? -1 : bail("a row's iri not a str");
    if ((rc = note(row, s_props, &out[R_PROPS])) <= 0 || !PyDict_CheckExact(out[R_PROPS]))
        return rc < 0 ? -1 : bail("a row's props not a dict");
    if ((rc = note(row, s_labels, &out[R_LABELS])) <= 0)
        return rc < 0 ? -1 : bail("a row without labels");
    known = 3;
    PyObject *keys[] = {s_graph, s_started, s_steps, s_lineage};
    int slots[] = {R_GRAPH, R_STARTED, R_STEPS, R_LINEAGE};
    for (int i = 0; i < 4; i++) {
        if ((rc = note(row, keys[i], &out[slots[i]])) < 0)
            return -1;
        known += rc;
    }
    for (int i = 0; i < NAPPENDED; i++) {
        if ((rc = note(row, appended_keys[i], &out[R_APPENDED + i])) < 0)
            return -1;
        known += rc;
    }
    if (!is_none(out[R_STEPS]))  /* {name: row[name] for name in STATUS_PROPS} */
        for (int i = 0; i < NSTATUS; i++) {
            if (status_names[i] == s_steps)
                continue;
            if ((rc = note(row, status_names[i], &out[R_STATUS + i])) <= 0)
                return rc < 0 ? -1 : bail("a status row without all the status fields");
            known++;
        }
    if (!is_none(out[R_LINEAGE])) {
        if (!PyDict_CheckExact(out[R_LINEAGE]))
            return bail("a row's lineage not a dict");
        for (int i = 0; i < NLINEAGE; i++) {
            if ((rc = PyDict_Contains(out[R_LINEAGE], lineage_names[i])) <= 0)
                return rc < 0 ? -1 : bail("a lineage without all four offsets");
        }
    }
    /* The relationship types are looked up only when the row has a key not noted so far. */
    for (Py_ssize_t i = 0; i < nrels && PyDict_GET_SIZE(row) > known; i++) {
        if ((rc = note(row, rel_types[i], &out[R_RELS + i])) < 0)
            return -1;
        known += rc;
        if (!is_none(out[R_RELS + i]) && check_relationships(out[R_RELS + i]) < 0)
            return -1;
    }
    return 0;
}

/* -- the image's containers: a dict fast, anything else as Python calls it ---------------- */

/* map.get(key): a new reference (None when absent). */
static PyObject *
map_get(PyObject *map, PyObject *key)
{
    if (PyDict_CheckExact(map)) {
        PyObject *value = PyDict_GetItemWithError(map, key);
        if (value == NULL)
            return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
        return Py_NewRef(value);
    }
    return PyObject_CallMethodOneArg(map, s_get, key);
}

static inline int
map_set(PyObject *map, PyObject *key, PyObject *value)
{
    return PyDict_CheckExact(map) ? PyDict_SetItem(map, key, value) : PyObject_SetItem(map, key, value);
}

/* map.pop(key, None) */
static int
map_pop(PyObject *map, PyObject *key)
{
    if (PyDict_CheckExact(map)) {
        int found = PyDict_Contains(map, key);
        return found <= 0 ? found : PyDict_DelItem(map, key);
    }
    PyObject *popped = PyObject_CallMethodObjArgs(map, s_pop, key, Py_None, NULL);
    if (popped == NULL)
        return -1;
    Py_DECREF(popped);
    return 0;
}

/* One name of _set_all: a None value removes it; with keep_empty_lists a list is copied. */
static int
set_one(PyObject *props, PyObject *name, PyObject *value, int keep_empty_lists)
{
    if (value == Py_None)
        return map_pop(props, name);
    if (keep_empty_lists && PyList_Check(value)) {
        PyObject *copy = PySequence_List(value);
        if (copy == NULL)
            return -1;
        int rc = map_set(props, name, copy);
        Py_DECREF(copy);
        return rc;
    }
    return map_set(props, name, value);
}

/* _set_all(props, values) for a dict of values. */
static int
set_all(PyObject *props, PyObject *values)
{
    if (PyDict_CheckExact(props) && props != values) {
        Py_ssize_t pos = 0;
        PyObject *name, *value;
        while (PyDict_Next(values, &pos, &name, &value)) {
            Py_INCREF(name);
            Py_INCREF(value);
            int rc = set_one(props, name, value, 0);
            Py_DECREF(name);
            Py_DECREF(value);
            if (rc < 0)
                return -1;
        }
        return 0;
    }
    /* props a mapping of another class, or the dict itself: iterate values.items() as Python does */
    PyObject *items = PyObject_CallMethodNoArgs(values, s_items), *it = NULL, *item;
    if (items == NULL || (it = PyObject_GetIter(items)) == NULL) {
        Py_XDECREF(items);
        return -1;
    }
    int rc = 0;
    while (rc == 0 && (item = PyIter_Next(it)) != NULL) {
        rc = set_one(props, PyTuple_GET_ITEM(item, 0), PyTuple_GET_ITEM(item, 1), 0);
        Py_DECREF(item);
    }
    Py_DECREF(it);
    Py_DECREF(items);
    return rc < 0 || PyErr_Occurred() ? -1 : 0;
}

/* -- the nodes ------------------------------------------------------------------------- */

/* cls() with its fields set in order, as a dataclass __init__ sets them (frozen: object.__setattr__). */
static PyObject *
make(PyTypeObject *cls, PyObject *const *names, PyObject *const *values, int n, int frozen)
{
    PyObject *obj = cls->tp_new(cls, empty_tuple, NULL);
    if (obj == NULL)
        return NULL;
    for (int i = 0; i < n; i++)
        if ((frozen ? PyObject_GenericSetAttr(obj, names[i], values[i]) : PyObject_SetAttr(obj, names[i], values[i]))
            < 0) {
            Py_DECREF(obj);
            return NULL;
        }
    return obj;
}

/* ON CREATE: ImageNode(iri, props={"iri": iri[, "graph"], the appended lists copied}). */
static PyObject *
create_node(PyObject *nodes, PyObject **row, PyObject **props_out)
{
    PyObject *iri = row[R_IRI], *props = PyDict_New(), *labels = NULL, *node = NULL;
    if (props == NULL || PyDict_SetItem(props, s_iri, iri) < 0
        || (!is_none(row[R_GRAPH]) && PyDict_SetItem(props, s_graph, row[R_GRAPH]) < 0))
        goto done;
    for (int i = 0; i < NAPPENDED; i++) {
        PyObject *values = row[R_APPENDED + i];
        if (is_none(values))
            continue;
        PyObject *copy = PySequence_List(values);
        if (copy == NULL)
            goto done;
        int rc = PyDict_SetItem(props, appended_names[i], copy);
        Py_DECREF(copy);
        if (rc < 0)
            goto done;
    }
    if ((labels = PySet_New(NULL)) == NULL || PySet_Add(labels, resource_label) < 0)
        goto done;
    PyObject *names[] = {s_iri, s_labels, s_props}, *values[] = {iri, labels, props};
    node = make(node_type, names, values, 3, 0);
    if (node != NULL && PyDict_SetItem(nodes, iri, node) < 0)
        Py_CLEAR(node);
    if (node != NULL)
        *props_out = Py_NewRef(props);
done:
    Py_XDECREF(props);
    Py_XDECREF(labels);
    return node;
}

/* ON MATCH: props[name] = old + [x for x in values if x not in old], old = props.get(name) or []. */
static int
append_new(PyObject *props, PyObject *name, PyObject *values)
{
    PyObject *old = map_get(props, name), *added = NULL, *it = NULL, *x, *joined = NULL;
    int rc = -1;
    if (old == NULL)
        return -1;
    int truth = PyObject_IsTrue(old);
    if (truth < 0)
        goto done;
    if (!truth)
        Py_SETREF(old, NULL);  /* [] */
    if ((added = PyList_New(0)) == NULL || (it = PyObject_GetIter(values)) == NULL)
        goto done;
    while ((x = PyIter_Next(it)) != NULL) {
        int found = old == NULL ? 0 : PySequence_Contains(old, x);
        if (found < 0 || (!found && PyList_Append(added, x) < 0)) {
            Py_DECREF(x);
            goto done;
        }
        Py_DECREF(x);
    }
    if (PyErr_Occurred())
        goto done;
    /* [] + added is a new list equal to added, which nothing else holds */
    joined = old == NULL ? Py_NewRef(added) : PyNumber_Add(old, added);
    if (joined == NULL)
        goto done;
    rc = map_set(props, name, joined);
done:
    Py_XDECREF(old);
    Py_XDECREF(added);
    Py_XDECREF(it);
    Py_XDECREF(joined);
    return rc;
}

/* node.labels.update(labels) */
static int
add_labels(PyObject *node, PyObject *labels)
{
    PyObject *have = PyObject_GetAttr(node, s_labels);
    if (have == NULL)
        return -1;
    int rc = 0;
    if (PySet_CheckExact(have) && PyList_CheckExact(labels)) {
        for (Py_ssize_t i = 0; rc == 0 && i < PyList_GET_SIZE(labels); i++) {
            PyObject *label = Py_NewRef(PyList_GET_ITEM(labels, i));
            rc = PySet_Add(have, label);
            Py_DECREF(label);
        }
    } else {
        PyObject *done = PyObject_CallMethodOneArg(have, s_update, labels);
        rc = done == NULL ? -1 : 0;
        Py_XDECREF(done);
    }
    Py_DECREF(have);
    return rc;
}

/* The status fields, when the row has at least as many steps as the node (or the node none). */
static int
set_status(PyObject *props, PyObject **row)
{
    PyObject *steps = row[R_STEPS], *old = map_get(props, s_steps);
    if (old == NULL)
        return -1;
    if (old != Py_None) {
        if (!PyDict_CheckExact(props))  /* props["steps"], looked up again */
            Py_SETREF(old, PyObject_GetItem(props, s_steps));
        int newer = old == NULL ? -1 : PyObject_RichCompareBool(old, steps, Py_LE);
        Py_XDECREF(old);
        if (newer <= 0)
            return newer;
    } else {
        Py_DECREF(old);
    }
    /* {name: row[name] for name in STATUS_PROPS}, then _set_all(..., keep_empty_lists=True) */
    PyObject *values[NSTATUS];
    for (int i = 0; i < NSTATUS; i++)
        values[i] = Py_NewRef(status_names[i] == s_steps ? steps : row[R_STATUS + i]);
    int rc = 0;
    for (int i = 0; rc == 0 && i < NSTATUS; i++)
        rc = set_one(props, status_names[i], values[i], 1);
    for (int i = 0; i < NSTATUS; i++)
        Py_DECREF(values[i]);
    return rc;
}

/* Each offset from the row's lineage, when the node has none and the row one. */
static int
set_lineage(PyObject *props, PyObject *lineage)
{
    for (int i = 0; i < NLINEAGE; i++) {
        PyObject *name = lineage_names[i], *old = map_get(props, name);
        if (old == NULL)
            return -1;
        int missing = old == Py_None;
        Py_DECREF(old);
        if (!missing)
            continue;
        PyObject *value = PyDict_GetItemWithError(lineage, name);
        if (value == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetObject(PyExc_KeyError, name);
            return -1;
        }
        if (value != Py_None && map_set(props, name, value) < 0)
            return -1;
    }
    return 0;
}

/* One row's node: MERGE, ON CREATE / ON MATCH, SET, the status and lineage guards. */
static int
write_node(PyObject *nodes, PyObject **row)
{
    PyObject *node = PyDict_GetItemWithError(nodes, row[R_IRI]), *props = NULL;
    int rc = -1;
    if (node == NULL && PyErr_Occurred())
        return -1;
    if (node == NULL || node == Py_None) {
        if ((node = create_node(nodes, row, &props)) == NULL)
            return -1;
    } else {
        Py_INCREF(node);
        if ((props = PyObject_GetAttr(node, s_props)) == NULL)
            goto done;
        for (int i = 0; i < NAPPENDED; i++)
            if (!is_none(row[R_APPENDED + i]) && append_new(props, appended_names[i], row[R_APPENDED + i]) < 0)
                goto done;
    }
    if (set_all(props, row[R_PROPS]) < 0)
        goto done;
    if (!is_none(row[R_STARTED])) {
        PyObject *moment = make(moment_type, &s_text, &row[R_STARTED], 1, 1);
        int failed = moment == NULL || map_set(props, s_started, moment) < 0;
        Py_XDECREF(moment);
        if (failed)
            goto done;
    }
    int truth = PyObject_IsTrue(row[R_LABELS]);
    if (truth < 0 || (truth && add_labels(node, row[R_LABELS]) < 0))
        goto done;
    if (!is_none(row[R_STEPS]) && set_status(props, row) < 0)
        goto done;
    if (!is_none(row[R_LINEAGE]) && set_lineage(props, row[R_LINEAGE]) < 0)
        goto done;
    rc = 0;
done:
    Py_DECREF(node);
    Py_XDECREF(props);
    return rc;
}

/* -- the relationships ------------------------------------------------------------------- */

/* rel[key]: a new reference (KeyError when a dict lacks it). */
static PyObject *
item(PyObject *rel, PyObject *key)
{
    if (!PyDict_CheckExact(rel))
        return PyObject_GetItem(rel, key);
    PyObject *value = PyDict_GetItemWithError(rel, key);
    if (value == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetObject(PyExc_KeyError, key);
        return NULL;
    }
    return Py_NewRef(value);
}

/* adjacent.setdefault(iri, set()).add(key) */
static int
adjoin(PyObject *adjacent, PyObject *iri, PyObject *key)
{
    PyObject *found = PyDict_GetItemWithError(adjacent, iri);
    if (found == NULL) {
        if (PyErr_Occurred())
            return -1;
        PyObject *fresh = PySet_New(NULL);
        int rc = fresh == NULL || PyDict_SetItem(adjacent, iri, fresh) < 0 || PySet_Add(fresh, key) < 0 ? -1 : 0;
        Py_XDECREF(fresh);
        return rc;
    }
    Py_INCREF(found);
    int rc;
    if (PySet_CheckExact(found)) {
        rc = PySet_Add(found, key);
    } else {
        PyObject *done = PyObject_CallMethodOneArg(found, s_add, key);
        rc = done == NULL ? -1 : 0;
        Py_XDECREF(done);
    }
    Py_DECREF(found);
    return rc;
}

/* _merge_relationship: one per (s, type, o, LINK predicate), both ends existing; graph set. */
static int
merge_relationship(PyObject *nodes, PyObject *rels, PyObject *adjacent, Py_ssize_t t, PyObject *s, PyObject *rel)
{
    PyObject *o = item(rel, s_o), *predicate = NULL, *key = NULL, *props, *graph;
    int rc = -1, there;
    if (o == NULL)
        return -1;
    if ((there = PyDict_Contains(nodes, s)) > 0)
        there = PyDict_Contains(nodes, o);
    if (there <= 0) {  /* MATCH finds nothing: the statement writes nothing */
        rc = there;
        goto done;
    }
    if ((predicate = rel_is_link[t] ? map_get(rel, s_predicate) : Py_NewRef(Py_None)) == NULL
        || (key = PyTuple_Pack(4, s, rel_types[t], o, predicate)) == NULL)
        goto done;
    props = PyDict_GetItemWithError(rels, key);
    if (props == NULL && PyErr_Occurred())
        goto done;
    if (props == NULL || props == Py_None) {
        props = PyDict_New();
        int failed = props == NULL || (predicate != Py_None && PyDict_SetItem(props, s_predicate, predicate) < 0)
            || PyDict_SetItem(rels, key, props) < 0;
        if (failed || (adjacent != Py_None && (adjoin(adjacent, s, key) < 0 || adjoin(adjacent, o, key) < 0))) {
            Py_XDECREF(props);
            goto done;
        }
    } else {
        Py_INCREF(props);
    }
    graph = item(rel, s_graph);
    rc = graph == NULL ? -1 : map_set(props, s_graph, graph);
    Py_XDECREF(graph);
    Py_DECREF(props);
done:
    Py_DECREF(o);
    Py_XDECREF(predicate);
    Py_XDECREF(key);
    return rc;
}

/* Every relationship a row starts, type by type in RELATIONSHIP_TYPES order. */
static int
write_relationships(PyObject *nodes, PyObject *rels, PyObject *adjacent, PyObject **row)
{
    for (Py_ssize_t t = 0; t < nrels; t++) {
        PyObject *found = row[R_RELS + t];
        if (is_none(found))
            continue;
        /* a list, iterated as its iterator does: to its length at each step */
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(found); i++) {
            PyObject *rel = Py_NewRef(PyList_GET_ITEM(found, i));
            int rc = merge_relationship(nodes, rels, adjacent, t, row[R_IRI], rel);
            Py_DECREF(rel);
            if (rc < 0)
                return -1;
        }
    }
    return 0;
}

/* -- the module ---------------------------------------------------------------------------- */

PyDoc_STRVAR(write_doc,
"write(nodes, rels, adjacent, rows, /)\n--\n\n"
"Apply the sink's write rows to an image's dicts as image.py's ``_write_py`` does.\n\n"
"Every row's node first (``MERGE``, ``ON CREATE`` / ``ON MATCH``, ``SET``, the status and\n"
"lineage guards), then every row's relationships, in the order of the rows.\n\n"
"Parameters:\n"
"    nodes: the image's ``dict`` of IRI -> ImageNode (new nodes are added).\n"
"    rels: its ``dict`` of (start, type, end, predicate) -> relationship properties.\n"
"    adjacent: its ``dict`` of IRI -> set of relationship keys (new ones added), or None.\n"
"    rows: a ``list`` of the ``dict`` rows ``rows.batch_rows`` gives.\n\n"
"Returns:\n"
"    None.\n\n"
"Raises:\n"
"    Unsupported, with nothing changed, for input of another form than those rows\n"
"    (the caller then applies the rows in Python); otherwise what Python raises for\n"
"    the same values.\n\n"
"Example::\n\n"
"    >>> from provstream.connectors.neo4j.image import GraphImage\n"
"    >>> image = GraphImage()\n"
"    >>> write(image._nodes, image._rels, None, [{\"iri\": \"urn:a\", \"props\": {\"n\": 1}, \"labels\": []}])\n"
"    >>> next(image.nodes()).props\n"
"    {'iri': 'urn:a', 'n': 1}\n");

static PyObject *
image_write(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 4)
        return PyErr_Format(PyExc_TypeError, "write() takes 4 arguments (%zd given)", nargs);
    if (!configured)
        return PyErr_SetString(Unsupported, "configure() has not been called"), NULL;
    PyObject *nodes = args[0], *rels = args[1], *adjacent = args[2], *rows = args[3];
    if (!PyDict_CheckExact(nodes) || !PyDict_CheckExact(rels) || (adjacent != Py_None && !PyDict_CheckExact(adjacent))
        || !PyList_CheckExact(rows))
        return PyErr_SetString(Unsupported, "expected (dict, dict, dict or None, list)"), NULL;
    /* the rows as they are now, noted; nothing has changed when this fails */
    Py_ssize_t n = PyList_GET_SIZE(rows);
    if (n == 0)
        Py_RETURN_NONE;
    PyObject **noted = PyMem_Calloc((size_t)n * R_SIZE, sizeof(PyObject *));
    if (noted == NULL)
        return PyErr_NoMemory();
    PyObject *result = NULL;
    Py_ssize_t i;
    for (i = 0; i < n; i++) {
        if (i >= PyList_GET_SIZE(rows)) {  /* a key's __eq__ emptied it */
            PyErr_SetString(Unsupported, "the rows changed");
            goto done;
        }
        PyObject *row = Py_NewRef(PyList_GET_ITEM(rows, i));
        int rc = note_row(row, noted + i * R_SIZE);
        Py_DECREF(row);
        if (rc < 0)
            goto done;
    }
    for (i = 0; i < n; i++)
        if (write_node(nodes, noted + i * R_SIZE) < 0)
            goto done;
    for (i = 0; i < n; i++)
        if (write_relationships(nodes, rels, adjacent, noted + i * R_SIZE) < 0)
            goto done;
    result = Py_NewRef(Py_None);
done:
    for (i = 0; i < n * R_SIZE; i++)
        Py_XDECREF(noted[i]);
    PyMem_Free(noted);
    return result;
}

PyDoc_STRVAR(configure_doc,
"configure(settings, /)\n--\n\n"
"Hand over what image.py defines (a dict; image.py passes it once, at import).\n\n"
"Parameters:\n"
"    settings: ImageNode and Moment (dataclasses without ``__new__``, made as their\n"
"    ``__init__`` makes them), RESOURCE and LINK (str), RELATIONSHIP_TYPES (a tuple of\n"
"    at most 8 str), STATUS_PROPS (5 str, one of them ``steps``), LINEAGE_PROPS (4 str)\n"
"    and APPENDED (3 pairs of str: the row's key, the node's property).\n\n"
"Returns:\n"
"    None.\n\n"
"Raises:\n"
"    TypeError or KeyError if one is missing or of another kind; write() then stays unusable.\n\n"
"Example::\n\n"
"    >>> from provstream.connectors.neo4j import image\n"
"    >>> configure(image._settings())\n");

static int
str_tuple(PyObject *value, Py_ssize_t min, Py_ssize_t max, PyObject **out)
{
    if (!PyTuple_CheckExact(value) || PyTuple_GET_SIZE(value) < min || PyTuple_GET_SIZE(value) > max)
        return 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(value); i++) {
        PyObject *s = PyTuple_GET_ITEM(value, i);
        if (!PyUnicode_CheckExact(s))
            return 0;
        Py_XSETREF(out[i], Py_NewRef(s));
    }
    return 1;
}

static PyObject *
setting(PyObject *settings, const char *name)
{
    PyObject *value = PyDict_GetItemString(settings, name);
    if (value == NULL)
        PyErr_Format(PyExc_KeyError, "configure() needs %s", name);
    return value;
}

static int
plain_class(PyObject *cls)
{
    return PyType_Check(cls) && ((PyTypeObject *)cls)->tp_new == PyBaseObject_Type.tp_new;
}

/* Whether the row keys write() looks up are all different (note_row counts them to skip the
 * relationship types' look-ups in a row without other keys): 1, 0, or -1 on error. */
static int
distinct_keys(void)
{
    PyObject *seen = PySet_New(NULL);
    if (seen == NULL)
        return -1;
    PyObject *fixed[] = {s_iri, s_props, s_labels, s_graph, s_started, s_steps, s_lineage};
    Py_ssize_t count = 0;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < sizeof(fixed) / sizeof(fixed[0]); i++, count++)
        rc = PySet_Add(seen, fixed[i]);
    for (int i = 0; rc == 0 && i < NAPPENDED; i++, count++)
        rc = PySet_Add(seen, appended_keys[i]);
    for (int i = 0; rc == 0 && i < NSTATUS; i++)
        if (status_names[i] != s_steps) {
            rc = PySet_Add(seen, status_names[i]);
            count++;
        }
    for (Py_ssize_t i = 0; rc == 0 && i < nrels; i++, count++)
        rc = PySet_Add(seen, rel_types[i]);
    rc = rc < 0 ? -1 : PySet_GET_SIZE(seen) == count;
    Py_DECREF(seen);
    return rc;
}

static PyObject *
configure(PyObject *module, PyObject *settings)
{
    (void)module;
    PyObject *node, *moment, *resource, *link, *types, *status, *lineage, *appended;
    if (!PyDict_Check(settings))
        return PyErr_Format(PyExc_TypeError, "configure() needs a dict");
    configured = 0;
    if ((node = setting(settings, "ImageNode")) == NULL || (moment = setting(settings, "Moment")) == NULL
        || (resource = setting(settings, "RESOURCE")) == NULL || (link = setting(settings, "LINK")) == NULL
        || (types = setting(settings, "RELATIONSHIP_TYPES")) == NULL
        || (status = setting(settings, "STATUS_PROPS")) == NULL
        || (lineage = setting(settings, "LINEAGE_PROPS")) == NULL
        || (appended = setting(settings, "APPENDED")) == NULL)
        return NULL;
    if (!plain_class(node) || !plain_class(moment))
        return PyErr_Format(PyExc_TypeError, "configure(): ImageNode and Moment must be classes made by object.__new__");
    if (!PyUnicode_CheckExact(resource) || !PyUnicode_CheckExact(link))
        return PyErr_Format(PyExc_TypeError, "configure(): RESOURCE and LINK must be str");
    if (!str_tuple(types, 0, NRELS, rel_types) || !str_tuple(status, NSTATUS, NSTATUS, status_names)
        || !str_tuple(lineage, NLINEAGE, NLINEAGE, lineage_names))
        return PyErr_Format(PyExc_TypeError, "configure(): RELATIONSHIP_TYPES, STATUS_PROPS or LINEAGE_PROPS");
    if (!PyTuple_CheckExact(appended) || PyTuple_GET_SIZE(appended) != NAPPENDED)
        return PyErr_Format(PyExc_TypeError, "configure(): APPENDED must be 3 pairs");
    for (int i = 0; i < NAPPENDED; i++) {
        PyObject *pair[2] = {NULL, NULL};
        if (!str_tuple(PyTuple_GET_ITEM(appended, i), 2, 2, pair)) {
            Py_XDECREF(pair[0]);
            Py_XDECREF(pair[1]);
            return PyErr_Format(PyExc_TypeError, "configure(): APPENDED must be 3 pairs of str");
        }
        Py_XSETREF(appended_keys[i], pair[0]);
        Py_XSETREF(appended_names[i], pair[1]);
    }
    /* status_names holds "steps" (the row's steps) as the interned s_steps, compared by identity */
    int steps = 0;
    for (int i = 0; i < NSTATUS; i++) {
        if (PyUnicode_Compare(status_names[i], s_steps) == 0) {
            Py_SETREF(status_names[i], Py_NewRef(s_steps));
            steps++;
        }
    }
    if (steps != 1)
        return PyErr_Format(PyExc_TypeError, "configure(): STATUS_PROPS must hold steps once");
    nrels = PyTuple_GET_SIZE(types);
    for (Py_ssize_t i = 0; i < nrels; i++)
        rel_is_link[i] = PyUnicode_Compare(rel_types[i], link) == 0;
    if (distinct_keys() <= 0)
        return PyErr_Occurred() ? NULL : PyErr_Format(PyExc_TypeError, "configure(): a row key named twice");
    Py_XSETREF(node_type, (PyTypeObject *)Py_NewRef(node));
    Py_XSETREF(moment_type, (PyTypeObject *)Py_NewRef(moment));
    Py_XSETREF(resource_label, Py_NewRef(resource));
    Py_XSETREF(link_type, Py_NewRef(link));
    configured = 1;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"write", (PyCFunction)(void (*)(void))image_write, METH_FASTCALL, write_doc},
    {"configure", (PyCFunction)configure, METH_O, configure_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "provstream.connectors.neo4j._image_c",
    "GraphImage.write in C: the sink's write rows applied to the in-memory image as image.py applies them.",
    -1,
    methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__image_c(void)
{
    PyObject *module = PyModule_Create(&module_def);
    if (module == NULL)
        return NULL;
    if (intern_names() < 0
        || (Unsupported = PyErr_NewExceptionWithDoc("provstream.connectors.neo4j._image_c.Unsupported",
                                                    "Rows the C write does not take: apply them in Python.",
                                                    NULL, NULL)) == NULL
        || PyModule_AddObjectRef(module, "Unsupported", Unsupported) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
