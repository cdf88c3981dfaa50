"""The compiled parts; everything else is in pyproject.toml.

``provstream.codec._triples_c`` is optional: without a C compiler (or Python
headers) the build goes on without it and the pure-Python reader does its work.
It includes ``_avro_c.h``, the Avro primitives the C readers share.
"""

from setuptools import Extension, setup

SHARED = ["provstream/codec/_avro_c.h"]

setup(ext_modules=[
    Extension("provstream.codec._triples_c", ["provstream/codec/_triples_c.c"], depends=SHARED, optional=True),
])
