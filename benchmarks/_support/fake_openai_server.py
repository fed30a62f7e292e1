"""A scripted OpenAI-compatible server on 127.0.0.1 for tests and benchmarks (real HTTP, stdlib only).

    server = FakeOpenAIServer()            # port 0: the OS picks a free port
    server.url                             # "http://127.0.0.1:PORT/v1" -> judge.base_url
    server.push(rate_limited(1), server_error(), ...)   # consumed first, in order
    server.handler = fn                    # fn(body: dict) -> Reply, after the queue
    server.count, server.requests          # every POST received (parsed JSON bodies)
    server.close()

Without a script the default handler `smart_reply` answers like a careful judge:
decomposition = one claim per sentence of the answer (with its verbatim text);
extraction = per passage, the sentence sharing most words with the claim, quoted
verbatim, `supported` when it shares at least 60% of them. It reads the user message
in the format of tasks/judges/prompts/*.md (`<answer>…</answer>`, `<claim>…</claim>`,
`<passage id="N">…</passage>`).

Server flavours (`FakeOpenAIServer(accepts=...)`): which `response_format` types it
takes, and how it rejects the others — `"llama-cpp"` answers `json_schema` with HTTP 500
and a pydantic request-validation body (as llama-cpp-python's server does), `"400"` with
HTTP 400 (as a strict gateway does). `GET /v1/models` lists `models`.

Also runnable as a process (`python benchmarks/_support/fake_openai_server.py --delay 0.1`): prints
its URL and serves until killed — for benchmarks and manual runs.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # dict → JSON; bytes → sent as is
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds to sleep before answering (timeouts)


def completion(content: Any = None, *, finish_reason: str = "stop", refusal: str | None = None,
               prompt_tokens: int = 100, completion_tokens: int = 20, model: str = "fake-model") -> Reply:
    """A chat completion whose message content is `content` (a dict is JSON-encoded)."""
    text = json.dumps(content) if isinstance(content, (dict, list)) else content
    return Reply(body={
        "id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()), "model": model,
        "choices": [{"index": 0, "finish_reason": finish_reason, "logprobs": None,
                     "message": {"role": "assistant", "content": text, "refusal": refusal}}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    })


def rate_limited(retry_after: float | None = 1, header: str = "retry-after") -> Reply:
    headers = {header: str(retry_after)} if retry_after is not None else {}
    return Reply(status=429, headers=headers,
                 body={"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}})


def server_error(status: int = 500) -> Reply:
    return Reply(status=status, body={"error": {"message": "The server had an error", "type": "server_error"}})


def garbage() -> Reply:
    """A 200 whose message content is not JSON at all."""
    return completion("Sure! Here is my answer: the claim is supported, I think.")


def refusal(text: str = "I'm sorry, I can't help with that.") -> Reply:
    return completion(None, refusal=text)


def truncated() -> Reply:
    return completion('{"verdicts": [{"passage": 1, "verdict": "supp', finish_reason="length")


def slow(seconds: float, reply: Reply | None = None) -> Reply:
    r = reply or completion({"claims": []})
    return Reply(status=r.status, body=r.body, headers=r.headers, delay=seconds)


# -- the default handler: a plausible, honest judge -------------------------------------------

_WORD = re.compile(r"\w+")
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]?")
_PASSAGE = re.compile(r'<passage id="(\d+)">\n(.*?)\n</passage>', re.DOTALL)


def _tag(text: str, name: str) -> str:
    m = re.search(rf"<{name}>\n(.*?)\n</{name}>", text, re.DOTALL)
    return m.group(1) if m else ""


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.findall(text) if s.strip()]


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text)}


def schema_name(body: dict) -> str:
    """The response model's name: structured outputs (`json_schema.name`) or JSON mode
    with a schema attached (`schema.title`, llama-cpp-python style)."""
    fmt = body.get("response_format") or {}
    return fmt.get("json_schema", {}).get("name", "") or (fmt.get("schema") or {}).get("title", "")


def user_text(body: dict) -> str:
    users = [m for m in body.get("messages", []) if m.get("role") == "user"]
    return users[0]["content"] if users else ""


def decomposition_for(answer: str) -> dict:
    return {"claims": [{"claim": s, "answer_text": s} for s in _sentences(answer)]}


def extraction_for(claim: str, passages: list[tuple[int, str]], threshold: float = 0.6) -> dict:
    want = _words(claim)
    verdicts = []
    for number, text in passages:
        best, score = "", 0.0
        for s in _sentences(text):
            sc = len(want & _words(s)) / max(1, len(want))
            if sc > score:
                best, score = s, sc
        if score >= threshold:
            verdicts.append({"passage": number, "verdict": "supported", "quote": best,
                             "confidence": round(min(1.0, 0.5 + score / 2), 3), "reason": "states it"})
        else:
            verdicts.append({"passage": number, "verdict": "unsupported", "quote": "",
                             "confidence": 0.9, "reason": "not about the claim"})
    return {"verdicts": verdicts}


def passages_in(body: dict) -> list[tuple[int, str]]:
    return [(int(n), t) for n, t in _PASSAGE.findall(user_text(body))]


def smart_reply(body: dict) -> Reply:
    text = user_text(body)
    # Told the schema (structured outputs, JSON mode + schema), or only the prompt.
    kind = schema_name(body) or ("Extraction" if "<claim>" in text else "Decomposition" if "<answer>" in text else "")
    if kind == "Decomposition":
        return completion(decomposition_for(_tag(text, "answer")))
    if kind == "Extraction":
        return completion(extraction_for(_tag(text, "claim"), passages_in(body)))
    return server_error(400)


# What each flavour of server takes as response_format type ("" = none sent).
FLAVOURS: dict[str, frozenset[str]] = {
    "openai": frozenset({"json_schema", "json_object", ""}),
    "llama-cpp": frozenset({"json_object", "text", ""}),  # json_object may carry a schema
    "400": frozenset({"json_object", ""}),  # JSON mode only: a `schema` key is rejected too
    "prompt-only": frozenset({""}),
}


def rejection(flavour: str, body: dict) -> Reply | None:
    """How a server of `flavour` refuses the request's response_format, or None."""
    fmt = body.get("response_format") or {}
    kind = fmt.get("type", "")
    takes = FLAVOURS[flavour]
    if kind in takes and not (flavour == "400" and "schema" in fmt):
        return None
    if flavour == "llama-cpp":  # pydantic validation surfaced as a 500
        return Reply(status=500, body={"error": {
            "message": "[{'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), 'msg': "
                       "\"Input should be 'text' or 'json_object'\", 'input': 'json_schema'}]",
            "type": "internal_server_error"}})
    return Reply(status=400, body={"error": {"message": f"Invalid value for 'response_format': {kind!r} is "
                                             "not supported by this server", "type": "invalid_request_error",
                                             "param": "response_format"}})


# -- the server --------------------------------------------------------------------------------


class FakeOpenAIServer:
    def __init__(self, handler: Callable[[dict], Reply] | None = None, delay: float = 0.0,
                 accepts: str = "openai", models: tuple[str, ...] = ("fake-model",), port: int = 0) -> None:
        self.handler = handler or smart_reply
        self.delay = delay  # added to every reply (benchmarks)
        self.accepts = accepts  # a FLAVOURS key: which response_format types it takes
        self.models = models
        self.script: deque[Reply] = deque()
        self.requests: list[dict] = []
        self.headers: list[dict[str, str]] = []
        self._lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0  # most requests being answered at once (concurrency checks)
        outer = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # else a 40 ms delayed-ACK stall per reply

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    status, body = 200, {"object": "list", "data": [
                        {"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in outer.models]}
                else:
                    status, body = 404, {"error": {"message": "not found"}}
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = {}
                with outer._lock:
                    outer.requests.append(body)
                    outer.headers.append(dict(self.headers))
                    reply = outer.script.popleft() if outer.script else None
                    outer.in_flight += 1
                    outer.max_in_flight = max(outer.max_in_flight, outer.in_flight)
                try:
                    self._answer(body, reply)
                finally:
                    with outer._lock:
                        outer.in_flight -= 1

            def _answer(self, body: dict, reply: Reply | None) -> None:
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    reply = Reply(status=404, body={"error": {"message": "not found"}})
                elif reply is None:
                    reply = rejection(outer.accepts, body) or outer.handler(body)
                if reply.delay or outer.delay:
                    time.sleep(reply.delay + outer.delay)
                data = reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for k, v in reply.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client timed out
                    pass

        self._server = ThreadingHTTPServer(("127.0.0.1", port), _Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    @property
    def count(self) -> int:
        with self._lock:
            return len(self.requests)

    def push(self, *replies: Reply) -> None:
        with self._lock:
            self.script.extend(replies)

    def bodies_digests(self) -> list[str]:
        """sha256 of each request's messages: which logical calls were made, and how often."""
        with self._lock:
            return [hashlib.sha256(json.dumps(b.get("messages"), sort_keys=True).encode()).hexdigest()
                    for b in self.requests]

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self.headers.clear()
            self.script.clear()
            self.max_in_flight = 0

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--delay", type=float, default=0.0, help="seconds added to every reply")
    ap.add_argument("--accepts", choices=sorted(FLAVOURS), default="openai", help="which response_format it takes")
    ap.add_argument("--port", type=int, default=0, help="0: a free port (a restart on the same port keeps the URL)")
    args = ap.parse_args()
    srv = FakeOpenAIServer(delay=args.delay, accepts=args.accepts, port=args.port)
    print(srv.url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        srv.close()
