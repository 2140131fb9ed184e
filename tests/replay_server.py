"""A local HTTP server that replays scripted model API responses.

Tests point the real ``anthropic`` SDK at it (``base_url=server.url``), or the real ``openai``
SDK (``base_url=server.url + "/v1"``), so the whole client stack (HTTP, SSE decoding, SDK
errors) runs, offline and deterministically (DESIGN §7). Each ``POST`` to one of
:data:`API_PATHS` (Anthropic's ``/v1/messages``, OpenAI's ``/v1/responses`` and
``/v1/chat/completions``) takes the next queued reply:

* :class:`SseReply`: an SSE body (usually from ``tests/fixtures/anthropic_streams.py``) sent with
  chunked transfer encoding, in small chunks, optionally cut after some bytes, followed by extra
  bytes (an injected ``event: error``), closed abruptly (no final chunk), held open until the
  server closes (to test cancellation), or followed by the same bytes without end;
* :class:`JsonReply`: a JSON body with a status code and headers (a 400, 429, 500, 529 ...);
* :class:`DropReply`: raw bytes (possibly none, or half a status line), then the connection is
  closed without a complete response, at once or once the server closes (a client timeout).

Every request is recorded (:class:`RecordedRequest`: path, lower-cased headers, parsed JSON body)
so tests assert what was sent. Recorded streams of the corpus (``anthropic/`` in the folder
``corpus.corpus_dir()`` finds) are read in place, never copied, and only when a test asks for
one: importing this module never needs the corpus.

Use it as a context manager (``with ReplayServer() as server: ...``); closing joins every thread.
"""

from __future__ import annotations

import json
import socket
import threading
from collections import deque
from collections.abc import Iterable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal

from attrs import field, frozen

__all__ = [
    "API_PATHS",
    "DropReply",
    "JsonReply",
    "RecordedRequest",
    "ReplayServer",
    "Reply",
    "SseReply",
    "cut_after_event",
    "fixture_bytes",
    "sse_event",
]


API_PATHS = frozenset({"/v1/messages", "/v1/responses", "/v1/chat/completions"})
"""The paths a scripted reply answers; any other request is unexpected."""


def fixture_bytes(name: str) -> bytes:
    """The bytes of the corpus file ``anthropic/<name>``, exactly as stored.

    For tests marked ``corpus`` only; skips the calling test when there is no corpus.
    """
    import pytest
    from corpus import CORPUS_MISSING, corpus_dir

    folder = corpus_dir()
    if folder is None:
        pytest.skip(CORPUS_MISSING)
    return (folder / "anthropic" / name).read_bytes()


def sse_event(event: str, data: Mapping[str, Any]) -> bytes:
    """One SSE event as the API writes it: ``event:`` line, ``data:`` line, blank line."""
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def cut_after_event(body: bytes, event: str, occurrence: int = 1) -> bytes:
    """The prefix of an SSE ``body`` that ends just after its ``occurrence``-th ``event``.

    Raises:
        ValueError: the body has fewer such events.
    """
    seen = 0
    end = 0
    for raw in body.split(b"\n\n"):
        end += len(raw) + 2
        if raw.startswith(f"event: {event}\n".encode()):
            seen += 1
            if seen == occurrence:
                return body[:end]
    raise ValueError(f"only {seen} '{event}' events in body, wanted {occurrence}")


def _headers() -> Mapping[str, str]:
    return field(factory=dict, converter=dict)


@frozen(kw_only=True)
class SseReply:
    """A scripted SSE response.

    Args:
        body: the SSE bytes (see :func:`fixture_bytes`).
        status: HTTP status, 200 unless a test wants otherwise.
        headers: extra response headers.
        chunk_size: bytes per HTTP chunk, small so the client sees events split across reads.
        cut_after: send only the first ``cut_after`` bytes of ``body``; None sends all.
        append: bytes sent after the (cut) body, e.g. ``sse_event("error", ...)``.
        ending: "complete" ends the chunked body properly; "abrupt" closes the socket without
            the final chunk (a dropped connection).
        hold_after: after this many bytes of body, stop and wait until the server closes, then
            close abruptly. For cancellation tests.
        repeat: bytes sent again and again after the body, until the client goes away or the
            server closes (a server that streams for ever).
        repeat_every_s: the pause between two ``repeat`` sends (keep-alives every second).
    """

    body: bytes
    status: int = 200
    headers: Mapping[str, str] = _headers()
    chunk_size: int = 97
    cut_after: int | None = None
    append: bytes = b""
    ending: Literal["complete", "abrupt"] = "complete"
    hold_after: int | None = None
    repeat: bytes = b""
    repeat_every_s: float = 0.0

    @classmethod
    def fixture(cls, name: str, *, terminate_last_event: bool = True, **kwargs: Any) -> SseReply:
        """A reply replaying the corpus file ``anthropic/<name>`` (see :func:`fixture_bytes`).

        The API ends every SSE event with a blank line. Two fixtures copied from the SDK's own
        tests (``stream-refusal.sse``, ``stream-max-tokens-truncated-tool-json.sse``) lack the
        last one, since the SDK's test helper re-adds line ends; an SSE client must drop such an
        unterminated event (the ``message_stop``). So the terminator is added on the wire unless
        ``terminate_last_event=False``; the file itself is never changed.
        """
        body = fixture_bytes(name)
        if terminate_last_event:
            body = body.rstrip(b"\r\n") + b"\n\n"
        return cls(body=body, **kwargs)


@frozen(kw_only=True)
class JsonReply:
    """A scripted JSON response (typically an API error)."""

    status: int
    body: bytes
    headers: Mapping[str, str] = _headers()

    @classmethod
    def error(
        cls,
        status: int,
        error_type: str,
        message: str = "scripted error",
        headers: Mapping[str, str] | None = None,
    ) -> JsonReply:
        """An Anthropic-shaped error body: ``{"type":"error","error":{"type":..., ...}}``."""
        payload = {"type": "error", "error": {"type": error_type, "message": message}}
        return cls(status=status, body=json.dumps(payload).encode(), headers=headers or {})

    @classmethod
    def fixture(cls, name: str, status: int, headers: Mapping[str, str] | None = None) -> JsonReply:
        """A reply whose body is the corpus file ``anthropic/<name>``."""
        return cls(status=status, body=fixture_bytes(name), headers=headers or {})


@frozen(kw_only=True)
class DropReply:
    """No complete response: send ``data`` as it is (raw bytes, not an HTTP body), then close.

    Args:
        data: raw bytes written first, e.g. ``b""`` or ``b"HTTP/1.1 200 OK\r\n"``.
        hold: wait until the server closes before closing the connection, so the client sees
            nothing more for as long as it waits (its timeout fires); otherwise close at once.
    """

    data: bytes = b""
    hold: bool = False


Reply = SseReply | JsonReply | DropReply


@frozen(kw_only=True)
class RecordedRequest:
    """One request the server received. ``headers`` keys are lower-case."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: Any


class _Server(ThreadingHTTPServer):
    # Handler threads are joined on close (block_on_close), so no thread outlives a test.
    daemon_threads = False
    block_on_close = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.lock = threading.Lock()
        self.replies: deque[Reply] = deque()
        self.recorded: list[RecordedRequest] = []
        self.unexpected: list[RecordedRequest] = []
        self.released = threading.Event()

    def next_reply(self, request: RecordedRequest) -> Reply | None:
        with self.lock:
            self.recorded.append(request)
            if request.method == "POST" and request.path in API_PATHS and self.replies:
                return self.replies.popleft()
            self.unexpected.append(request)
            return None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 30  # seconds; a stuck client can never hold a handler thread forever
    server: _Server

    def do_POST(self) -> None:
        self.close_connection = True  # one request per connection keeps shutdown simple
        try:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length)
            try:
                body: Any = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode(errors="replace")
            request = RecordedRequest(
                method="POST",
                path=self.path,
                headers={k.lower(): v for k, v in self.headers.items()},
                body=body,
            )
            reply = self.server.next_reply(request)
            if reply is None:
                self._send_json(
                    JsonReply.error(404, "not_found_error", "replay server: no scripted reply")
                )
            elif isinstance(reply, JsonReply):
                self._send_json(reply)
            elif isinstance(reply, DropReply):
                self.wfile.write(reply.data)
                if reply.hold:
                    self.server.released.wait()
                self._close_abruptly()
            else:
                self._send_sse(reply)
        except OSError:
            # The client went away (cancellation, abrupt close): nothing left to do.
            pass

    def _send_json(self, reply: JsonReply) -> None:
        self.send_response(reply.status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(reply.body)))
        self.send_header("connection", "close")
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(reply.body)
        self.wfile.flush()

    def _send_sse(self, reply: SseReply) -> None:
        self.send_response(reply.status)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.send_header("connection", "close")
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        body = reply.body if reply.cut_after is None else reply.body[: reply.cut_after]
        if reply.hold_after is not None:
            self._write_chunks(body[: reply.hold_after], reply.chunk_size)
            self.server.released.wait()
            self._close_abruptly()
            return
        self._write_chunks(body + reply.append, reply.chunk_size)
        while reply.repeat and not self.server.released.is_set():
            self._write_chunks(reply.repeat, len(reply.repeat))  # OSError once the client left
            if reply.repeat_every_s:
                self.server.released.wait(reply.repeat_every_s)
        if reply.ending == "abrupt":
            self._close_abruptly()
            return
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _write_chunks(self, data: bytes, size: int) -> None:
        for start in range(0, len(data), size):
            piece = data[start : start + size]
            self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.flush()

    def _close_abruptly(self) -> None:
        self.wfile.flush()
        self.connection.shutdown(socket.SHUT_RDWR)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean; requests are recorded instead


class ReplayServer:
    """A replay server on ``127.0.0.1`` (a free port), serving queued replies in order.

    Requests with no reply left (or to another path) get a 404 ``not_found_error`` and are listed
    in :attr:`unexpected`, so a test can assert there were none.
    """

    def __init__(self, replies: Iterable[Reply] = ()) -> None:
        self._server = _Server()
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._started = False
        self.enqueue(*replies)

    @property
    def url(self) -> str:
        """Base URL for the SDK's ``base_url`` (``http://127.0.0.1:<port>``)."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def enqueue(self, *replies: Reply) -> None:
        """Queue replies, served to the next requests in order."""
        with self._server.lock:
            self._server.replies.extend(replies)

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, in order."""
        with self._server.lock:
            return list(self._server.recorded)

    @property
    def unexpected(self) -> list[RecordedRequest]:
        """Requests that found no scripted reply."""
        with self._server.lock:
            return list(self._server.unexpected)

    @property
    def pending(self) -> int:
        """Replies queued but not yet served."""
        with self._server.lock:
            return len(self._server.replies)

    def start(self) -> ReplayServer:
        """Start serving in a background thread; returns self."""
        if not self._started:
            self._thread.start()
            self._started = True
        return self

    def close(self) -> None:
        """Release held replies, stop serving, close the socket and join every thread."""
        self._server.released.set()
        if self._started:
            self._server.shutdown()
            self._thread.join()
        self._server.server_close()

    def __enter__(self) -> ReplayServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
