"""The compiled parts; everything else is in pyproject.toml.

``provstream.codec._triples_c`` is optional: without a C compiler (or Python
headers) the build goes on without it and the pure-Python reader does its work.
"""

from setuptools import Extension, setup

setup(ext_modules=[
    Extension("provstream.codec._triples_c", ["provstream/codec/_triples_c.c"], optional=True),
])
