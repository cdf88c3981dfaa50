"""Kafka's default partitioner with murmur2 in C (``provstream.topics``) against kafka-python's and aiokafka's."""

from __future__ import annotations

import os
import random
import subprocess
import sys

import pytest
from aiokafka.partitioner import DefaultPartitioner
from aiokafka.partitioner import murmur2 as aiokafka_murmur2
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from provstream import topics

NO_C = os.environ.get("PROVSTREAM_NO_C_EXTENSIONS", "") not in ("", "0")


def _keys() -> list[bytes]:
    rng = random.Random(23)
    keys = [b"", b"a", b"ab", b"abc", b"abcd", b"\xff" * 7, "ключ-сессии".encode()]
    keys += [bytes(rng.randrange(256) for _ in range(n)) for n in range(1, 80) for _ in range(5)]
    keys += [str(rng.getrandbits(128)).encode() for _ in range(200)]
    return keys


def test_murmur2_is_the_hash_kafka_python_and_aiokafka_compute() -> None:
    for key in _keys():
        assert topics.murmur2(key) == kafka_python_murmur2(key) == aiokafka_murmur2(key), key


def test_murmur2_is_the_c_one_unless_c_extensions_are_off() -> None:
    if NO_C:
        assert topics.murmur2 is kafka_python_murmur2
    else:
        from provstream.codec._kafka_c import murmur2

        assert topics.murmur2 is murmur2


def test_provstream_no_c_extensions_chooses_kafka_pythons_murmur2() -> None:
    code = ("from provstream import topics; from kafka.partitioner.default import murmur2; "
            "print(topics.murmur2 is murmur2)")
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PROVSTREAM_NO_C_EXTENSIONS": "1"},
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == "True"


def test_the_c_murmur2_takes_bytes_only() -> None:
    if NO_C:
        pytest.skip("C extensions are off")
    from provstream.codec._kafka_c import murmur2

    assert murmur2(bytearray(b"abc")) == murmur2(memoryview(b"abc")) == murmur2(b"abc")
    with pytest.raises(TypeError):
        murmur2("abc")  # type: ignore[arg-type]


@pytest.mark.parametrize("count", [1, 2, 3, 4, 12, 100])
def test_every_key_goes_where_aiokafkas_default_partitioner_puts_it(count: int) -> None:
    partitions = list(range(count))
    ours, theirs = topics.KeyPartitioner(), DefaultPartitioner()
    for key in _keys():
        expected = theirs(key, partitions, partitions)
        assert ours(key, partitions, partitions) == expected == topics.partition_for(key, count)


def test_a_record_without_a_key_goes_to_an_available_partition() -> None:
    partitioner = topics.KeyPartitioner()
    assert {partitioner(None, [0, 1, 2, 3], [2]) for _ in range(50)} == {2}
    assert {partitioner(None, [0, 1], []) for _ in range(200)} == {0, 1}


def test_the_worker_and_the_emitter_produce_with_it() -> None:
    from provstream.connectors.transport import producer_config
    from provstream.settings import Settings
    from provstream.streams.app import create_app

    settings = Settings()
    assert isinstance(producer_config(settings)["partitioner"], topics.KeyPartitioner)
    assert isinstance(create_app(settings).producer.partitioner, topics.KeyPartitioner)
