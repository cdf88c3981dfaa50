"""The compiled parts; everything else is in pyproject.toml.

The C readers ``provstream.codec._triples_c`` and ``provstream.codec._events_c``
are optional: without a C compiler (or Python headers) the build goes on without
them and the pure-Python triples reader and fastavro do their work. Both
include ``_avro_c.h``, the Avro primitives they share.
"""

from setuptools import Extension, setup

SHARED = ["provstream/codec/_avro_c.h"]

setup(ext_modules=[
    Extension("provstream.codec._triples_c", ["provstream/codec/_triples_c.c"], depends=SHARED, optional=True),
    Extension("provstream.codec._events_c", ["provstream/codec/_events_c.c"], depends=SHARED, optional=True),
])
