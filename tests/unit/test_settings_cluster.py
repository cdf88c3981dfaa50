"""Cluster settings (issue 19): the bootstrap list, replication derived from the broker count, the checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from provstream.errors import ConfigError
from provstream.settings import Settings
from provstream.stack import instances
from provstream.topics import topic_specs


def test_one_broker_stays_the_default(tmp_path: Path) -> None:
    s = Settings.from_env({"PROVSTREAM_STACK_DIR": str(tmp_path)})
    assert (s.kafka_bootstrap, s.replication_factor, s.min_insync_replicas) == ("127.0.0.1:9092", 1, 1)
    assert Settings.from_env({"PROVSTREAM_STACK_DIR": str(tmp_path),
                              "PROVSTREAM_KAFKA_PORT": "22092"}).kafka_bootstrap == "127.0.0.1:22092"


def test_three_brokers_list_every_port_and_replicate_3_with_2_in_sync(tmp_path: Path) -> None:
    env = {"PROVSTREAM_STACK_DIR": str(tmp_path), "PROVSTREAM_KAFKA_BROKERS": "3"}
    assert Settings.from_env(env).kafka_bootstrap == "127.0.0.1:9092,127.0.0.1:9094,127.0.0.1:9096"
    s = Settings.from_env({**env, "PROVSTREAM_KAFKA_PORT": "22092"})
    assert s.kafka_bootstrap == "127.0.0.1:22092,127.0.0.1:22094,127.0.0.1:22096"
    assert (s.replication_factor, s.min_insync_replicas) == (3, 2)
    events = topic_specs(s)[0]
    assert events.replication_factor == 3 and events.topic_configs["min.insync.replicas"] == "2"
    assert events.topic_configs["retention.ms"] == "-1"


def test_the_stack_remembers_its_broker_count(tmp_path: Path) -> None:
    (tmp_path / "conf" / "kafka").mkdir(parents=True)
    (tmp_path / "conf" / "kafka" / "brokers").write_text("3\n")
    s = Settings.from_env({"PROVSTREAM_STACK_DIR": str(tmp_path), "PROVSTREAM_KAFKA_PORT": "22092"})
    assert s.kafka_brokers == 3 and s.kafka_bootstrap.count(",") == 2


def test_an_explicit_bootstrap_and_replication_win(tmp_path: Path) -> None:
    s = Settings.from_env({"PROVSTREAM_STACK_DIR": str(tmp_path), "PROVSTREAM_KAFKA_BROKERS": "3",
                           "PROVSTREAM_KAFKA_BOOTSTRAP": "k1:9092,k2:9092",
                           "PROVSTREAM_KAFKA_REPLICATION_FACTOR": "2", "PROVSTREAM_KAFKA_MIN_INSYNC_REPLICAS": "2"})
    assert (s.kafka_bootstrap, s.replication_factor, s.min_insync_replicas) == ("k1:9092,k2:9092", 2, 2)


@pytest.mark.parametrize(("var", "value"), [("PROVSTREAM_KAFKA_BROKERS", "0"), ("PROVSTREAM_WORKERS", "0"),
                                            ("PROVSTREAM_SINKS", "-1"),
                                            ("PROVSTREAM_KAFKA_REPLICATION_FACTOR", "-1"),
                                            ("PROVSTREAM_KAFKA_MIN_INSYNC_REPLICAS", "2")])
def test_bad_values_name_their_variable(tmp_path: Path, var: str, value: str) -> None:
    with pytest.raises(ConfigError, match=var):
        Settings.from_env({"PROVSTREAM_STACK_DIR": str(tmp_path), var: value})


def test_scale_out_names_each_process_and_gives_each_worker_its_own_datadir(tmp_path: Path) -> None:
    apps = instances(Settings(stack_dir=tmp_path, workers=2, sinks=3))
    assert [a.name for a in apps] == ["worker", "worker-2", "sink", "sink-2", "sink-3", "otlp"]
    assert "--datadir" not in apps[0].argv and apps[1].argv[-1].endswith("provstream-fold-2")
