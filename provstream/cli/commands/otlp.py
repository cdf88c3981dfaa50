"""``provstream otlp``: the OTLP receiver (gRPC :4317, HTTP :4318) writing spans to Kafka, in the foreground.

Prints ``provstream otlp ready: ...`` on stdout once Kafka is reachable and both
ports listen; a request is answered only once its spans are on
``provstream.otlp_spans``. The worker turns them into provstream events
(``docs/integrations.md``). Stops on SIGTERM or SIGINT and exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from dataclasses import replace
from typing import Any

from provstream.settings import Settings

READY = "provstream otlp ready"


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("otlp", help="receive OpenTelemetry traces (OTLP gRPC/HTTP) onto the spans topic",
                              description=__doc__)
    p.add_argument("--host", default=None, help="address to listen on (default PROVSTREAM_OTLP_HOST, 127.0.0.1)")
    p.add_argument("--grpc-port", type=int, default=None, help="OTLP/gRPC port (default PROVSTREAM_OTLP_GRPC_PORT, "
                                                               "4317; 0 picks a free one)")
    p.add_argument("--http-port", type=int, default=None, help="OTLP/HTTP port (default PROVSTREAM_OTLP_HTTP_PORT, "
                                                               "4318; 0 picks a free one)")
    p.add_argument("-v", "--verbose", action="store_true", help="log each rejected request")
    p.set_defaults(func=run)


def run(args: argparse.Namespace, settings: Settings) -> int:
    from provstream.connectors.otlp import serve
    from provstream.gc_tuning import tune_gc

    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("aiokafka").setLevel(logging.ERROR)
    overrides = {k: v for k, v in (("otlp_host", args.host), ("otlp_grpc_port", args.grpc_port),
                                   ("otlp_http_port", args.http_port)) if v is not None}
    settings = replace(settings, **overrides)
    tune_gc(settings)

    async def main() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)

        def ready(receiver: Any) -> None:
            print(f"{READY}: grpc {settings.otlp_host}:{receiver.grpc_port}, http "
                  f"http://{settings.otlp_host}:{receiver.http_port}/v1/traces -> {settings.otlp_spans_topic}",
                  flush=True)

        stats = await serve(settings, stop, on_ready=ready)
        print(f"provstream otlp stopped: {stats.requests} requests, {stats.spans} spans, {stats.records} records, "
              f"{stats.rejected} rejected", file=sys.stderr, flush=True)
        return 0

    return asyncio.run(main())
