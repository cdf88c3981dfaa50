"""A scripted OpenAI-compatible chat endpoint for tests (stdlib only).

    with FakeLlm(["Thought: ...\\nAction: search\\nAction Input: {...}", 500]) as llm:
        settings = replace(settings, llm_url=llm.url)

Each ``POST /v1/chat/completions`` answers with the next scripted reply: a
string becomes the assistant message of a chat completion; an int is sent as
that HTTP error status. Requests (parsed JSON bodies) are kept in
:attr:`requests`. Bound to 127.0.0.1 on a free port; the server thread stops on exit.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class FakeLlm:
    def __init__(self, replies: Sequence[str | int]) -> None:
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-llm", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> FakeLlm:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def _next(self, body: dict[str, Any], headers: dict[str, str]) -> str | int:
        with self._lock:
            self.requests.append(body)
            self.headers.append(headers)
            return self.replies.pop(0) if self.replies else 503

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                if self.path.rstrip("/") != "/v1/chat/completions":
                    return self._send(404, {"error": {"message": f"no route {self.path}"}})
                reply = fake._next(body, dict(self.headers))
                if isinstance(reply, int):
                    return self._send(reply, {"error": {"message": f"scripted failure {reply}"}})
                self._send(200, {
                    "id": f"chatcmpl-{len(fake.requests)}", "object": "chat.completion",
                    "model": body.get("model", ""),
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": reply}}],
                })

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - silence the server log
                return None

        return Handler
