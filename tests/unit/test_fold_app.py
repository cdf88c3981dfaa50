"""The Faust wiring, checked without a broker (building the app does no I/O)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from faust.types import Message

from provstream.cli.commands import worker as worker_cmd
from provstream.settings import Settings
from provstream.streams.app import TABLE, WorkerOptions, create_app, dead_letter_headers
from provstream.topics import ERROR_HEADER, SOURCE_HEADERS


def test_the_app_is_built_from_settings_only(tmp_path: Path) -> None:
    s = replace(Settings(), kafka_bootstrap="h1:9092,h2:9093", worker_app_id="fold-x", partitions=3,
                events_topic="ev", triples_topic="tr", events_dlq_topic="dlq", stack_dir=tmp_path)
    app = create_app(s, WorkerOptions(batch_size=10))
    conf = app.conf
    assert [str(u) for u in conf.broker] == ["kafka://h1:9092", "kafka://h2:9093"]
    assert conf.id == "fold-x" and str(conf.store) == "memory:"
    assert Path(conf.datadir) == tmp_path / "faust" / "fold-x"
    assert conf.topic_partitions == 3 and conf.topic_replication_factor == 1
    assert conf.processing_guarantee.value == "at_least_once" and not conf.web_enabled
    table = app.tables[TABLE]
    assert table.use_partitioner and table.partitions == 3
    assert table.changelog_topic.get_topic_name() == "fold-x-sessions-changelog"
    [agent] = [a for a in app.agents.values() if a.name.endswith("provstream-fold")]  # beside the OTLP agent
    assert {t for t in agent.channel.topics} == {"ev"}


def test_events_are_read_as_the_raw_bytes_on_the_wire(tmp_path: Path) -> None:
    app = create_app(replace(Settings(), events_topic="ev", stack_dir=tmp_path))
    [agent] = [a for a in app.agents.values() if a.name.endswith("provstream-fold")]  # beside the OTLP agent
    schema = agent.channel.schema
    def message(key: bytes | None, value: bytes | None) -> Message:
        return Message("ev", 0, 7, 0.0, 0, [], key, value, None)

    for m in (message(b"s-1", b"\xc3\x01body"), message(None, None)):
        assert schema.loads_key(app, m) == m.key and schema.loads_value(app, m) == m.value
        registry = app.serializers  # what key_serializer/value_serializer "raw" would give
        assert registry.loads_key(None, m.key, serializer="raw") == m.key
        assert registry.loads_value(None, m.value, serializer="raw") == m.value


def test_no_data_dir_in_the_working_directory(tmp_path: Path) -> None:
    app = create_app(replace(Settings(), stack_dir=tmp_path), WorkerOptions(datadir=tmp_path / "d"))
    assert Path(app.conf.datadir) == tmp_path / "d"


@dataclass
class _Msg:
    topic: str = "ev"
    partition: int = 2
    offset: int = 41
    headers: object = None


def test_dead_letter_headers_keep_the_original_ones_and_add_the_reason() -> None:
    headers = dead_letter_headers(_Msg(headers=[("trace", b"1")]), "DecodeError: wrong magic")
    assert headers == [("trace", b"1"), (ERROR_HEADER, b"DecodeError: wrong magic"),
                       (SOURCE_HEADERS[0], b"ev"), (SOURCE_HEADERS[1], b"2"), (SOURCE_HEADERS[2], b"41")]
    assert dead_letter_headers(_Msg(headers={"a": b"b"}), "x")[0] == ("a", b"b")


def test_worker_command_options() -> None:
    import argparse

    parser = argparse.ArgumentParser()
    worker_cmd.register(parser.add_subparsers())
    args = parser.parse_args(["worker", "--batch-size", "1", "--batch-ms", "20"])
    assert (args.batch_size, args.batch_ms, args.log_level, args.func) == (1, 20, "WARNING", worker_cmd.run)


def test_the_table_changelog_records_are_the_bytes_faust_would_send(tmp_path: Path) -> None:
    from provstream.core import vocab as v
    from provstream.core.fold import FoldState
    from provstream.streams.app import _Fold
    from provstream.streams.expiry import TOUCHED

    app = create_app(replace(Settings(), stack_dir=tmp_path))
    table = app.tables[TABLE]
    fold = _Fold(app=app, table=table, triples_topic="t", dlq_topic="d", max_bytes=1 << 20)
    states = {"s-1": FoldState(v.Mechanism.AGENT, "u", "c", (("i1", "é-1"),), 3).to_dict(),
              "s-2": FoldState(v.Mechanism.GRAPHRAG, "u", "c").to_dict()}
    records = fold._store(states)
    from faust.stores.memory import Store
    assert isinstance(table.data, Store)  # its delivery callback (set_persisted_offset) does nothing
    assert [key for key, _ in records] == [b"s-1", b"s-2"]
    for (key, value), (session, state) in zip(records, states.items(), strict=True):
        assert table.data[key] is state and TOUCHED in state
        assert key == table.changelog_topic.prepare_key(session.encode(), table.key_serializer)[0]
        assert value == table.changelog_topic.prepare_value(state, table.value_serializer)[0]
        assert table[key] == state
