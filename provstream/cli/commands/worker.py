"""``provstream worker``: the Faust fold worker, in the foreground.

Runs until SIGTERM or SIGINT and then exits 0 after committing what it
processed. Prints ``provstream worker ready: ...`` on stdout once it has its
partitions and has recovered its state table.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from provstream.settings import Settings

DEFAULT_BATCH = 2000  # the size chosen in BENCHMARKS.md, "Throughput, fifth pass"


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("worker", help="run the Faust fold worker (events -> PROV-O triples)",
                              description=__doc__)
    p.add_argument("--batch-size", type=int, default=DEFAULT_BATCH,
                   help=f"events folded per batch; 1 = per-event processing (default {DEFAULT_BATCH})")
    p.add_argument("--batch-ms", type=int, default=50,
                   help="longest a batch stays open while events keep coming; it also closes at once when no "
                        "further event is queued (default 50)")
    p.add_argument("--fold-in-process", action="store_true",
                   help="fold in the worker's own process even when PROVSTREAM_WORKER_FOLD_PROCESS=1 "
                        "asks for a helper process (the default folds in the worker's own process)")
    p.add_argument("--datadir", type=Path, default=None,
                   help="Faust data directory (default <stack dir>/faust/<app id>)")
    p.add_argument("--log-level", default="WARNING", choices=("DEBUG", "INFO", "WARNING", "ERROR"),
                   help="log level on stderr (default WARNING)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace, settings: Settings) -> int:
    from provstream.gc_tuning import tune_gc
    from provstream.streams.app import WorkerOptions
    from provstream.streams.runner import run as run_worker

    tune_gc(settings)

    options = WorkerOptions(batch_size=args.batch_size, batch_within=args.batch_ms / 1000, datadir=args.datadir,
                            fold_process=bool(settings.worker_fold_process) and not args.fold_in_process)
    return run_worker(settings, options, loglevel=args.log_level)
