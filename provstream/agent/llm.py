"""The LLM planner: any OpenAI-compatible chat endpoint, spoken to with urllib.

``POST {llm_url}/chat/completions`` with ``{"model" (if set), "messages",
"temperature": 0, "stop": ["\\nObservation:"]}`` and ``Authorization: Bearer {llm_api_key}`` when
a key is set. Every failure (HTTP status, unreachable host, a body that is not
a chat completion) becomes :class:`LlmError` naming the endpoint.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from provstream.agent.react import Decision, Turn, parse_reply, scratchpad, system_prompt
from provstream.errors import LlmError

TIMEOUT_S = 120.0
STOP = ["\nObservation:"]


@dataclass(frozen=True)
class ChatClient:
    url: str
    model: str = ""
    api_key: str = field(default="", repr=False)
    timeout: float = TIMEOUT_S

    @property
    def endpoint(self) -> str:
        return self.url.rstrip("/") + "/chat/completions"

    def complete(self, messages: Sequence[Mapping[str, str]]) -> str:
        """The assistant message content of one chat completion."""
        body: dict[str, Any] = {"messages": list(messages), "temperature": 0, "stop": STOP}
        if self.model:
            body["model"] = self.model
        request = urllib.request.Request(self.endpoint, data=json.dumps(body).encode("utf-8"),
                                         headers=self._headers(), method="POST")
        return _content(self._post(request), self.endpoint)

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    def _post(self, request: urllib.request.Request) -> bytes:
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return response.read()  # type: ignore[no-any-return]
        except urllib.error.HTTPError as exc:
            detail = exc.read(300).decode("utf-8", "replace").strip()
            raise LlmError(f"HTTP {exc.code} from {self.endpoint}: {detail or exc.reason}") from exc
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise LlmError(f"cannot reach {self.endpoint}: {reason}") from exc


def _content(raw: bytes, endpoint: str) -> str:
    try:
        content = json.loads(raw)["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise LlmError(f"{endpoint} did not answer with a chat completion: {raw[:200]!r}") from exc
    if not isinstance(content, str):
        raise LlmError(f"{endpoint} answered with no message content")
    return content


class LlmPlanner:
    """Asks the model for the next ReAct step, given the question and the steps so far."""

    label = "LLM"

    def __init__(self, client: ChatClient, tools: Sequence[tuple[str, str, str]]) -> None:
        self.client = client
        self._system = system_prompt(tools)
        self._arguments = {name: argument for name, argument, _ in tools}

    def decide(self, question: str, history: Sequence[Turn]) -> Decision:
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": self._system},
            {"role": "user", "content": scratchpad(question, history)},
        ]
        return parse_reply(self.client.complete(messages), self._arguments)
