/*
 * Kafka records (message format v2) read in C, for kafka-python's consumer
 * (provstream/codec/kafka_records.py installs both readers).
 *
 * read_record(buffer, pos, base_offset, timestamp_base, log_append_time, record_class)
 *   -> (record, next_pos)
 *
 * does what kafka-python 3.0's DefaultRecordBatch._read_msg does for a data
 * batch: varint length, attributes, timestamp delta, offset delta, key,
 * value, headers (each key UTF-8 text, each value bytes or None), and the check
 * that the record's length matches what was read. The record is
 * record_class(length, offset, timestamp, timestamp_type, key, value, headers).
 * Malformed input raises ValueError (UnicodeDecodeError for a header key that
 * is not UTF-8), which kafka-python's __next__ turns into CorruptRecordError,
 * as it does for the IndexError/ValueError of its own reader.
 *
 * read_records(...) reads a whole batch's records the same way, each straight
 * into the ConsumerRecord kafka-python's fetcher would make of it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* A zig-zag varint (Kafka's varint and varlong alike) at *pos; 0, or -1 with ValueError set. */
static int
read_varint(const unsigned char *buf, Py_ssize_t len, Py_ssize_t *pos, int64_t *out)
{
    uint64_t result = 0;
    int shift = 0;
    for (;;) {
        if (*pos >= len) {
            PyErr_SetString(PyExc_ValueError, "record truncated inside a varint");
            return -1;
        }
        unsigned char b = buf[(*pos)++];
        result |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            break;
        shift += 7;
        if (shift >= 64) {
            PyErr_SetString(PyExc_ValueError, "Out of int64 range");
            return -1;
        }
    }
    *out = (int64_t)(result >> 1) ^ -(int64_t)(result & 1);
    return 0;
}

/* Nullable bytes of length n at *pos (n < 0: None); a new reference, or NULL with an error set. */
static PyObject *
read_bytes(const unsigned char *buf, Py_ssize_t len, Py_ssize_t *pos, int64_t n)
{
    if (n < 0)
        Py_RETURN_NONE;
    if (n > len - *pos) {
        PyErr_SetString(PyExc_ValueError, "record truncated inside a key, value or header");
        return NULL;
    }
    PyObject *out = PyBytes_FromStringAndSize((const char *)buf + *pos, (Py_ssize_t)n);
    *pos += (Py_ssize_t)n;
    return out;
}

static PyObject *
read_headers(const unsigned char *buf, Py_ssize_t len, Py_ssize_t *pos)
{
    int64_t count;
    if (read_varint(buf, len, pos, &count) < 0)
        return NULL;
    if (count < 0)
        return PyErr_Format(PyExc_ValueError, "Found invalid number of record headers %lld", (long long)count);
    if (count > len - *pos)  /* each header takes at least one byte */
        return PyErr_Format(PyExc_ValueError, "record truncated: %lld headers announced", (long long)count);
    PyObject *headers = PyList_New((Py_ssize_t)count);
    if (headers == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < (Py_ssize_t)count; i++) {
        int64_t key_len, value_len;
        if (read_varint(buf, len, pos, &key_len) < 0)
            goto fail;
        if (key_len < 0) {
            PyErr_Format(PyExc_ValueError, "Invalid negative header key size %lld", (long long)key_len);
            goto fail;
        }
        if (key_len > len - *pos) {
            PyErr_SetString(PyExc_ValueError, "record truncated inside a header key");
            goto fail;
        }
        PyObject *key = PyUnicode_DecodeUTF8((const char *)buf + *pos, (Py_ssize_t)key_len, NULL);
        if (key == NULL)
            goto fail;
        *pos += (Py_ssize_t)key_len;
        PyObject *value = NULL;
        if (read_varint(buf, len, pos, &value_len) < 0 || (value = read_bytes(buf, len, pos, value_len)) == NULL) {
            Py_DECREF(key);
            goto fail;
        }
        PyObject *pair = PyTuple_Pack(2, key, value);
        Py_DECREF(key);
        Py_DECREF(value);
        if (pair == NULL)
            goto fail;
        PyList_SET_ITEM(headers, i, pair);
    }
    return headers;
fail:
    Py_DECREF(headers);
    return NULL;
}

/* One record's fields, as read by read_one. */
typedef struct {
    int64_t length;          /* the record's length varint: its size as kafka-python counts it */
    int64_t offset_delta, ts_delta;
    int64_t key_size, value_size, header_size;  /* -1: None (header_size: no headers) */
    PyObject *key, *value, *headers;            /* new references */
} Record;

static void
record_clear(Record *r)
{
    Py_CLEAR(r->key);
    Py_CLEAR(r->value);
    Py_CLEAR(r->headers);
}

/* The record at *pos into r (0), or -1 with an error set and r cleared. */
static int
read_one(const unsigned char *buf, Py_ssize_t len, Py_ssize_t *pos, Record *r)
{
    int64_t attributes;
    r->key = r->value = r->headers = NULL;
    if (read_varint(buf, len, pos, &r->length) < 0)
        return -1;
    Py_ssize_t start = *pos;
    if (read_varint(buf, len, pos, &attributes) < 0 || read_varint(buf, len, pos, &r->ts_delta) < 0
            || read_varint(buf, len, pos, &r->offset_delta) < 0 || read_varint(buf, len, pos, &r->key_size) < 0
            || (r->key = read_bytes(buf, len, pos, r->key_size)) == NULL
            || read_varint(buf, len, pos, &r->value_size) < 0
            || (r->value = read_bytes(buf, len, pos, r->value_size)) == NULL)
        goto fail;
    Py_ssize_t headers_at = *pos;
    if ((r->headers = read_headers(buf, len, pos)) == NULL)
        goto fail;
    if (*pos - start != r->length) {
        PyErr_Format(PyExc_ValueError, "Invalid record size: expected to read %lld bytes in record payload, "
                     "but instead read %zd", (long long)r->length, *pos - start);
        goto fail;
    }
    if (r->key_size < 0)
        r->key_size = -1;
    if (r->value_size < 0)
        r->value_size = -1;
    if (PyList_GET_SIZE(r->headers) == 0) {
        r->header_size = -1;
    } else {
        /* The header keys' and values' bytes: what is left of the headers once their varints are skipped. */
        Py_ssize_t at = headers_at;
        int64_t n, klen, vlen;
        r->header_size = 0;
        (void)read_varint(buf, len, &at, &n);
        for (int64_t i = 0; i < n; i++) {
            (void)read_varint(buf, len, &at, &klen);
            at += (Py_ssize_t)klen;
            (void)read_varint(buf, len, &at, &vlen);
            if (vlen > 0) {
                at += (Py_ssize_t)vlen;
                r->header_size += vlen;
            }
            r->header_size += klen;
        }
    }
    return 0;
fail:
    record_clear(r);
    return -1;
}

static int
read_position(PyObject *arg, Py_ssize_t len, Py_ssize_t *pos)
{
    *pos = PyLong_AsSsize_t(arg);
    if (*pos == -1 && PyErr_Occurred())
        return -1;
    if (*pos < 0 || *pos > len) {
        PyErr_SetString(PyExc_ValueError, "read position outside the batch");
        return -1;
    }
    return 0;
}

static PyObject *
read_record(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "read_record takes 6 arguments");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    Record r = {0};
    PyObject *record = NULL, *result = NULL;
    Py_ssize_t pos;
    long long base_offset = PyLong_AsLongLong(args[2]);
    long long timestamp_base = PyLong_AsLongLong(args[3]);
    int log_append = PyObject_IsTrue(args[4]);
    if (PyErr_Occurred() || log_append < 0 || read_position(args[1], view.len, &pos) < 0
            || read_one(view.buf, view.len, &pos, &r) < 0)
        goto done;
    PyObject *fields[7] = {NULL};
    fields[0] = PyLong_FromLongLong(r.length);
    fields[1] = PyLong_FromLongLong((long long)((uint64_t)base_offset + (uint64_t)r.offset_delta));
    fields[2] = PyLong_FromLongLong(log_append ? timestamp_base
                                                : (long long)((uint64_t)timestamp_base + (uint64_t)r.ts_delta));
    fields[3] = PyLong_FromLong(log_append ? 1 : 0);
    fields[4] = r.key;
    fields[5] = r.value;
    fields[6] = r.headers;
    if (fields[0] && fields[1] && fields[2] && fields[3])
        record = PyObject_Vectorcall(args[5], fields, 7, NULL);
    for (int i = 0; i < 4; i++)
        Py_XDECREF(fields[i]);
    if (record == NULL)
        goto done;
    PyObject *next = PyLong_FromSsize_t(pos);
    if (next != NULL) {
        result = PyTuple_Pack(2, record, next);
        Py_DECREF(next);
    }
done:
    record_clear(&r);
    Py_XDECREF(record);
    PyBuffer_Release(&view);
    return result;
}

#define CONSUMER_RECORD_FIELDS 13

/*
 * read_records(buffer, pos, count, base_offset, timestamp_base, log_append_time,
 *              topic, partition, leader_epoch, record_class)
 *   -> (records, sizes, next_pos, error)
 *
 * Up to count records from pos, each made straight into record_class (kafka-python's ConsumerRecord, a
 * namedtuple): (topic, partition, leader_epoch, offset, timestamp, timestamp_type, key, value, headers,
 * checksum=None, serialized_key_size, serialized_value_size, serialized_header_size), as kafka-python's
 * fetcher makes it when it has no deserializers. sizes holds each record's size (its length field, the
 * DefaultRecord.size_in_bytes the fetcher adds to bytes_read). A malformed record
 * ends the list: error is then the ValueError it raised (else None), and records holds those before it.
 */
static PyObject *
read_records(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "read_records takes 10 arguments");
        return NULL;
    }
    PyTypeObject *cls = (PyTypeObject *)args[9];
    if (!PyType_Check(args[9]) || !PyType_IsSubtype(cls, &PyTuple_Type)
            || cls->tp_basicsize != PyTuple_Type.tp_basicsize || cls->tp_itemsize != PyTuple_Type.tp_itemsize) {
        PyErr_SetString(PyExc_TypeError, "record_class must be a namedtuple");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const unsigned char *buf = view.buf;
    PyObject *records = NULL, *sizes = NULL, *error = NULL, *result = NULL;
    PyObject *timestamp_type = NULL;
    Py_ssize_t pos;
    Py_ssize_t count = PyLong_AsSsize_t(args[2]);
    long long base_offset = PyLong_AsLongLong(args[3]);
    long long timestamp_base = PyLong_AsLongLong(args[4]);
    int log_append = PyObject_IsTrue(args[5]);
    if (PyErr_Occurred() || log_append < 0 || read_position(args[1], view.len, &pos) < 0)
        goto done;
    if (count < 0) {
        PyErr_SetString(PyExc_ValueError, "negative record count");
        goto done;
    }
    timestamp_type = PyLong_FromLong(log_append ? 1 : 0);
    PyObject *shared_timestamp = log_append ? PyLong_FromLongLong(timestamp_base) : NULL;
    records = PyList_New(0);
    sizes = PyList_New(0);
    if (timestamp_type == NULL || (log_append && shared_timestamp == NULL) || records == NULL || sizes == NULL) {
        Py_XDECREF(shared_timestamp);
        goto done;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        Record r;
        if (read_one(buf, view.len, &pos, &r) < 0) {
            if (!PyErr_ExceptionMatches(PyExc_ValueError))
                break;  /* MemoryError and the like: raised as they are */
            PyObject *type, *tb;
            PyErr_Fetch(&type, &error, &tb);
            PyErr_NormalizeException(&type, &error, &tb);
            Py_XDECREF(type);
            Py_XDECREF(tb);
            break;
        }
        PyObject *item = cls->tp_alloc(cls, CONSUMER_RECORD_FIELDS);
        PyObject *offset = PyLong_FromLongLong((long long)((uint64_t)base_offset + (uint64_t)r.offset_delta));
        PyObject *timestamp = log_append ? Py_NewRef(shared_timestamp)
            : PyLong_FromLongLong((long long)((uint64_t)timestamp_base + (uint64_t)r.ts_delta));
        PyObject *key_size = PyLong_FromLongLong(r.key_size);
        PyObject *value_size = PyLong_FromLongLong(r.value_size);
        PyObject *header_size = PyLong_FromLongLong(r.header_size);
        PyObject *size = PyLong_FromLongLong(r.length);
        if (item == NULL || offset == NULL || timestamp == NULL || key_size == NULL || value_size == NULL
                || header_size == NULL || size == NULL) {
            Py_XDECREF(item);
            Py_XDECREF(offset);
            Py_XDECREF(timestamp);
            Py_XDECREF(key_size);
            Py_XDECREF(value_size);
            Py_XDECREF(header_size);
            Py_XDECREF(size);
            record_clear(&r);
            break;
        }
        PyTuple_SET_ITEM(item, 0, Py_NewRef(args[6]));
        PyTuple_SET_ITEM(item, 1, Py_NewRef(args[7]));
        PyTuple_SET_ITEM(item, 2, Py_NewRef(args[8]));
        PyTuple_SET_ITEM(item, 3, offset);
        PyTuple_SET_ITEM(item, 4, timestamp);
        PyTuple_SET_ITEM(item, 5, Py_NewRef(timestamp_type));
        PyTuple_SET_ITEM(item, 6, r.key);
        PyTuple_SET_ITEM(item, 7, r.value);
        PyTuple_SET_ITEM(item, 8, r.headers);
        PyTuple_SET_ITEM(item, 9, Py_NewRef(Py_None));
        PyTuple_SET_ITEM(item, 10, key_size);
        PyTuple_SET_ITEM(item, 11, value_size);
        PyTuple_SET_ITEM(item, 12, header_size);
        int failed = PyList_Append(records, item) < 0 || PyList_Append(sizes, size) < 0;
        Py_DECREF(item);
        Py_DECREF(size);
        if (failed)
            break;
    }
    Py_XDECREF(shared_timestamp);
    if (!PyErr_Occurred()) {
        PyObject *next = PyLong_FromSsize_t(pos);
        if (next != NULL) {
            result = PyTuple_Pack(4, records, sizes, next, error ? error : Py_None);
            Py_DECREF(next);
        }
    }
done:
    Py_XDECREF(timestamp_type);
    Py_XDECREF(records);
    Py_XDECREF(sizes);
    Py_XDECREF(error);
    PyBuffer_Release(&view);
    return result;
}

/* Java's Utils.murmur2 (Kafka's default partitioner), as kafka-python's and aiokafka's pure-Python
   murmur2: the unsigned 32-bit hash of the bytes. */
static PyObject *
murmur2(PyObject *Py_UNUSED(module), PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const unsigned char *data = (const unsigned char *)view.buf;
    Py_ssize_t length = view.len, tail = length & ~(Py_ssize_t)3;
    const uint32_t m = 0x5BD1E995u;
    uint32_t h = 0x9747B28Cu ^ (uint32_t)length;
    for (Py_ssize_t i = 0; i < tail; i += 4) {
        uint32_t k = (uint32_t)data[i] | ((uint32_t)data[i + 1] << 8) | ((uint32_t)data[i + 2] << 16)
                     | ((uint32_t)data[i + 3] << 24);
        k *= m;
        k ^= k >> 24;
        k *= m;
        h *= m;
        h ^= k;
    }
    switch (length & 3) {
    case 3:
        h ^= (uint32_t)data[tail + 2] << 16;
        /* fall through */
    case 2:
        h ^= (uint32_t)data[tail + 1] << 8;
        /* fall through */
    case 1:
        h ^= (uint32_t)data[tail];
        h *= m;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(h);
}

static PyMethodDef methods[] = {
    {"murmur2", (PyCFunction)murmur2, METH_O, "murmur2(data) -> Java's murmur2 of the bytes (unsigned 32 bits)"},
    {"read_record", (PyCFunction)(void (*)(void))read_record, METH_FASTCALL,
     "read_record(buffer, pos, base_offset, timestamp_base, log_append_time, record_class) -> (record, next_pos)"},
    {"read_records", (PyCFunction)(void (*)(void))read_records, METH_FASTCALL,
     "read_records(buffer, pos, count, base_offset, timestamp_base, log_append_time, topic, partition, "
     "leader_epoch, record_class) -> (records, sizes, next_pos, error)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "provstream.codec._kafka_c",
    "kafka-python's record reader (message format v2) in C: see provstream.codec.kafka_records.",
    -1,
    methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__kafka_c(void)
{
    return PyModule_Create(&module_def);
}
