"""Crashes and rebalances of the pipeline's processes while sessions stream: every step lands exactly once."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from faults_support import Pipeline, assert_exactly_once, run_case

from provstream.settings import Settings

pytestmark = pytest.mark.faults


def _nothing(_p: Pipeline) -> None:
    pass


def test_sigkill_of_the_worker(isolated: Settings, unique: str, logs: Path, results_file: Path) -> None:
    def kill(p: Pipeline) -> None:
        [worker] = p.workers
        worker.kill()
        p.replace(worker).wait_ready()

    outcome = run_case("SIGKILL of the worker", isolated, logs, f"kw{unique}", kill, _nothing,
                       results_file=results_file)
    assert_exactly_once(outcome)


def test_sigkill_of_the_sink(isolated: Settings, unique: str, logs: Path, results_file: Path) -> None:
    def kill(p: Pipeline) -> None:
        [sink] = p.sinks
        sink.kill()
        p.replace(sink).wait_ready()

    outcome = run_case("SIGKILL of the sink", isolated, logs, f"ks{unique}", kill, _nothing,
                       results_file=results_file)
    assert_exactly_once(outcome)


@pytest.mark.parametrize("role", ["worker", "sink"])
def test_a_process_added_and_removed_mid_stream(role: str, isolated: Settings, unique: str, logs: Path,
                                                results_file: Path) -> None:
    """A second worker (or sink) joins the consumer group, works a while, and leaves (SIGTERM): two rebalances."""

    def add(p: Pipeline) -> None:
        extra = p.add_worker() if role == "worker" else p.add_sink()
        extra.wait_ready()
        time.sleep(8.0)

    def remove(p: Pipeline) -> None:
        extra = (p.workers if role == "worker" else p.sinks)[-1]
        assert extra.stop() == 0, f"the added {role} did not stop cleanly:\n{extra.tail()}"
        (p.workers if role == "worker" else p.sinks).remove(extra)

    outcome = run_case(f"a {role} added and removed mid-stream (rebalance)", isolated, logs, f"rb{role[0]}{unique}",
                       add, remove, results_file=results_file)
    assert_exactly_once(outcome)
