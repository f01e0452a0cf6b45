"""The gate's side of the simulator's connections: uvicorn's HTTP protocol, one write
per reply's head and first body bytes.

An edge module (asyncio, uvicorn: imported only when a gate runs).
:func:`gate_protocol` is the HTTP protocol :mod:`mantle_stream.gate.serve`
gives uvicorn: its httptools one (HTTP parsed in C, as uvicorn picks by itself
where httptools is installed, which the ``mantle_stream[gate]`` extra does),
with its transport wrapped in :class:`HeadWithBody`.

Why: on a small machine each socket write wakes the simulator, and a turn's
time to first text is measured there. uvicorn writes a reply's head the
moment the application starts the reply, and each body chunk apart; the
proxy starts a reply when the agent's head arrives, and the agent's first
line comes a moment later. So while :data:`HOLD_HEAD` is set (the proxy sets
it as it starts a reply that has a body to come), the head is held back and
written with the next bytes, the first line of the body; at most
:data:`HOLD` seconds, after which it goes alone (an agent that is slow to
write its first line still shows its head). Nothing is reordered, dropped
or changed: only when bytes leave.
"""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any

__all__ = ["HOLD", "HOLD_HEAD", "HeadWithBody", "gate_protocol"]

#: Set while the proxy starts a reply whose body is to come: its head may wait for it.
HOLD_HEAD: contextvars.ContextVar[bool] = contextvars.ContextVar("HOLD_HEAD", default=False)
#: Seconds a reply's head waits at most for the first bytes of its body.
HOLD = 0.05


class HeadWithBody:
    """An asyncio transport that writes a held reply head together with the next write."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        self._held = b""
        self._timer: asyncio.TimerHandle | None = None

    def __getattr__(self, name: str) -> Any:  # everything else is the transport's
        return getattr(self._transport, name)

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._held:
            data = self._held + data
            self._release()
        elif HOLD_HEAD.get():
            self._held = bytes(data)
            self._timer = asyncio.get_running_loop().call_later(HOLD, self.flush)
            return
        self._transport.write(data)

    def writelines(self, lines: Any) -> None:
        self.write(b"".join(lines))

    def flush(self) -> None:
        """Write what is held, if anything."""
        if self._held:
            data = self._held
            self._release()
            self._transport.write(data)

    def write_eof(self) -> None:
        self.flush()
        self._transport.write_eof()

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def abort(self) -> None:
        self._release()
        self._transport.abort()

    def _release(self) -> None:
        self._held = b""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def gate_protocol() -> type[asyncio.Protocol]:
    """uvicorn's httptools HTTP protocol class, writing through :class:`HeadWithBody`."""
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class GateProtocol(HttpToolsProtocol):
        def connection_made(self, transport: Any) -> None:
            super().connection_made(HeadWithBody(transport))  # type: ignore[arg-type]

    return GateProtocol
