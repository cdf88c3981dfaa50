/*
 * provstream.connectors.neo4j._rows_c: the sink's write rows in C.
 *
 * write_rows(batch, lineage) returns what rows.py computes as
 * ``write_rows(build_rows(batch), lineage)``, with the number of rows
 * ``build_rows`` makes, in one pass and without the intermediate row groups:
 * the same rows, in the same order, with the same keys in the same order.
 *
 * It takes only the exact classes of provstream.core.triples (read from their
 * slots, as _avro_c.h checks at import) and the common case; on anything else
 * (a quoted triple the model cannot hold, a look-alike value, an unknown
 * term) it raises Unsupported and rows.py builds the rows in Python, which
 * gives the same rows or the StoreError. The rare literal forms (typed
 * values, extra literals) call the Python functions of rows.py and model.py
 * that configure() hands over, so there is one definition of each. The
 * Browser caption is model.caption in C for exact str and int values, and
 * calls it for anything else.
 *
 * write_rows_at(batch, origins) is write_rows with the lineage rows of
 * rows.lineage_rows worked out from each message's (event, triples) origin,
 * without making them.
 */

#include "_avro_c.h"

/* -- the classes ------------------------------------------------------------ */

TRIPLES_CLASSES
#define NCLASSES ((Py_ssize_t)(sizeof(CLASSES) / sizeof(CLASSES[0])))

enum { F_SESSION = 1, F_MECHANISM = 2, F_USER = 4, F_COLLECTION = 5, F_QUESTION = 6, F_TRIPLES = 7,
       F_STATUS = 8, F_GRAPH = 10 };

static PyObject *Unsupported;      /* the exception that sends a batch to the Python path */

/* -- what configure() hands over --------------------------------------------- */

typedef struct {
    const char *name;
    PyObject **slot;
    int kind;                      /* 0 dict, 1 str, 2 callable, 3 tuple of str, 4 int >= 1 */
} Setting;

static PyObject *labels_of, *string_props, *integer_props, *datetime_props, *list_props, *rel_types;
static PyObject *mechanism_values, *state_words;
static PyObject *link_type, *rdf_type, *tg_edge, *xsd_integer, *xsd_datetime, *retrieval_graph, *caption_prop;
static PyObject *datetime_names, *shared_props_tuple, *shared_props;
static PyObject *parse_integer, *parse_datetime, *extra_literal, *caption, *caption_width_obj;

static const Setting SETTINGS[] = {
    {"LABELS", &labels_of, 0}, {"STRING_PROPS", &string_props, 0}, {"INTEGER_PROPS", &integer_props, 0},
    {"DATETIME_PROPS", &datetime_props, 0}, {"LIST_PROPS", &list_props, 0}, {"REL_TYPES", &rel_types, 0},
    {"MECHANISM_VALUES", &mechanism_values, 0}, {"STATE_WORDS", &state_words, 0},
    {"LINK", &link_type, 1}, {"RDF_TYPE", &rdf_type, 1}, {"TG_EDGE", &tg_edge, 1},
    {"XSD_INTEGER", &xsd_integer, 1}, {"XSD_DATETIME", &xsd_datetime, 1}, {"GRAPH", &retrieval_graph, 1},
    {"CAPTION_PROP", &caption_prop, 1}, {"DATETIME_NAMES", &datetime_names, 3},
    {"SHARED_PROPS", &shared_props_tuple, 3},
    {"parse_integer", &parse_integer, 2}, {"parse_datetime", &parse_datetime, 2},
    {"extra_literal", &extra_literal, 2}, {"caption", &caption, 2}, {"CAPTION_WIDTH", &caption_width_obj, 4},
};
#define NSETTINGS ((Py_ssize_t)(sizeof(SETTINGS) / sizeof(SETTINGS[0])))

static int configured = 0;

/* The keys of the rows, interned once. */
static PyObject *k_iri, *k_props, *k_labels, *k_types, *k_chunks, *k_extra, *k_graph, *k_user, *k_collection,
    *k_session, *k_mechanism, *k_status, *k_steps, *k_expected, *k_late, *k_missing, *k_lineage, *k_o,
    *k_predicate, *k_edge_subject, *k_edge_predicate, *k_edge_object, *k_edge_kind, *k_edge_datatype,
    *k_edge_language, *v_iri_kind, *v_literal_kind, *k_event_partition, *k_event_offset, *k_triples_partition,
    *k_triples_offset;
static PyObject *lineage_fields[4];

static int
intern_keys(void)
{
    struct { PyObject **slot; const char *text; } keys[] = {
        {&k_iri, "iri"}, {&k_props, "props"}, {&k_labels, "labels"}, {&k_types, "types"}, {&k_chunks, "chunks"},
        {&k_extra, "extra"}, {&k_graph, "graph"}, {&k_user, "user"}, {&k_collection, "collection"},
        {&k_session, "session"}, {&k_mechanism, "mechanism"}, {&k_status, "status"}, {&k_steps, "steps"},
        {&k_expected, "expectedSteps"}, {&k_late, "lateSteps"}, {&k_missing, "missingSteps"},
        {&k_lineage, "lineage"}, {&k_o, "o"}, {&k_predicate, "predicate"}, {&k_edge_subject, "edgeSubject"},
        {&k_edge_predicate, "edgePredicate"}, {&k_edge_object, "edgeObject"}, {&k_edge_kind, "edgeObjectKind"},
        {&k_edge_datatype, "edgeObjectDatatype"}, {&k_edge_language, "edgeObjectLanguage"},
        {&v_iri_kind, "IRI"}, {&v_literal_kind, "LITERAL"}, {&k_event_partition, "eventPartition"},
        {&k_event_offset, "eventOffset"}, {&k_triples_partition, "triplesPartition"},
        {&k_triples_offset, "triplesOffset"},
    };
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        if ((*keys[i].slot = PyUnicode_InternFromString(keys[i].text)) == NULL)
            return -1;
    lineage_fields[0] = k_event_partition;
    lineage_fields[1] = k_event_offset;
    lineage_fields[2] = k_triples_partition;
    lineage_fields[3] = k_triples_offset;
    return 0;
}

/* -- small helpers ------------------------------------------------------------ */

static inline int
bail(const char *why)
{
    PyErr_SetString(Unsupported, why);
    return -1;
}

/* a == b for two str (1 / 0), -1 with Unsupported if either is not exactly a str. */
static inline int
str_eq(PyObject *a, PyObject *b)
{
    if (a == b)
        return 1;
    if (!PyUnicode_CheckExact(a) || !PyUnicode_CheckExact(b))
        return bail("not a str");
    return PyUnicode_Compare(a, b) == 0;
}

/* A field of an exact instance (borrowed); NULL with Unsupported for any other value. */
static inline PyObject *
get(PyObject *obj, Cls *c, Py_ssize_t i)
{
    PyObject *value;
    if (!Py_IS_TYPE(obj, c->type)) {
        bail("not a value of provstream.core.triples");
        return NULL;
    }
    value = *(PyObject **)((char *)obj + c->offsets[i]);
    if (value == NULL)
        bail("an unset field");
    return value;
}

/* The value of an Iri that is exactly a str (borrowed), or NULL with Unsupported. */
static inline PyObject *
iri_value(PyObject *iri)
{
    PyObject *value = get(iri, &IRI, 0);
    if (value != NULL && !PyUnicode_CheckExact(value)) {
        bail("an IRI that is not a str");
        return NULL;
    }
    return value;
}

/* The items of an exact tuple or list (borrowed; NULL for an empty list): 0, or -1 with Unsupported. */
static inline int
items_of(PyObject *seq, PyObject ***items, Py_ssize_t *n)
{
    if (PyTuple_CheckExact(seq)) {
        *n = PyTuple_GET_SIZE(seq);
        *items = ((PyTupleObject *)seq)->ob_item;
        return 0;
    }
    if (PyList_CheckExact(seq)) {
        *n = PyList_GET_SIZE(seq);
        *items = ((PyListObject *)seq)->ob_item;
        return 0;
    }
    return bail("not a tuple or list");
}

/* d[key] = value, stealing value (NULL: an error is set). */
static inline int
set_steal(PyObject *d, PyObject *key, PyObject *value)
{
    if (value == NULL)
        return -1;
    int rc = PyDict_SetItem(d, key, value);
    Py_DECREF(value);
    return rc;
}

/* -- one subject's triples ------------------------------------------------------ */

typedef struct {
    PyObject *iri;                 /* str */
    PyObject *msg;                 /* the first message with a triple about it: its scope */
    PyObject *types;               /* dict: type IRI -> None, in order */
    PyObject *props;               /* dict */
    PyObject *chunks;              /* dict or NULL */
    PyObject *extra;               /* dict or NULL */
    PyObject *edge;                /* QuotedTriple or NULL */
} Node;

typedef struct {
    Node *items;
    Py_ssize_t len, cap;
} Nodes;

static void
nodes_clear(Nodes *ns)
{
    for (Py_ssize_t i = 0; i < ns->len; i++) {
        Node *n = &ns->items[i];
        Py_XDECREF(n->iri);
        Py_XDECREF(n->msg);
        Py_XDECREF(n->types);
        Py_XDECREF(n->props);
        Py_XDECREF(n->chunks);
        Py_XDECREF(n->extra);
        Py_XDECREF(n->edge);
    }
    PyMem_Free(ns->items);
    ns->items = NULL;
    ns->len = ns->cap = 0;
}

/* The node of iri (index via the dict), made with msg's scope if new; NULL on error. */
static Node *
node_of(Nodes *ns, PyObject *index, PyObject *iri, PyObject *msg)
{
    PyObject *found = PyDict_GetItemWithError(index, iri);
    if (found != NULL)
        return &ns->items[PyLong_AsSsize_t(found)];
    if (PyErr_Occurred())
        return NULL;
    if (ns->len == ns->cap) {
        Py_ssize_t cap = ns->cap ? ns->cap * 2 : 64;
        Node *grown = PyMem_Realloc(ns->items, (size_t)cap * sizeof(Node));
        if (grown == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
        ns->items = grown;
        ns->cap = cap;
    }
    Node *n = &ns->items[ns->len];
    *n = (Node){Py_NewRef(iri), Py_NewRef(msg), PyDict_New(), PyDict_New(), NULL, NULL, NULL};
    ns->len++;
    if (n->types == NULL || n->props == NULL || set_steal(index, iri, PyLong_FromSsize_t(ns->len - 1)) < 0)
        return NULL;
    return n;
}

/* dict *slot (made on first use)[key] = None. */
static inline int
add_to(PyObject **slot, PyObject *key)
{
    if (*slot == NULL && (*slot = PyDict_New()) == NULL)
        return -1;
    return PyDict_SetItem(*slot, key, Py_None);
}

/* rows._add_literal for a plain, canonical integer or canonical datetime literal; the rest via extra_literal. */
static int
add_literal(Node *n, PyObject *p, PyObject *lit)
{
    PyObject *value, *datatype, *language, *name = NULL, *typed = NULL;
    if ((value = get(lit, &LITERAL, 0)) == NULL || (datatype = get(lit, &LITERAL, 1)) == NULL
        || (language = get(lit, &LITERAL, 2)) == NULL)
        return -1;
    if (!PyUnicode_CheckExact(value))
        return bail("a literal value that is not a str");
    if (language == Py_None) {
        if (datatype == Py_None) {
            if ((name = PyDict_GetItemWithError(string_props, p)) == NULL) {
                if (PyErr_Occurred())
                    return -1;
                int listed = PyDict_Contains(list_props, p);
                if (listed < 0)
                    return -1;
                if (listed)
                    return add_to(&n->chunks, value);
            }
            else
                typed = Py_NewRef(value);
        }
        else {
            int integer = str_eq(datatype, xsd_integer), moment = 0;
            if (integer < 0)
                return -1;
            if (!integer && (moment = str_eq(datatype, xsd_datetime)) < 0)
                return -1;
            if (integer || moment) {
                name = PyDict_GetItemWithError(integer ? integer_props : datetime_props, p);
                if (name == NULL && PyErr_Occurred())
                    return -1;
                if (name != NULL) {
                    PyObject *parsed = PyObject_CallOneArg(integer ? parse_integer : parse_datetime, value);
                    if (parsed == NULL)
                        return -1;
                    if (parsed != Py_None)
                        typed = integer ? Py_NewRef(parsed) : Py_NewRef(value);
                    Py_DECREF(parsed);
                }
            }
        }
        if (typed != NULL) {
            PyObject *kept = PyDict_SetDefault(n->props, name, typed);  /* borrowed */
            int same = kept == NULL ? -1 : PyObject_RichCompareBool(kept, typed, Py_EQ);
            Py_DECREF(typed);
            if (same != 0)
                return same < 0 ? -1 : 0;
        }
    }
    PyObject *args[2] = {p, lit};
    PyObject *text = PyObject_Vectorcall(extra_literal, args, 2, NULL);
    if (text == NULL)
        return -1;
    int rc = add_to(&n->extra, text);
    Py_DECREF(text);
    return rc;
}

/* rels[rel_type][(s, p, o)] = {"o": o, "graph": graph[, "predicate": p]}: the first key's place, the last graph. */
static int
add_relationship(PyObject *rels, PyObject *s, PyObject *p, PyObject *o, PyObject *graph)
{
    PyObject *rel_type = PyDict_GetItemWithError(rel_types, p), *group, *key, *item;
    int link = 0, rc = -1;
    if (rel_type == NULL) {
        if (PyErr_Occurred())
            return -1;
        rel_type = link_type;
        link = 1;
    }
    if ((group = PyDict_GetItemWithError(rels, rel_type)) == NULL) {
        if (PyErr_Occurred() || set_steal(rels, rel_type, PyDict_New()) < 0)
            return -1;
        group = PyDict_GetItem(rels, rel_type);
    }
    if ((key = PyTuple_Pack(3, s, p, o)) == NULL)
        return -1;
    if ((item = PyDict_GetItemWithError(group, key)) != NULL)
        rc = PyDict_SetItem(item, k_graph, graph);  /* the same s, p, o again: the last graph, as a new row would */
    else if (!PyErr_Occurred() && (item = PyDict_New()) != NULL) {
        if (PyDict_SetItem(item, k_o, o) == 0 && PyDict_SetItem(item, k_graph, graph) == 0
            && (!link || PyDict_SetItem(item, k_predicate, p) == 0))
            rc = PyDict_SetItem(group, key, item);
        Py_DECREF(item);
    }
    Py_DECREF(key);
    return rc;
}

static int
add_triple(Nodes *ns, PyObject *index, PyObject *rels, PyObject *msg, PyObject *graph, PyObject *t)
{
    PyObject *s, *p, *o;
    Node *n;
    if ((s = get(t, &TRIPLE, 0)) == NULL || (p = get(t, &TRIPLE, 1)) == NULL || (o = get(t, &TRIPLE, 2)) == NULL
        || (s = iri_value(s)) == NULL || (p = iri_value(p)) == NULL || (n = node_of(ns, index, s, msg)) == NULL)
        return -1;
    if (Py_IS_TYPE(o, IRI.type)) {
        PyObject *value = iri_value(o);
        int is_type;
        if (value == NULL || (is_type = str_eq(p, rdf_type)) < 0)
            return -1;
        if (is_type)
            return PyDict_SetItem(n->types, value, Py_None);
        return add_relationship(rels, s, p, value, graph);
    }
    if (Py_IS_TYPE(o, LITERAL.type))
        return add_literal(n, p, o);
    if (Py_IS_TYPE(o, QUOTED.type)) {
        int edge = str_eq(p, tg_edge), same;
        if (edge <= 0)
            return edge < 0 ? -1 : bail("a quoted triple under a predicate other than tg:edge");
        if (n->edge != NULL) {
            if ((same = PyObject_RichCompareBool(n->edge, o, Py_EQ)) <= 0)
                return same < 0 ? -1 : bail("two different quoted triples on one node");
            return 0;
        }
        n->edge = Py_NewRef(o);
        return 0;
    }
    return bail("an unknown term");
}

/* -- the rows ------------------------------------------------------------------ */

/* scope_of(msg) into d (in its order: graph, user, collection, session, mechanism). */
static int
put_scope(PyObject *d, PyObject *msg)
{
    PyObject *graph, *user, *collection, *session, *member, *mechanism;
    if ((graph = get(msg, &STEP, F_GRAPH)) == NULL || (user = get(msg, &STEP, F_USER)) == NULL
        || (collection = get(msg, &STEP, F_COLLECTION)) == NULL || (session = get(msg, &STEP, F_SESSION)) == NULL
        || (member = get(msg, &STEP, F_MECHANISM)) == NULL)
        return -1;
    if ((mechanism = PyDict_GetItemWithError(mechanism_values, member)) == NULL)
        return PyErr_Occurred() ? -1 : bail("an unknown mechanism");
    if (PyDict_SetItem(d, k_graph, graph) < 0 || PyDict_SetItem(d, k_user, user) < 0
        || PyDict_SetItem(d, k_collection, collection) < 0 || PyDict_SetItem(d, k_session, session) < 0)
        return -1;
    return PyDict_SetItem(d, k_mechanism, mechanism);
}

/* The number of steps of msg's status (borrowed), or NULL. */
static inline PyObject *
steps_of(PyObject *msg)
{
    PyObject *status = get(msg, &STEP, F_STATUS);
    return status == NULL ? NULL : get(status, &STATUS, 1);
}

/* The edge's properties, as rows._edge_props. */
static int
put_edge(PyObject *props, PyObject *q)
{
    PyObject *s, *p, *o, *ov;
    if ((s = get(q, &QUOTED, 0)) == NULL || (p = get(q, &QUOTED, 1)) == NULL || (o = get(q, &QUOTED, 2)) == NULL
        || (s = get(s, &IRI, 0)) == NULL || (p = get(p, &IRI, 0)) == NULL)
        return -1;
    int literal = Py_IS_TYPE(o, LITERAL.type);
    if (!literal && !Py_IS_TYPE(o, IRI.type))
        return bail("an unknown quoted object");
    if ((ov = get(o, literal ? &LITERAL : &IRI, 0)) == NULL)
        return -1;
    if (PyDict_SetItem(props, k_edge_subject, s) < 0 || PyDict_SetItem(props, k_edge_predicate, p) < 0
        || PyDict_SetItem(props, k_edge_object, ov) < 0
        || PyDict_SetItem(props, k_edge_kind, literal ? v_literal_kind : v_iri_kind) < 0)
        return -1;
    if (literal) {
        PyObject *datatype = get(o, &LITERAL, 1), *language = get(o, &LITERAL, 2);
        if (datatype == NULL || language == NULL)
            return -1;
        if (datatype != Py_None && PyDict_SetItem(props, k_edge_datatype, datatype) < 0)
            return -1;
        if (language != Py_None && PyDict_SetItem(props, k_edge_language, language) < 0)
            return -1;
    }
    return 0;
}

/* The keys of dict d, sorted (a new list, or NULL); d's reference is stolen. */
static PyObject *
sorted_keys(PyObject *d)
{
    PyObject *out = PyDict_Keys(d);
    Py_DECREF(d);
    if (out != NULL && PyList_Sort(out) < 0)
        Py_CLEAR(out);
    return out;
}

/* The sorted labels of a node's types (rows._Node.row). */
static PyObject *
labels_for(PyObject *types)
{
    PyObject *seen = PyDict_New(), *key, *value;
    Py_ssize_t pos = 0;
    if (seen == NULL)
        return NULL;
    while (PyDict_Next(types, &pos, &key, &value)) {
        PyObject *label = PyDict_GetItemWithError(labels_of, key);
        if (label == NULL && PyErr_Occurred()) {
            Py_DECREF(seen);
            return NULL;
        }
        if (label != NULL && PyDict_SetItem(seen, label, Py_None) < 0) {
            Py_DECREF(seen);
            return NULL;
        }
    }
    return sorted_keys(seen);
}

/* -- the Browser caption (model.caption) ------------------------------------------ */

static PyObject *l_question, *l_analysis, *l_conclusion, *l_exploration, *l_focus, *l_synthesis;
static PyObject *c_query, *c_action, *c_answer, *c_chunk_count, *c_edge_count, *c_content;
static PyObject *w_question, *w_think, *w_answer, *w_exploration, *w_focus, *w_synthesis, *w_edge, *w_chunks,
    *w_edges, *w_ellipsis, *w_dot;
static Py_ssize_t caption_width;

static int
intern_caption_words(void)
{
    struct { PyObject **slot; const char *text; } words[] = {
        {&l_question, "Question"}, {&l_analysis, "Analysis"}, {&l_conclusion, "Conclusion"},
        {&l_exploration, "Exploration"}, {&l_focus, "Focus"}, {&l_synthesis, "Synthesis"},
        {&c_query, "query"}, {&c_action, "action"}, {&c_answer, "answer"}, {&c_chunk_count, "chunkCount"},
        {&c_edge_count, "edgeCount"}, {&c_content, "content"},
        {&w_question, "question"}, {&w_think, "think"}, {&w_answer, "answer: "}, {&w_exploration, "exploration"},
        {&w_focus, "focus"}, {&w_synthesis, "synthesis: "}, {&w_edge, "edge \xc2\xb7 "}, {&w_chunks, "chunks"},
        {&w_edges, "edges"}, {&w_ellipsis, "\xe2\x80\xa6"}, {&w_dot, " \xc2\xb7 "},
    };
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
        if ((*words[i].slot = PyUnicode_FromString(words[i].text)) == NULL)
            return -1;
    return 0;
}

/* text(name) of model.caption: props[name] if an exact str (a new reference), "" if absent or not a str;
 * NULL with *odd = 1 for a str subclass (the Python caption then decides). */
static PyObject *
caption_text(PyObject *props, PyObject *name, int *odd)
{
    PyObject *value = PyDict_GetItemWithError(props, name);
    if (value == NULL)
        return PyErr_Occurred() ? NULL : PyUnicode_FromStringAndSize("", 0);
    if (PyUnicode_CheckExact(value))
        return Py_NewRef(value);
    if (PyUnicode_Check(value)) {
        *odd = 1;
        return NULL;
    }
    return PyUnicode_FromStringAndSize("", 0);
}

/* The part of s after the last of the characters in stops (all of s if none): str.rsplit / vocab.local_name. */
static PyObject *
after_last(PyObject *s, const char *stops)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(s), i = n;
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    while (i > 0) {
        Py_UCS4 ch = PyUnicode_READ(kind, data, i - 1);
        if (ch < 128 && ch != 0 && strchr(stops, (int)ch) != NULL)
            break;
        i--;
    }
    return PyUnicode_Substring(s, i, n);
}

/* " ".join(out.split()), cut to caption_width characters with an ellipsis; out's reference is stolen. */
static PyObject *
flatten(PyObject *out)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(out), len = 0, i;
    int kind = PyUnicode_KIND(out), space = 1, clean = 1;
    const void *data = PyUnicode_DATA(out);
    for (i = 0; i < n && clean; i++) {
        Py_UCS4 ch = PyUnicode_READ(kind, data, i);
        if (Py_UNICODE_ISSPACE(ch))
            clean = !space && ch == ' ' && i + 1 < n && !Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, i + 1));
        space = Py_UNICODE_ISSPACE(ch);
    }
    if (!clean) {
        Py_UCS4 *buf = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(Py_UCS4));
        if (buf == NULL) {
            Py_DECREF(out);
            return PyErr_NoMemory();
        }
        space = 1;
        for (i = 0; i < n; i++) {
            Py_UCS4 ch = PyUnicode_READ(kind, data, i);
            if (Py_UNICODE_ISSPACE(ch))
                space = 1;
            else {
                if (space && len)
                    buf[len++] = ' ';
                buf[len++] = ch;
                space = 0;
            }
        }
        Py_DECREF(out);
        out = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, buf, len);
        PyMem_Free(buf);
        if (out == NULL)
            return NULL;
    }
    if (PyUnicode_GET_LENGTH(out) <= caption_width)
        return out;
    PyObject *head = PyUnicode_Substring(out, 0, caption_width - 1), *cut = NULL;
    Py_DECREF(out);
    if (head != NULL) {
        cut = PyUnicode_Concat(head, w_ellipsis);
        Py_DECREF(head);
    }
    return cut;
}

/* a + b for two new references (both stolen), NULL if either is. */
static PyObject *
concat_steal(PyObject *a, PyObject *b)
{
    PyObject *out = a != NULL && b != NULL ? PyUnicode_Concat(a, b) : NULL;
    Py_XDECREF(a);
    Py_XDECREF(b);
    return out;
}

/* model.caption(labels, props, iri) for exact str, int and None values; the Python function for the rest. */
static PyObject *
caption_of(PyObject *labels, PyObject *props, PyObject *iri)
{
    PyObject *out = NULL, *found[6] = {l_question, l_analysis, l_conclusion, l_exploration, l_focus, l_synthesis};
    int which = -1, odd = !PyList_CheckExact(labels) || !PyDict_CheckExact(props) || !PyUnicode_CheckExact(iri);
    for (int i = 0; !odd && i < 6 && which < 0; i++) {
        int in = PySequence_Contains(labels, found[i]);
        if (in < 0)
            return NULL;
        if (in)
            which = i;
    }
    switch (odd ? -2 : which) {
    case 0:
        out = caption_text(props, c_query, &odd);
        if (out != NULL && PyUnicode_GET_LENGTH(out) == 0)
            Py_SETREF(out, Py_NewRef(w_question));
        break;
    case 1: {
        PyObject *action = caption_text(props, c_action, &odd), *last = after_last(iri, "/");
        if (action != NULL && last != NULL)
            out = PyUnicode_FromFormat("%U%U%U", last, w_dot, PyUnicode_GET_LENGTH(action) ? action : w_think);
        Py_XDECREF(action);
        Py_XDECREF(last);
        break;
    }
    case 2:
        out = concat_steal(Py_NewRef(w_answer), caption_text(props, c_answer, &odd));
        break;
    case 3: {
        int chunks = PyDict_Contains(props, c_chunk_count);
        if (chunks < 0)
            return NULL;
        PyObject *count = PyDict_GetItemWithError(props, chunks ? c_chunk_count : c_edge_count);
        if (count == NULL && PyErr_Occurred())
            return NULL;
        if (count == NULL || count == Py_None)
            out = Py_NewRef(w_exploration);
        else if (PyLong_CheckExact(count) || PyUnicode_CheckExact(count))
            out = PyUnicode_FromFormat("%U%U%S %U", w_exploration, w_dot, count, chunks ? w_chunks : w_edges);
        else
            odd = 1;
        break;
    }
    case 4:
        out = Py_NewRef(w_focus);
        break;
    case 5:
        out = concat_steal(Py_NewRef(w_synthesis), caption_text(props, c_content, &odd));
        break;
    case -1: {
        PyObject *edge = caption_text(props, k_edge_predicate, &odd);
        if (edge != NULL && PyUnicode_GET_LENGTH(edge))
            out = concat_steal(Py_NewRef(w_edge), after_last(edge, "#/:"));
        else if (edge != NULL)
            out = after_last(iri, "#/:");
        Py_XDECREF(edge);
        break;
    }
    default:
        break;
    }
    if (odd) {
        Py_XDECREF(out);
        PyObject *args[3] = {labels, props, iri};
        return PyObject_Vectorcall(caption, args, 3, NULL);
    }
    return out == NULL ? NULL : flatten(out);
}

/* A node's row: {"iri", "props", "labels"[, "types"][, "chunks"][, "extra"][, <datetime>]}. */
static PyObject *
node_row(Node *n)
{
    PyObject *row = NULL, *props = PyDict_New(), *labels = NULL;
    Py_ssize_t i;
    if (props == NULL || put_scope(props, n->msg) < 0 || PyDict_Update(props, n->props) < 0
        || (n->edge != NULL && put_edge(props, n->edge) < 0) || (labels = labels_for(n->types)) == NULL
        || (row = PyDict_New()) == NULL || PyDict_SetItem(row, k_iri, n->iri) < 0
        || PyDict_SetItem(row, k_props, props) < 0 || PyDict_SetItem(row, k_labels, labels) < 0)
        goto error;
    if (PyDict_GET_SIZE(n->types) && set_steal(row, k_types, PyDict_Keys(n->types)) < 0)
        goto error;
    if (n->chunks != NULL && PyDict_GET_SIZE(n->chunks) && set_steal(row, k_chunks, PyDict_Keys(n->chunks)) < 0)
        goto error;
    if (n->extra != NULL && PyDict_GET_SIZE(n->extra) && set_steal(row, k_extra, PyDict_Keys(n->extra)) < 0)
        goto error;
    for (i = 0; i < PyTuple_GET_SIZE(datetime_names); i++) {
        PyObject *name = PyTuple_GET_ITEM(datetime_names, i), *moment = PyDict_GetItemWithError(props, name);
        if (moment == NULL) {
            if (PyErr_Occurred())
                goto error;
            continue;
        }
        Py_INCREF(moment);
        int rc = PyDict_DelItem(props, name);
        if (rc == 0 && moment != Py_None)
            rc = PyDict_SetItem(row, name, moment);
        Py_DECREF(moment);
        if (rc < 0)
            goto error;
    }
    int captioned = PyList_GET_SIZE(labels) > 0;
    if (!captioned) {
        PyObject *edge = PyDict_GetItemWithError(props, k_edge_predicate);
        if (edge == NULL && PyErr_Occurred())
            goto error;
        if (edge != NULL && (captioned = PyObject_IsTrue(edge)) < 0)
            goto error;
    }
    if (captioned) {
        if (set_steal(props, caption_prop, caption_of(labels, props, n->iri)) < 0)
            goto error;
    }
    Py_DECREF(props);
    Py_DECREF(labels);
    return row;
error:
    Py_XDECREF(props);
    Py_XDECREF(labels);
    Py_XDECREF(row);
    return NULL;
}

/* {"iri": iri, [graph], "props": {}, "labels": []} (an IRI only ever an object, or a question without triples). */
static PyObject *
bare_row(PyObject *iri, PyObject *graph)
{
    PyObject *row = PyDict_New();
    if (row == NULL || PyDict_SetItem(row, k_iri, iri) < 0 || (graph != NULL && PyDict_SetItem(row, k_graph, graph) < 0)
        || set_steal(row, k_props, PyDict_New()) < 0 || set_steal(row, k_labels, PyList_New(0)) < 0) {
        Py_XDECREF(row);
        return NULL;
    }
    return row;
}

/* The status of msg onto its question's row (made at the end if new), as rows.write_rows. */
static int
put_status(PyObject *out, PyObject *msg)
{
    PyObject *iri = get(msg, &STEP, F_QUESTION), *status = get(msg, &STEP, F_STATUS), *row, *props, *f[5];
    if (iri == NULL || status == NULL)
        return -1;
    for (Py_ssize_t i = 0; i < 5; i++)
        if ((f[i] = get(status, &STATUS, i)) == NULL)
            return -1;
    if ((row = PyDict_GetItemWithError(out, iri)) == NULL) {
        if (PyErr_Occurred() || set_steal(out, iri, bare_row(iri, NULL)) < 0)
            return -1;
        row = PyDict_GetItem(out, iri);
    }
    PyObject *old = PyDict_GetItem(row, k_props);
    if ((props = PyDict_Copy(old)) == NULL)
        return -1;
    if (put_scope(props, msg) < 0 || PyDict_SetItem(row, k_props, props) < 0) {
        Py_DECREF(props);
        return -1;
    }
    Py_DECREF(props);
    PyObject *word = PyDict_GetItemWithError(state_words, f[0]);
    if (word == NULL)
        return PyErr_Occurred() ? -1 : bail("an unknown session state");
    if (PyDict_SetItem(row, k_status, word) < 0 || PyDict_SetItem(row, k_steps, f[1]) < 0
        || PyDict_SetItem(row, k_expected, f[2]) < 0 || PyDict_SetItem(row, k_late, f[3]) < 0)
        return -1;
    return set_steal(row, k_missing, PySequence_List(f[4]));
}

/* The row of iri if its node is of the retrieval graph (borrowed); NULL if not, or with an error set. */
static PyObject *
retrieval_row(PyObject *out, PyObject *iri)
{
    PyObject *found = PyDict_GetItemWithError(out, iri), *graph;
    if (found == NULL)
        return NULL;
    graph = PyDict_GetItemWithError(PyDict_GetItem(found, k_props), k_graph);
    if (graph == NULL) {
        if (PyErr_Occurred())
            return NULL;
        graph = PyDict_GetItem(found, k_graph);
        if (graph == NULL)
            graph = Py_None;
    }
    int same = PyObject_RichCompareBool(graph, retrieval_graph, Py_EQ);
    return same > 0 ? found : NULL;
}

/* The four offsets onto a row's lineage (rows.write_rows: the first non-null value of each is kept). */
static int
keep_offsets(PyObject *row, PyObject *const *values)
{
    PyObject *kept = PyDict_GetItemWithError(row, k_lineage);
    if (kept == NULL) {
        if (PyErr_Occurred() || (kept = PyDict_New()) == NULL)
            return -1;
        for (int i = 0; i < 4; i++)
            if (PyDict_SetItem(kept, lineage_fields[i], values[i]) < 0) {
                Py_DECREF(kept);
                return -1;
            }
        return set_steal(row, k_lineage, kept);
    }
    for (int i = 0; i < 4; i++)
        if (PyDict_GetItem(kept, lineage_fields[i]) == Py_None && PyDict_SetItem(kept, lineage_fields[i], values[i]) < 0)
            return -1;
    return 0;
}

/* One lineage row (a mapping: iri and the four offsets) onto its node's row. */
static int
put_lineage(PyObject *out, PyObject *line)
{
    PyObject *iri = PyObject_GetItem(line, k_iri), *row, *values[4] = {NULL, NULL, NULL, NULL};
    int rc = -1;
    if (iri == NULL)
        return -1;
    row = retrieval_row(out, iri);
    Py_DECREF(iri);
    if (row == NULL)
        return PyErr_Occurred() ? -1 : 0;
    for (int i = 0; i < 4; i++)
        if ((values[i] = PyObject_GetItem(line, lineage_fields[i])) == NULL)
            goto done;
    rc = keep_offsets(row, values);
done:
    for (int i = 0; i < 4; i++)
        Py_XDECREF(values[i]);
    return rc;
}

/* The offsets of an origin ((event, triples), each None or (partition, offset)) into values (borrowed). */
static int
origin_offsets(PyObject *origin, PyObject **values)
{
    if (!PyTuple_CheckExact(origin) || PyTuple_GET_SIZE(origin) != 2)
        return bail("an origin that is not a pair");
    for (int k = 0; k < 2; k++) {
        PyObject *at = PyTuple_GET_ITEM(origin, k);
        if (at == Py_None)
            values[2 * k] = values[2 * k + 1] = Py_None;
        else if (PyTuple_CheckExact(at) && PyTuple_GET_SIZE(at) == 2) {
            values[2 * k] = PyTuple_GET_ITEM(at, 0);
            values[2 * k + 1] = PyTuple_GET_ITEM(at, 1);
        }
        else
            return bail("a position that is not None or a (partition, offset) pair");
    }
    return 0;
}

/* rows.lineage_rows(msg, *origin) onto the rows, as put_lineage would put each (a subject met twice in
 * one message gets the same offsets again, which changes nothing). */
static int
put_origin(PyObject *out, PyObject *msg, PyObject *origin)
{
    PyObject *values[4], *triples = get(msg, &STEP, F_TRIPLES), **ts, *last = NULL, *s, *row;
    Py_ssize_t nt;
    if (triples == NULL || origin_offsets(origin, values) < 0 || items_of(triples, &ts, &nt) < 0)
        return -1;
    for (Py_ssize_t j = 0; j < nt; j++) {
        if ((s = get(ts[j], &TRIPLE, 0)) == NULL || (s = iri_value(s)) == NULL)
            return -1;
        if (s == last)
            continue;
        last = s;
        if ((row = retrieval_row(out, s)) == NULL) {
            if (PyErr_Occurred())
                return -1;
            continue;
        }
        if (keep_offsets(row, values) < 0)
            return -1;
    }
    return 0;
}

/* The relationship items onto their start node's row, by type in name order. */
static int
put_relationships(PyObject *out, PyObject *rels)
{
    PyObject *types = PyDict_Keys(rels), *rel_type, *key, *item;
    int rc = -1;
    if (types == NULL || PyList_Sort(types) < 0)
        goto done;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(types); i++) {
        Py_ssize_t pos = 0;
        rel_type = PyList_GET_ITEM(types, i);
        PyObject *group = PyDict_GetItem(rels, rel_type);
        while (PyDict_Next(group, &pos, &key, &item)) {
            PyObject *row = PyDict_GetItem(out, PyTuple_GET_ITEM(key, 0)), *list;
            if (row == NULL) {
                PyErr_SetString(PyExc_KeyError, "a relationship from a node without a row");
                goto done;
            }
            if ((list = PyDict_GetItemWithError(row, rel_type)) == NULL) {
                if (PyErr_Occurred() || set_steal(row, rel_type, PyList_New(0)) < 0)
                    goto done;
                list = PyDict_GetItem(row, rel_type);
            }
            if (PyList_Append(list, item) < 0)
                goto done;
        }
    }
    rc = 0;
done:
    Py_XDECREF(types);
    return rc;
}

/* The IRIs that are only ever objects, sorted. */
static PyObject *
object_iris(PyObject *rels, PyObject *index)
{
    PyObject *seen = PyDict_New(), *group, *key, *item, *rel_type;
    Py_ssize_t pos = 0, inner;
    if (seen == NULL)
        return NULL;
    while (PyDict_Next(rels, &pos, &rel_type, &group)) {
        inner = 0;
        while (PyDict_Next(group, &inner, &key, &item)) {
            PyObject *o = PyTuple_GET_ITEM(key, 2);
            int known = PyDict_Contains(index, o);
            if (known < 0 || (!known && PyDict_SetItem(seen, o, Py_None) < 0)) {
                Py_DECREF(seen);
                return NULL;
            }
        }
    }
    return sorted_keys(seen);
}

/* The rows of batch, with the lineage of either the lineage rows (an iterable) or the origins (a list of one
 * origin per message); the other is NULL. */
static PyObject *
build(PyObject *batch, PyObject *lineage, PyObject *origins)
{
    Nodes ns = {NULL, 0, 0};
    PyObject *index = PyDict_New(), *rels = PyDict_New(), *statuses = PyDict_New(), *out = PyDict_New();
    PyObject *objects = NULL, *result = NULL, **msgs, *key, *msg, *iter = NULL, *line;
    Py_ssize_t nmsgs, pos, count = 0;
    if (index == NULL || rels == NULL || statuses == NULL || out == NULL)
        goto done;
    if (items_of(batch, &msgs, &nmsgs) < 0)
        goto done;
    for (Py_ssize_t i = 0; i < nmsgs; i++) {
        PyObject *m = msgs[i], *graph, *triples, **ts, *question, *best;
        Py_ssize_t nt;
        if ((graph = get(m, &STEP, F_GRAPH)) == NULL || (triples = get(m, &STEP, F_TRIPLES)) == NULL
            || (question = get(m, &STEP, F_QUESTION)) == NULL)
            goto done;
        if (items_of(triples, &ts, &nt) < 0)
            goto done;
        for (Py_ssize_t j = 0; j < nt; j++)
            if (add_triple(&ns, index, rels, m, graph, ts[j]) < 0)
                goto done;
        if ((best = PyDict_GetItemWithError(statuses, question)) == NULL) {
            if (PyErr_Occurred() || PyDict_SetItem(statuses, question, m) < 0)
                goto done;
        }
        else {
            PyObject *mine = steps_of(m), *theirs;
            if (mine == NULL || (theirs = steps_of(best)) == NULL)
                goto done;
            int later = PyObject_RichCompareBool(mine, theirs, Py_GE);
            if (later < 0 || (later && PyDict_SetItem(statuses, question, m) < 0))
                goto done;
        }
    }
    if ((objects = object_iris(rels, index)) == NULL)
        goto done;
    PyObject *first_graph = nmsgs ? get(msgs[0], &STEP, F_GRAPH) : retrieval_graph;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(objects); i++) {
        PyObject *iri = PyList_GET_ITEM(objects, i);
        if (set_steal(out, iri, bare_row(iri, first_graph)) < 0)
            goto done;
    }
    for (Py_ssize_t i = 0; i < ns.len; i++)
        if (set_steal(out, ns.items[i].iri, node_row(&ns.items[i])) < 0)
            goto done;
    pos = 0;
    while (PyDict_Next(statuses, &pos, &key, &msg))
        if (put_status(out, msg) < 0)
            goto done;
    if (origins != NULL) {
        PyObject **at;
        Py_ssize_t nat;
        if (items_of(origins, &at, &nat) < 0)
            goto done;
        if (nat != nmsgs) {
            bail("not one origin per message");
            goto done;
        }
        for (Py_ssize_t i = 0; i < nmsgs; i++)
            if (put_origin(out, msgs[i], at[i]) < 0)
                goto done;
    }
    else {
        if ((iter = PyObject_GetIter(lineage)) == NULL)
            goto done;
        while ((line = PyIter_Next(iter)) != NULL) {
            int rc = put_lineage(out, line);
            Py_DECREF(line);
            if (rc < 0)
                goto done;
        }
    }
    if (PyErr_Occurred() || put_relationships(out, rels) < 0)
        goto done;
    count = PyList_GET_SIZE(objects) + ns.len + PyDict_GET_SIZE(statuses);
    pos = 0;
    PyObject *group;
    while (PyDict_Next(rels, &pos, &key, &group))
        count += PyDict_GET_SIZE(group);
    PyObject *rows = PyDict_Values(out);
    if (rows != NULL) {
        result = Py_BuildValue("(nN)", count, rows);
    }
done:
    nodes_clear(&ns);
    Py_XDECREF(index);
    Py_XDECREF(rels);
    Py_XDECREF(statuses);
    Py_XDECREF(out);
    Py_XDECREF(objects);
    Py_XDECREF(iter);
    return result;
}

/* -- the module ------------------------------------------------------------------ */

PyDoc_STRVAR(write_rows_doc,
"write_rows(batch, lineage, /)\n--\n\n"
"``(len of build_rows(batch)'s rows, rows.write_rows(build_rows(batch), lineage))``, in one pass.\n\n"
"Parameters:\n"
"    batch: a ``list`` or ``tuple`` of ``StepTriples``.\n"
"    lineage: an iterable of lineage rows (mappings with ``iri`` and the four offsets).\n\n"
"Returns:\n"
"    ``(count, rows)``: the number of rows ``build_rows`` makes, and the write rows.\n\n"
"Raises:\n"
"    Unsupported for anything but the exact classes of provstream.core.triples and what the model holds;\n"
"    the caller then builds the rows in Python.\n\n"
"Example::\n\n"
"    >>> from provstream.connectors.neo4j import rows\n"
"    >>> from provstream.core.triples import Iri, SessionState, SessionStatus, StepTriples, Triple\n"
"    >>> from provstream.core.vocab import Mechanism\n"
"    >>> step = StepTriples(\"e1\", \"s1\", Mechanism.AGENT, 0, \"u\", \"c\", \"urn:q\",\n"
"    ...                    (Triple(Iri(\"urn:a\"), Iri(\"urn:b\"), Iri(\"urn:c\")),), SessionStatus(SessionState.OPEN, 1))\n"
"    >>> write_rows([step], []) == (4, rows.write_rows(rows.build_rows([step])))\n"
"    True\n");

static PyObject *
write_rows(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2)
        return PyErr_Format(PyExc_TypeError, "write_rows() takes 2 arguments (%zd given)", nargs);
    if (!configured)
        return PyErr_SetString(Unsupported, "configure() has not been called"), NULL;
    return build(args[0], args[1], NULL);
}

PyDoc_STRVAR(write_rows_at_doc,
"write_rows_at(batch, origins, /)\n--\n\n"
"``write_rows(batch, lineage)`` with the lineage rows of each message read where ``origins`` says:\n"
"the rows of ``rows.lineage_rows(msg, event, triples)`` for each message and its ``(event, triples)``,\n"
"without making them.\n\n"
"Parameters:\n"
"    batch: a ``list`` or ``tuple`` of ``StepTriples``.\n"
"    origins: a ``list`` or ``tuple`` of one ``(event, triples)`` per message, each ``None`` or an exact\n"
"        ``(partition, offset)`` tuple.\n\n"
"Returns:\n"
"    ``(count, rows)``, as write_rows.\n\n"
"Raises:\n"
"    Unsupported as write_rows does, and for origins of another shape or length.\n\n"
"Example::\n\n"
"    >>> from provstream.connectors.neo4j import rows\n"
"    >>> from provstream.core.triples import Iri, SessionState, SessionStatus, StepTriples, Triple\n"
"    >>> from provstream.core.vocab import Mechanism\n"
"    >>> step = StepTriples(\"e1\", \"s1\", Mechanism.AGENT, 0, \"u\", \"c\", \"urn:q\",\n"
"    ...                    (Triple(Iri(\"urn:a\"), Iri(\"urn:b\"), Iri(\"urn:c\")),), SessionStatus(SessionState.OPEN, 1))\n"
"    >>> write_rows_at([step], [(None, (0, 7))]) == write_rows([step], rows.lineage_rows(step, None, (0, 7)))\n"
"    True\n");

static PyObject *
write_rows_at(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2)
        return PyErr_Format(PyExc_TypeError, "write_rows_at() takes 2 arguments (%zd given)", nargs);
    if (!configured)
        return PyErr_SetString(Unsupported, "configure() has not been called"), NULL;
    return build(args[0], NULL, args[1]);
}

PyDoc_STRVAR(caption_doc,
"caption(labels, props, iri, /)\n--\n\n"
"``model.caption(labels, props, iri)``: in C for exact ``str`` / ``int`` values, by the Python function\n"
"for anything else (a ``str`` subclass, a count of another type).\n\n"
"Parameters:\n"
"    labels: the node's labels (a list of str).\n"
"    props: its properties (a dict).\n"
"    iri: its IRI.\n\n"
"Returns:\n"
"    The caption, the same ``str`` as model.caption's.\n\n"
"Example::\n\n"
"    >>> caption([\"Analysis\"], {\"action\": \"Search\"}, \"urn:trustgraph:agent:s/i3\")\n"
"    'i3 \xc2\xb7 Search'\n");

static PyObject *
caption_fn(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 3)
        return PyErr_Format(PyExc_TypeError, "caption() takes 3 arguments (%zd given)", nargs);
    if (!configured)
        return PyErr_SetString(Unsupported, "configure() has not been called"), NULL;
    return caption_of(args[0], args[1], args[2]);
}

/* -- the procedure's batch ------------------------------------------------------ */

/* table[value], added as the next index if new (a new reference; NULL on error). */
static PyObject *
table_index(PyObject *table, PyObject *value)
{
    PyObject *found = PyDict_GetItemWithError(table, value), *i;
    if (found != NULL)
        return Py_NewRef(found);
    if (PyErr_Occurred() || (i = PyLong_FromSsize_t(PyDict_GET_SIZE(table))) == NULL)
        return NULL;
    if (PyDict_SetItem(table, value, i) < 0) {
        Py_DECREF(i);
        return NULL;
    }
    return i;
}

/* rows.py's text(): a str's index in strings, anything else itself (a new reference). */
static PyObject *
shared_text(PyObject *strings, PyObject *value)
{
    return PyUnicode_CheckExact(value) ? table_index(strings, value) : Py_NewRef(value);
}

/* row[key] of an exact dict (borrowed), or NULL with Unsupported when it is missing. */
static PyObject *
must(PyObject *row, PyObject *key)
{
    PyObject *value = PyDict_GetItemWithError(row, key);
    if (value == NULL && !PyErr_Occurred())
        bail("a key is missing");
    return value;
}

/* [d[keys[0]], ..., d[keys[n - 1]]] of an exact dict (a new reference); NULL with Unsupported if one is missing. */
static PyObject *
values_of(PyObject *d, PyObject *const *keys, int n)
{
    PyObject *out = PyList_New(n), *value;
    for (int i = 0; out != NULL && i < n; i++) {
        if ((value = must(d, keys[i])) == NULL)
            Py_CLEAR(out);
        else
            PyList_SET_ITEM(out, i, Py_NewRef(value));
    }
    return out;
}

/* [x, y, ...] appended to list (a flat list of pairs or quadruples); steals the references. */
static int
extend(PyObject *list, PyObject **items, int n)
{
    int rc = 0;
    for (int i = 0; i < n; i++) {
        if (items[i] == NULL || (rc == 0 && PyList_Append(list, items[i]) < 0))
            rc = -1;
        Py_XDECREF(items[i]);
    }
    return rc;
}

/* A list, or None when it is empty (a new reference; consumes list). */
static PyObject *
or_none(PyObject *list)
{
    if (list != NULL && PyList_GET_SIZE(list) == 0) {
        Py_DECREF(list);
        return Py_NewRef(Py_None);
    }
    return list;
}

/* row.get(key) or None, for a value that is a list (or absent): a new reference. */
static PyObject *
list_or_none(PyObject *row, PyObject *key)
{
    PyObject *value = PyDict_GetItemWithError(row, key);
    if (value == NULL)
        return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    if (!PyList_CheckExact(value))
        return bail("not a list"), NULL;
    return Py_NewRef(PyList_GET_SIZE(value) ? value : Py_None);
}

enum { P_IRI, P_GRAPH, P_PROPS, P_SCOPE, P_LABELS, P_TYPES, P_CHUNKS, P_EXTRA, P_STARTED, P_STATUS, P_LINEAGE,
       P_RELS, NPOSITIONS };

static PyObject *
procedure_row(PyObject *row, PyObject *keys, PyObject *labels, PyObject *strings, PyObject *index,
              PyObject *const *rels, Py_ssize_t nrels)
{
    PyObject *at[NPOSITIONS] = {NULL}, *value, *props, *name, *out = NULL;
    Py_ssize_t pos = 0, n;
    int ok = 0;
    if (!PyDict_CheckExact(row))
        return bail("a row is not a dict"), NULL;
    if ((value = must(row, k_iri)) == NULL)
        goto done;
    at[P_IRI] = Py_NewRef(value);
    value = PyDict_GetItemWithError(row, k_graph);
    if ((at[P_GRAPH] = value ? shared_text(strings, value) : PyErr_Occurred() ? NULL : Py_NewRef(Py_None)) == NULL)
        goto done;
    if ((props = must(row, k_props)) == NULL || (!PyDict_CheckExact(props) && bail("props is not a dict") < 0)
        || (at[P_PROPS] = PyList_New(0)) == NULL || (at[P_SCOPE] = PyList_New(0)) == NULL)
        goto done;
    while (PyDict_Next(props, &pos, &name, &value)) {
        int shared = PyUnicode_CheckExact(value) ? PySet_Contains(shared_props, name) : 0;
        PyObject *pair[2];
        if (shared < 0)
            goto done;
        pair[0] = table_index(keys, name);
        pair[1] = shared ? table_index(strings, value) : Py_NewRef(value);
        if (extend(shared ? at[P_SCOPE] : at[P_PROPS], pair, 2) < 0)
            goto done;
    }
    if ((value = must(row, k_labels)) == NULL || (!PyList_CheckExact(value) && bail("labels is not a list") < 0)
        || (at[P_LABELS] = PyList_New(PyList_GET_SIZE(value))) == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(value); i++) {
        PyObject *label = table_index(labels, PyList_GET_ITEM(value, i));
        if (label == NULL)
            goto done;
        PyList_SET_ITEM(at[P_LABELS], i, label);
    }
    if ((value = list_or_none(row, k_types)) == NULL)
        goto done;
    if (value != Py_None) {
        at[P_TYPES] = PyList_New(PyList_GET_SIZE(value));
        for (Py_ssize_t i = 0; at[P_TYPES] != NULL && i < PyList_GET_SIZE(value); i++) {
            PyObject *text = shared_text(strings, PyList_GET_ITEM(value, i));
            if (text == NULL)
                Py_CLEAR(at[P_TYPES]);
            else
                PyList_SET_ITEM(at[P_TYPES], i, text);
        }
        Py_DECREF(value);
        if (at[P_TYPES] == NULL)
            goto done;
    }
    else
        at[P_TYPES] = value;
    if ((at[P_CHUNKS] = list_or_none(row, k_chunks)) == NULL || (at[P_EXTRA] = list_or_none(row, k_extra)) == NULL)
        goto done;
    value = PyDict_GetItemWithError(row, PyTuple_GET_ITEM(datetime_names, 0));
    if ((at[P_STARTED] = value ? Py_NewRef(value) : PyErr_Occurred() ? NULL : Py_NewRef(Py_None)) == NULL)
        goto done;
    if ((n = PyDict_Contains(row, k_steps)) < 0)
        goto done;
    if (n) {
        PyObject *fields[5] = {k_status, k_steps, k_expected, k_late, k_missing};
        if ((at[P_STATUS] = values_of(row, fields, 5)) == NULL)
            goto done;
    }
    else
        at[P_STATUS] = Py_NewRef(Py_None);
    value = PyDict_GetItemWithError(row, k_lineage);
    if (value == NULL && PyErr_Occurred())
        goto done;
    if (value != NULL && value != Py_None) {
        PyObject *line = value;
        if (!PyDict_CheckExact(line)) {
            bail("lineage is not a dict");
            goto done;
        }
        if ((at[P_LINEAGE] = values_of(line, lineage_fields, 4)) == NULL)
            goto done;
    }
    else
        at[P_LINEAGE] = Py_NewRef(Py_None);
    if ((at[P_RELS] = PyList_New(0)) == NULL)
        goto done;
    for (Py_ssize_t t = 0; t < nrels; t++) {
        PyObject *group = PyDict_GetItemWithError(row, rels[t]), *tobj;
        if (group == NULL) {
            if (PyErr_Occurred())
                goto done;
            continue;
        }
        if (!PyList_CheckExact(group)) {
            bail("a relationship group is not a list");
            goto done;
        }
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(group); i++) {
            PyObject *rel = PyList_GET_ITEM(group, i), *o, *graph, *end, *quad[4];
            if (!PyDict_CheckExact(rel)) {
                bail("a relationship is not a dict");
                goto done;
            }
            if ((o = must(rel, k_o)) == NULL || (graph = must(rel, k_graph)) == NULL)
                goto done;
            if ((end = PyDict_GetItemWithError(index, o)) == NULL && PyErr_Occurred())
                goto done;
            if ((tobj = PyLong_FromSsize_t(t)) == NULL)
                goto done;
            quad[0] = tobj;
            quad[1] = Py_NewRef(end != NULL ? end : o);
            quad[2] = shared_text(strings, graph);
            value = PyDict_GetItemWithError(rel, k_predicate);
            quad[3] = value ? Py_NewRef(value) : PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
            if (extend(at[P_RELS], quad, 4) < 0)
                goto done;
        }
    }
    at[P_PROPS] = or_none(at[P_PROPS]);
    at[P_SCOPE] = or_none(at[P_SCOPE]);
    at[P_LABELS] = or_none(at[P_LABELS]);
    at[P_RELS] = or_none(at[P_RELS]);
    ok = 1;
done:
    if (ok) {
        n = NPOSITIONS;
        while (n > 1 && at[n - 1] == Py_None)
            n--;
        if ((out = PyList_New(n)) != NULL)
            for (Py_ssize_t i = 0; i < n; i++) {
                PyList_SET_ITEM(out, i, at[i]);
                at[i] = NULL;
            }
    }
    for (int i = 0; i < NPOSITIONS; i++)
        Py_XDECREF(at[i]);
    return out;
}

PyDoc_STRVAR(procedure_batch_doc,
"procedure_batch(rows, /)\n--\n\n"
"rows.procedure_batch_py(rows): write_rows's rows as the provstream.writeBatch procedure takes them\n"
"(contract 2). Raises Unsupported for rows it does not take (not the exact dicts and lists\n"
"write_rows makes); rows.py then builds the batch in Python.\n");

static PyObject *
procedure_batch(PyObject *module, PyObject *rows)
{
    PyObject *keys = NULL, *labels = NULL, *strings = NULL, *index = NULL, *out_rows = NULL, *out = NULL;
    PyObject *rels[8], *name;
    Py_ssize_t nrels = 0, pos = 0, n;
    (void)module;
    if (!configured)
        return PyErr_SetString(Unsupported, "configure() has not been called"), NULL;
    if (!PyList_CheckExact(rows))
        return PyErr_SetString(Unsupported, "rows is not a list"), NULL;
    while (PyDict_Next(rel_types, &pos, NULL, &name) && nrels < 7)
        rels[nrels++] = name;
    rels[nrels++] = link_type;
    n = PyList_GET_SIZE(rows);
    if ((keys = PyDict_New()) == NULL || (labels = PyDict_New()) == NULL || (strings = PyDict_New()) == NULL
        || (index = PyDict_New()) == NULL || (out_rows = PyList_New(n)) == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *row = PyList_GET_ITEM(rows, i), *iri, *at;
        if (!PyDict_CheckExact(row)) {
            PyErr_SetString(Unsupported, "a row is not a dict");
            goto done;
        }
        if ((iri = must(row, k_iri)) == NULL || (at = PyLong_FromSsize_t(i)) == NULL)
            goto done;
        PyObject *was = PyDict_SetDefault(index, iri, at);
        Py_DECREF(at);
        if (was == NULL)
            goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *row = procedure_row(PyList_GET_ITEM(rows, i), keys, labels, strings, index, rels, nrels);
        if (row == NULL)
            goto done;
        PyList_SET_ITEM(out_rows, i, row);
    }
    out = Py_BuildValue("{s:N,s:N,s:N,s:O}", "keys", PyDict_Keys(keys), "labels", PyDict_Keys(labels),
                        "strings", PyDict_Keys(strings), "rows", out_rows);
done:
    Py_XDECREF(keys);
    Py_XDECREF(labels);
    Py_XDECREF(strings);
    Py_XDECREF(index);
    Py_XDECREF(out_rows);
    return out;
}

PyDoc_STRVAR(configure_doc,
"configure(settings, /)\n--\n\n"
"Hand over the model's tables and functions (a dict; rows.py passes them once, at import).\n\n"
"Keys: LABELS, STRING_PROPS, INTEGER_PROPS, DATETIME_PROPS, LIST_PROPS, REL_TYPES,\n"
"MECHANISM_VALUES, STATE_WORDS (dicts); LINK, RDF_TYPE, TG_EDGE, XSD_INTEGER, XSD_DATETIME,\n"
"GRAPH, CAPTION_PROP (str); DATETIME_NAMES, SHARED_PROPS (tuples of str); CAPTION_WIDTH (int); parse_integer,\n"
"parse_datetime, extra_literal, caption (callables). Raises TypeError or KeyError if one is missing or of\n"
"another kind, and write_rows() and procedure_batch() stay unusable.\n");

static PyObject *
configure(PyObject *module, PyObject *settings)
{
    (void)module;
    if (!PyDict_Check(settings))
        return PyErr_Format(PyExc_TypeError, "configure() needs a dict");
    configured = 0;
    for (Py_ssize_t i = 0; i < NSETTINGS; i++) {
        PyObject *value = PyDict_GetItemString(settings, SETTINGS[i].name);
        int ok;
        if (value == NULL)
            return PyErr_Format(PyExc_KeyError, "configure() needs %s", SETTINGS[i].name);
        switch (SETTINGS[i].kind) {
        case 0: ok = PyDict_CheckExact(value); break;
        case 1: ok = PyUnicode_CheckExact(value); break;
        case 2: ok = PyCallable_Check(value); break;
        case 4: ok = PyLong_CheckExact(value) && PyLong_AsSsize_t(value) >= 1; break;
        default:
            ok = PyTuple_CheckExact(value);
            for (Py_ssize_t j = 0; ok && j < PyTuple_GET_SIZE(value); j++)
                ok = PyUnicode_CheckExact(PyTuple_GET_ITEM(value, j));
        }
        if (!ok)
            return PyErr_Format(PyExc_TypeError, "configure(): %s is not of the expected kind", SETTINGS[i].name);
        Py_XSETREF(*SETTINGS[i].slot, Py_NewRef(value));
    }
    caption_width = PyLong_AsSsize_t(caption_width_obj);
    Py_XSETREF(shared_props, PyFrozenSet_New(shared_props_tuple));
    if (shared_props == NULL)
        return NULL;
    configured = 1;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"write_rows", (PyCFunction)(void (*)(void))write_rows, METH_FASTCALL, write_rows_doc},
    {"write_rows_at", (PyCFunction)(void (*)(void))write_rows_at, METH_FASTCALL, write_rows_at_doc},
    {"caption", (PyCFunction)(void (*)(void))caption_fn, METH_FASTCALL, caption_doc},
    {"procedure_batch", (PyCFunction)procedure_batch, METH_O, procedure_batch_doc},
    {"configure", (PyCFunction)configure, METH_O, configure_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "provstream.connectors.neo4j._rows_c",
    "The sink's write rows in C: rows.write_rows(rows.build_rows(batch), lineage) in one pass.",
    -1,
    methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__rows_c(void)
{
    PyObject *triples = NULL, *module = NULL;
    if (IRI.type != NULL) {
        PyErr_SetString(PyExc_ImportError, "provstream.connectors.neo4j._rows_c cannot be loaded twice in one process");
        return NULL;
    }
    if ((triples = PyImport_ImportModule("provstream.core.triples")) == NULL
        || load_classes(CLASSES, NCLASSES, triples) < 0 || intern_keys() < 0 || intern_caption_words() < 0)
        goto done;
    for (Py_ssize_t i = 0; i < NCLASSES; i++)
        if (!CLASSES[i]->direct) {
            PyErr_Format(PyExc_ImportError, "%s did not pass the checks for direct access", CLASSES[i]->name);
            goto done;
        }
    module = PyModule_Create(&module_def);
    if (module == NULL)
        goto done;
    Unsupported = PyErr_NewExceptionWithDoc("provstream.connectors.neo4j._rows_c.Unsupported",
                                            "A batch the C rows do not take: build it in Python.", NULL, NULL);
    if (Unsupported == NULL || PyModule_AddObjectRef(module, "Unsupported", Unsupported) < 0)
        Py_CLEAR(module);
done:
    if (module == NULL) {
        unload_classes(CLASSES, NCLASSES);
        as_import_error("provstream.connectors.neo4j._rows_c");
    }
    Py_XDECREF(triples);
    return module;
}
