/*
 * One Kafka record (message format v2) read in C, for kafka-python's
 * DefaultRecordBatch (provstream/codec/kafka_records.py installs it).
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
    const unsigned char *buf = view.buf;
    Py_ssize_t len = view.len;
    PyObject *key = NULL, *value = NULL, *headers = NULL, *record = NULL, *result = NULL;
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    long long base_offset = PyLong_AsLongLong(args[2]);
    long long timestamp_base = PyLong_AsLongLong(args[3]);
    int log_append = PyObject_IsTrue(args[4]);
    if (PyErr_Occurred() || log_append < 0)
        goto done;
    if (pos < 0 || pos > len) {
        PyErr_SetString(PyExc_ValueError, "read position outside the batch");
        goto done;
    }
    int64_t length, attributes, ts_delta, offset_delta, key_len, value_len;
    if (read_varint(buf, len, &pos, &length) < 0)
        goto done;
    Py_ssize_t start = pos;
    if (read_varint(buf, len, &pos, &attributes) < 0 || read_varint(buf, len, &pos, &ts_delta) < 0
            || read_varint(buf, len, &pos, &offset_delta) < 0 || read_varint(buf, len, &pos, &key_len) < 0
            || (key = read_bytes(buf, len, &pos, key_len)) == NULL || read_varint(buf, len, &pos, &value_len) < 0
            || (value = read_bytes(buf, len, &pos, value_len)) == NULL
            || (headers = read_headers(buf, len, &pos)) == NULL)
        goto done;
    if (pos - start != length) {
        PyErr_Format(PyExc_ValueError, "Invalid record size: expected to read %lld bytes in record payload, "
                     "but instead read %zd", (long long)length, pos - start);
        goto done;
    }
    PyObject *fields[7] = {NULL};
    fields[0] = PyLong_FromLongLong(length);
    fields[1] = PyLong_FromLongLong((long long)((uint64_t)base_offset + (uint64_t)offset_delta));
    fields[2] = PyLong_FromLongLong(log_append ? timestamp_base
                                                : (long long)((uint64_t)timestamp_base + (uint64_t)ts_delta));
    fields[3] = PyLong_FromLong(log_append ? 1 : 0);
    fields[4] = key;
    fields[5] = value;
    fields[6] = headers;
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
    Py_XDECREF(key);
    Py_XDECREF(value);
    Py_XDECREF(headers);
    Py_XDECREF(record);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"read_record", (PyCFunction)(void (*)(void))read_record, METH_FASTCALL,
     "read_record(buffer, pos, base_offset, timestamp_base, log_append_time, record_class) -> (record, next_pos)"},
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
