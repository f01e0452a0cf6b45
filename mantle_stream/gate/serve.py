"""Running a gate: the proxy served by uvicorn, the judge's timers, the end.

An edge module (anyio, uvicorn, httptools: the ``mantle_stream[gate]`` extra,
imported only when a gate runs). :class:`Gate` binds the listening socket
first (so its address, a free port for port 0, is known and printed before
the first request), serves :class:`~mantle_stream.gate.proxy.GateProxy` on it
in the current event loop, and keeps the time for the judge: the event rate,
new run files in the results folder, and ``linger`` (the gate ends that
long after the last run's tracker was read, once no run is open). Signals
are the caller's: :meth:`Gate.stop` ends it (uvicorn's own signal handling
is turned off, so Ctrl-C and SIGTERM end the gate like any other command).
"""

from __future__ import annotations

import contextlib
import socket
from collections import deque
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

import anyio

from mantle_stream.core.errors import UsageError
from mantle_stream.core.recorded import load_results
from mantle_stream.core.verdicts import Decision
from mantle_stream.feeds import open_feed
from mantle_stream.gate.proxy import GateOptions, GateProxy
from mantle_stream.gate.runs import GateJudge
from mantle_stream.gate.upstream import Upstream
from mantle_stream.gate.wire import gate_protocol
from mantle_stream.runner import Runner, RunOutcome

__all__ = ["INSTALL_HINT", "Gate", "listening_socket", "parse_listen", "quiet_server"]

#: What to install when the gate's libraries are missing.
INSTALL_HINT = 'pip install "mantle_stream[gate]"'
#: Seconds between two looks at the results folder.
RESULTS_INTERVAL = 1.0


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) as a pair; a usage error otherwise."""
    host, sep, port = text.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise UsageError(f"--listen `{text}`: expected HOST:PORT, such as 127.0.0.1:5006")
    return host, int(port)


def listening_socket(host: str, port: int) -> socket.socket:
    """A TCP socket listening on ``host:port`` (port 0: a free one), ready for uvicorn."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Inherited by every accepted connection: a reply's headers and its first
        # NDJSON line go out at once, not 40 ms apart (Nagle's algorithm meeting
        # the simulator's delayed acknowledgement).
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise UsageError(f"--listen {host}:{port}: {exc.strerror or exc}") from None
    sock.setblocking(False)
    return sock


def quiet_server(config: Any) -> Any:
    """A uvicorn server that leaves signals to its caller (uvicorn's own handlers would
    re-raise Ctrl-C once it stopped, past the code that writes the reports)."""
    import uvicorn

    class _Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    return _Server(config)


class Gate:
    """A gate in front of one agent. Create, then ``await run()`` until :meth:`stop`."""

    def __init__(
        self,
        judge: GateJudge,
        options: GateOptions,
        *,
        listen: tuple[str, int] = ("127.0.0.1", 5006),
        linger: float | None = None,
        results: str | None = None,
        events: list[str] | None = None,
    ) -> None:
        """``events``: judge from these sources (``open_feed`` specs) instead of the
        agent's tracker endpoint; the judge must not read the tracker then."""
        try:
            import httptools  # noqa: F401
            import uvicorn  # noqa: F401
        except ImportError as exc:
            raise UsageError(
                f"the gate needs {exc.name}, which is not installed: {INSTALL_HINT}"
            ) from None
        self.judge = judge
        self.options = options
        self.linger = linger
        self.results = results
        self.events = events
        if events and judge.reads_tracker:
            raise ValueError("a gate judging from --events must not read the tracker too")
        self._sock = listening_socket(*listen)
        host, port = self._sock.getsockname()[:2]
        self.address = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
        self.proxy: GateProxy | None = None
        self._server: Any = None
        self._stopping = False
        self._lingered = False  # --linger ended it (not Ctrl-C or SIGTERM)
        self.left_open: list[str] = []  # runs under way when Ctrl-C or SIGTERM ended it
        self.started: float | None = None  # loop time when run() began
        self.ended: float | None = None

    # ------------------------------------------------------------------ what the live view reads

    @property
    def elapsed(self) -> float:
        """Seconds the gate has run (0 before it starts: the live view's first frame)."""
        if self.started is None:
            return 0.0
        end = self.ended if self.ended is not None else anyio.current_time()
        return end - self.started

    def events_per_second(self) -> float:
        return self.judge.events_per_second()

    @property
    def latest(self) -> deque[Decision]:
        return self.judge.latest

    @property
    def stopped_early(self) -> list[str]:
        return self.judge.stopped_early

    # ------------------------------------------------------------------ running

    def stop(self) -> None:
        """End the gate: no new connection is taken, requests under way finish."""
        self._stopping = True
        if self._server is not None:
            self._server.should_exit = True

    def outcome(self) -> RunOutcome:
        """How the gate's run ended: ``cancelled`` when Ctrl-C or SIGTERM came while runs
        were under way (they are left open, their undecided verdicts pending)."""
        return RunOutcome(
            "cancelled" if self.left_open else "ended", tuple(self.judge.stopped_early)
        )

    async def run(self) -> None:
        self.started = anyio.current_time()
        try:
            await self._serve()
        finally:
            self._sock.close()
            self.left_open = self.judge.finish_all(cut_short=not self._lingered)
            self.ended = anyio.current_time()

    async def _serve(self) -> None:
        import uvicorn

        # Idle connections to the agent are let go of well before an agent server's own
        # keep-alive timeout (5 s for Sanic, Rasa's, and uvicorn): a request sent on a
        # connection the agent is closing at that moment would fail.
        upstream = Upstream(
            self.options.upstream, read_timeout=self.options.upstream_timeout, keepalive=2.0
        )
        async with contextlib.aclosing(upstream), anyio.create_task_group() as tasks:

            def spawn(job: Callable[[], Coroutine[Any, Any, None]]) -> None:
                tasks.start_soon(job)

            proxy = self.proxy = GateProxy(self.options, self.judge, upstream, spawn)
            config = uvicorn.Config(
                proxy,
                http=gate_protocol(),
                lifespan="off",
                # A request the gate could not serve is answered (502) or cut off, and
                # counted in the report: no server traceback on the user's terminal.
                log_level="critical",
                access_log=False,
                server_header=False,
                date_header=False,
                proxy_headers=False,  # X-Forwarded-* are the upstream's to read
                timeout_graceful_shutdown=5,
                backlog=2048,
            )
            self._server = server = quiet_server(config)
            server.should_exit = self._stopping
            tasks.start_soon(self._tick, proxy)
            if self.events:
                tasks.start_soon(self._judge_feed, self.events)
            await server.serve(sockets=[self._sock])
            # Requests under way have finished; their runs' last readings go on briefly.
            with anyio.move_on_after(self.options.tracker_timeout):
                while proxy.pending_judging():
                    await anyio.sleep(0.02)
            tasks.cancel_scope.cancel()

    async def _judge_feed(self, sources: list[str]) -> None:
        """The runs' events from another source, judged as they come (the main
        evaluator, through a runner that stops nothing itself)."""
        runner = Runner(self.judge.main, linger=None, on_decisions=self.judge.feed_decisions)
        async with open_feed(sources) as feed:
            await runner.run(feed)

    async def _tick(self, proxy: GateProxy) -> None:
        judge = self.judge
        looked = 0.0
        seen = -1
        while True:
            await anyio.sleep(0.1)
            now = anyio.current_time()
            judge.rate.add(now, judge.main.statistics().events)
            if self.results is not None and now - looked >= RESULTS_INTERVAL:
                looked = now
                with contextlib.suppress(UsageError):  # not there yet, or no run file yet
                    runs = await anyio.to_thread.run_sync(load_results, self.results)
                    if len(runs) != seen:
                        seen = len(runs)
                        judge.results_changed(runs)
            if (
                self.linger is not None
                and proxy.tracker_reads
                and proxy.in_flight == 0
                and not proxy.pending_judging()
                and all(run.ended for run in judge.runs.values())
                and now - proxy.last_end >= self.linger
            ):
                self._lingered = True
                self.stop()
                return
