"""The HTTP side of ``concur serve``: routes, limits and checks, and the one thread that solves.

How it is designed, and why
---------------------------
The standard library's :class:`http.server.ThreadingHTTPServer` reads requests on one thread
each, but no request thread solves: it hands the question to the :class:`SolveWorker` and waits
for the answer. The worker runs questions one at a time on the thread that calls
:meth:`SolveWorker.run` -- the main thread under ``concur serve`` -- because the solve budget
(:mod:`concur.solver.budget`) can interrupt sympy only there, and because the solver's caches
were written for one question at a time. A slow question therefore delays the next; none runs
past the budget. At most :data:`MAX_WAITING` questions wait for it (the next is refused at once,
503), and a question whose request stopped waiting (:data:`ANSWER_SECONDS`) is cancelled, never
run: a flood of requests leaves no queue of work behind it.

Every request is checked before anything is solved:

* **Host**: on loopback the ``Host`` header must name this server (``127.0.0.1``, ``localhost``,
  ``[::1]`` and the port), so a page on another site cannot reach it through DNS rebinding; on an
  address given with ``--host`` any name may (the machine's names are not known here);
* **Origin**: a ``POST`` (everything that solves) must carry the ``Origin`` of the page this
  server serves under that Host; a cross-site fetch (``Sec-Fetch-Site: cross-site``) is refused
  whatever its method;
* **size**: a body over :data:`MAX_BODY` bytes (or without ``Content-Length``) and a target over
  :data:`MAX_TARGET` characters are refused before they are read; a connection idle for
  :data:`IDLE_SECONDS` is closed;
* **names**: packs only by name, from the shipped set and ``--pack-path``
  (:func:`concur.cli.web.questions.read_question`); static files only from :data:`ASSETS`.

An answer is JSON; a refusal is ``{"error": {"line": "error: ...", "field": NAME | null, ...}}``
with the CLI's own error line, and a bug is one line too (its traceback goes to the terminal that
runs the server, never to the page). Every response forbids framing and caching and carries a
content security policy that allows nothing outside this server: the page loads no external URL.

Shutdown is one state: :meth:`ConcurServer.close` stops accepting, fails every question still
queued with "the server is shutting down" and ends the worker; it is idempotent.
"""

from __future__ import annotations

import ipaddress
import json
import queue
import socket
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, urlsplit

from ...errors import ConcurError, UsageError
from . import questions

__all__ = [
    "ASSETS",
    "IDLE_SECONDS",
    "MAX_BODY",
    "MAX_TARGET",
    "MAX_WAITING",
    "ConcurServer",
    "SolveWorker",
    "is_loopback",
    "make_server",
    "running",
]

MAX_BODY = 64 * 1024  # bytes of one request body
MAX_TARGET = 8 * 1024  # characters of one request target (path and query)
IDLE_SECONDS = 30.0  # a connection that sends nothing for this long is closed
ANSWER_SECONDS = 120.0  # a request thread waits this long for the worker (queued questions included)
MAX_WAITING = 64  # questions queued for the worker; the next is refused at once (503), not queued

# file name -> content type: the only files served
ASSETS = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
}
_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data: blob:; object-src 'none'; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


class _Shutdown(Exception):
    """A queued question the server will not answer: it is shutting down."""


class _Busy(Exception):
    """A question refused because :data:`MAX_WAITING` are already queued."""


class SolveWorker:
    """Runs submitted calls one at a time, in order, on the thread that calls :meth:`run`."""

    def __init__(self) -> None:
        # guards nothing by itself: the queue is the only shared state; None is the stop sentinel
        self._jobs: queue.Queue[tuple[Callable[[], Any], Future[Any]] | None] = queue.Queue()
        self._stopped = threading.Event()  # set once by stop(); submit() refuses afterwards

    def submit(self, fn: Callable[[], Any]) -> Future[Any]:
        """Queue ``fn``; its future holds the result, or the exception it raised (``_Busy`` at once when
        :data:`MAX_WAITING` calls are queued). A future cancelled while queued is never run."""
        future: Future[Any] = Future()
        if self._stopped.is_set():
            future.set_exception(_Shutdown())
            return future
        if self._jobs.qsize() >= MAX_WAITING:  # a flood of questions waits in no unbounded queue
            future.set_exception(_Busy())
            return future
        self._jobs.put((fn, future))
        return future

    def run(self) -> None:
        """Answer queued calls until :meth:`stop`; then fail whatever is still queued."""
        while True:
            job = self._jobs.get()
            if job is None:
                break
            fn, future = job
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn())
            except BaseException as exc:  # the request thread reports it; Ctrl-C still stops run()
                future.set_exception(exc)
                if not isinstance(exc, Exception):
                    raise
        self._drain()

    def stop(self) -> None:
        """Idempotent: refuse new calls and end :meth:`run` after the call in progress."""
        if not self._stopped.is_set():
            self._stopped.set()
            self._jobs.put(None)

    def _drain(self) -> None:
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                return
            if job is not None:
                job[1].set_exception(_Shutdown())


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (``127.0.0.1``, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class ConcurServer(ThreadingHTTPServer):
    """The HTTP server: request threads, the solve worker, and the names and origins it answers to."""

    daemon_threads = True
    block_on_close = False

    def __init__(self, host: str, port: int) -> None:
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        super().__init__((host, port), _Handler)
        self.worker = SolveWorker()
        self.host = host
        self.port = int(self.server_address[1])
        names = {host, f"[{host}]"} if ":" in host else {host}
        if is_loopback(host):
            names |= {"localhost", "127.0.0.1", "[::1]"}
        # the Host names answered on loopback (None: any -- a --host address is reached by names we cannot know)
        self.hosts: set[str] | None = {f"{name}:{self.port}" for name in names} if is_loopback(host) else None
        self._closed = threading.Event()

    @property
    def url(self) -> str:
        shown = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{shown}:{self.port}/"

    def close(self) -> None:
        """Idempotent: stop serving, fail queued questions, stop the worker, close the socket."""
        if self._closed.is_set():
            return
        self._closed.set()
        self.worker.stop()
        self.shutdown()
        self.server_close()


def make_server(host: str = "127.0.0.1", port: int = 0) -> ConcurServer:
    """A bound server (port 0: one the OS picks); UsageError when the address cannot be bound."""
    try:
        return ConcurServer(host, port)
    except OSError as exc:
        raise UsageError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}", hint="pick another --port, or --port 0"
        ) from None


@contextmanager
def running(host: str = "127.0.0.1", port: int = 0) -> Iterator[ConcurServer]:
    """A server answering in background threads for the block (tests, ``concur bench serve``)."""
    server = make_server(host, port)
    threads = [
        threading.Thread(target=server.serve_forever, name="concur-serve-http", daemon=True),
        threading.Thread(target=server.worker.run, name="concur-serve-solve", daemon=True),
    ]
    for t in threads:
        t.start()
    try:
        yield server
    finally:
        server.close()
        for t in threads:
            t.join(timeout=60)


def asset(name: str) -> bytes:
    """A file shipped in ``concur/cli/web/static`` (only :data:`ASSETS` names)."""
    return (resources.files("concur.cli.web") / "static" / name).read_bytes()


class _Refused(Exception):
    def __init__(self, status: HTTPStatus, line: str) -> None:
        super().__init__(line)
        self.status = status
        self.line = line


class _Handler(BaseHTTPRequestHandler):
    server: ConcurServer
    timeout = IDLE_SECONDS
    disable_nagle_algorithm = True  # headers and body are two writes: Nagle + delayed ACK would add 40 ms
    protocol_version = "HTTP/1.1"
    server_version = "concur"
    sys_version = ""

    # -- plumbing ----------------------------------------------------------------------------
    def handle(self) -> None:
        """Serve the connection; a browser that went away (a reload mid-answer) ends it quietly."""
        try:
            super().handle()
        except (ConnectionError, TimeoutError):
            self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: a local tool's terminal is not an access log."""

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """The stdlib's own refusals (a malformed request line, an over-long header) as one line."""
        try:
            status = HTTPStatus(code)
            line = f"error: {message or status.phrase}"
        except ValueError:
            status, line = HTTPStatus.BAD_REQUEST, f"error: {message or 'bad request'}"
        self.close_connection = True
        self.request_version = "HTTP/1.1"  # a status line and headers even for a request line it could not read
        self._json(status, {"error": {"line": line, "field": None}})

    def _send(self, status: HTTPStatus, body: bytes, content_type: str, extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for key, value in {**_HEADERS, **(extra or {})}.items():
            self.send_header(key, value)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: HTTPStatus, doc: Any) -> None:
        body = questions.json_text(doc).encode()
        self._send(status, body, "application/json; charset=utf-8")

    # -- checks ------------------------------------------------------------------------------
    def _check(self) -> str:
        """The request's path after the Host, Origin and size checks (raises _Refused)."""
        if len(self.path) > MAX_TARGET:
            raise _Refused(HTTPStatus.REQUEST_URI_TOO_LONG, f"error: the address is over {MAX_TARGET} characters")
        host = (self.headers.get("Host") or "").lower()
        if not host or (self.server.hosts is not None and host not in self.server.hosts):
            raise _Refused(HTTPStatus.MISDIRECTED_REQUEST, "error: this server answers only to its own address")
        if self.headers.get("Sec-Fetch-Site", "same-origin") not in ("same-origin", "none"):
            raise _Refused(HTTPStatus.FORBIDDEN, "error: cross-site requests are refused")
        if self.command == "POST" and (self.headers.get("Origin") or "").lower() != f"http://{host}":
            raise _Refused(
                HTTPStatus.FORBIDDEN, "error: a request that solves must come from this server's page (Origin)"
            )
        return urlsplit(self.path).path

    def _body(self) -> Any:
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit():
            raise _Refused(HTTPStatus.LENGTH_REQUIRED, "error: a request body needs a Content-Length")
        if int(length) > MAX_BODY:
            raise _Refused(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"error: the request is over {MAX_BODY} bytes")
        raw = self.rfile.read(int(length))
        try:
            return json.loads(raw)
        except (ValueError, RecursionError):
            raise _Refused(HTTPStatus.BAD_REQUEST, "error: the request body is not JSON") from None

    # -- routes ------------------------------------------------------------------------------
    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        self._handle(self._get)

    def do_POST(self) -> None:
        self._handle(self._post)

    def _handle(self, route: Callable[[str], None]) -> None:
        q: questions.Question | None = None
        try:
            path = self._check()
            route(path)
        except _Refused as exc:
            if exc.status in (HTTPStatus.REQUEST_ENTITY_TOO_LARGE, HTTPStatus.LENGTH_REQUIRED):
                self.close_connection = True  # the unread body must not be taken for the next request
            self._json(exc.status, {"error": {"line": exc.line, "field": None}})
        except _Asked as asked:
            q = asked.question
            self._answer_failure(asked.__cause__, q)
        except ConcurError as exc:
            self._json(HTTPStatus.BAD_REQUEST, questions.answer_error(exc, q))
        except (ConnectionError, TimeoutError):
            raise  # the browser went away: handle() ends the connection quietly
        except Exception as exc:  # a bug outside a question: one line too, the details on the terminal
            self._answer_failure(exc, questions.Question((), (), ()))

    def _answer_failure(self, exc: BaseException | None, q: questions.Question) -> None:
        if isinstance(exc, ConcurError):
            self._json(HTTPStatus.BAD_REQUEST, questions.answer_error(exc, q))
        elif isinstance(exc, TimeoutError):
            line = f"error: no answer within {ANSWER_SECONDS:g} s: the server is busy with other questions; ask again"
            self._json(HTTPStatus.SERVICE_UNAVAILABLE, {"error": {"line": line, "field": None}})
        elif isinstance(exc, _Busy):
            line = f"error: {MAX_WAITING} questions are already waiting: the server is busy; ask again"
            self._json(HTTPStatus.SERVICE_UNAVAILABLE, {"error": {"line": line, "field": None}})
        elif isinstance(exc, (_Shutdown, KeyboardInterrupt)):  # Ctrl-C stopped the question: the server is stopping
            self._json(
                HTTPStatus.SERVICE_UNAVAILABLE, {"error": {"line": "error: the server is shutting down", "field": None}}
            )
        else:
            detail = "".join(traceback.format_exception(exc)) if exc is not None else "no answer"
            print(f"concur serve: internal error (a bug in concur):\n{detail}", file=sys.stderr)
            line = f"error: internal error ({type(exc).__name__}): a bug in concur; the terminal running concur serve has the details"
            self._json(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": {"line": line, "field": None}})

    def _get(self, path: str) -> None:
        if path == "/":
            path = "/index.html"
        name = path.removeprefix("/static/") if path.startswith("/static/") else path.lstrip("/")
        if name in ASSETS:
            self._send(HTTPStatus.OK, asset(name), ASSETS[name])
        elif path == "/api/meta":
            query = parse_qs(urlsplit(self.path).query)
            packs = tuple(p for v in query.get("packs", ["llm_fleet"]) for p in v.split(",") if p)
            self._json(HTTPStatus.OK, self._ask(lambda: questions.meta(packs or ("llm_fleet",)), None))
        elif path == "/favicon.ico":
            self._send(HTTPStatus.NO_CONTENT, b"", "text/plain")
        else:
            raise _Refused(HTTPStatus.NOT_FOUND, f"error: nothing at {path[:200]}")

    def _post(self, path: str) -> None:
        body = self._body()
        if path == "/api/solve":
            q = questions.read_question(body)
            self._json(HTTPStatus.OK, self._ask(lambda: questions.solve(q), q))
        elif path == "/api/plan":
            q = questions.read_question(body, need_find=False)
            self._json(HTTPStatus.OK, self._ask(lambda: questions.plan(q), q))
        elif path == "/api/curve":
            q, over, log = questions.read_curve(body)
            self._json(HTTPStatus.OK, self._ask(lambda: questions.curve(q, over, log), q))
        elif path.startswith("/api/download/"):
            self._download(path.removeprefix("/api/download/"), body)
        else:
            raise _Refused(HTTPStatus.NOT_FOUND, f"error: nothing at {path[:200]}")

    def _download(self, name: str, body: Any) -> None:
        kinds: dict[str, tuple[bool, Callable[[questions.Question], Any], str]] = {
            "answer.xlsx": (
                True,
                questions.workbook,
                "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
            ),
            "answer.csv": (True, questions.solve_csv, "text/csv; charset=utf-8"),
            "answer.json": (True, questions.solve, "application/json; charset=utf-8"),
            "plan.csv": (False, questions.plan_csv, "text/csv; charset=utf-8"),
            "plan.json": (False, questions.plan, "application/json; charset=utf-8"),
        }
        if name not in kinds:
            raise _Refused(HTTPStatus.NOT_FOUND, f"error: no download called {name[:80]}")
        need_find, make, content_type = kinds[name]
        q = questions.read_question(body, need_find=need_find)
        data = self._ask(lambda: make(q), q)
        raw = (
            data
            if isinstance(data, bytes)
            else (questions.json_text(data, 2) if isinstance(data, dict) else data).encode()
        )
        self._send(HTTPStatus.OK, raw, content_type, {"Content-Disposition": f'attachment; filename="{name}"'})

    def _ask(self, fn: Callable[[], Any], q: questions.Question | None) -> Any:
        """``fn()`` run by the worker; its failure re-raised as :class:`_Asked` (carrying ``q``)."""
        future = self.server.worker.submit(fn)
        try:
            return future.result(timeout=ANSWER_SECONDS)
        except BaseException as exc:
            future.cancel()  # nobody waits for it any more: a question still queued is never run
            if q is None and isinstance(exc, ConcurError):
                raise
            raise _Asked(q or questions.Question((), (), ())) from exc


class _Asked(Exception):
    """A question whose answer failed; ``__cause__`` is why."""

    def __init__(self, question: questions.Question) -> None:
        super().__init__("the question failed")
        self.question = question
