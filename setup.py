"""The compiled parts; everything else is in pyproject.toml.

The C readers ``provstream.codec._triples_c`` and ``provstream.codec._events_c``,
the Kafka record reader ``provstream.codec._kafka_c``, the sink's C rows
``provstream.connectors.neo4j._rows_c``, the bulk rebuild's CSV lines
``provstream.connectors.neo4j._csv_c`` and its image write
``provstream.connectors.neo4j._image_c`` are optional: without a C compiler (or
Python headers) the build goes on without them and the pure-Python triples
reader, fastavro, kafka-python's own record reader, the Python rows, the csv
module and the Python image fold do their work. The Avro ones include
``_avro_c.h``, the primitives and value checks they share.
"""

from setuptools import Extension, setup

SHARED = ["provstream/codec/_avro_c.h"]

setup(ext_modules=[
    Extension("provstream.codec._triples_c", ["provstream/codec/_triples_c.c"], depends=SHARED, optional=True),
    Extension("provstream.codec._events_c", ["provstream/codec/_events_c.c"], depends=SHARED, optional=True),
    Extension("provstream.codec._kafka_c", ["provstream/codec/_kafka_c.c"], optional=True),
    Extension("provstream.connectors.neo4j._rows_c", ["connectors/neo4j/_rows_c.c"], depends=SHARED,
              include_dirs=["provstream/codec"], optional=True),
    Extension("provstream.connectors.neo4j._csv_c", ["connectors/neo4j/_csv_c.c"], optional=True),
    Extension("provstream.connectors.neo4j._image_c", ["connectors/neo4j/_image_c.c"], optional=True),
])
