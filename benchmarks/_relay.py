"""A bare TCP relay, the floor of any proxy: ``python benchmarks/_relay.py HOST:PORT``.

It copies bytes both ways between each client and the upstream, parsing
nothing (asyncio streams, ``TCP_NODELAY``, as the gate), so the time it adds
to a turn is what one more process on the path costs on this machine:
benchmarks/gate.py runs it beside the gate and prints both. It prints its
address on stderr and ``{"gate": {}}`` on stdout when interrupted, as
``mantle-stream gate --format json`` does, so the benchmark starts both alike.
"""

from __future__ import annotations

import asyncio
import socket
import sys


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
    finally:
        writer.close()


async def _relay(host: str, port: int) -> None:
    async def handle(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        agent_r, agent_w = await asyncio.open_connection(host, port)
        for writer in (client_w, agent_w):
            writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        await asyncio.gather(_pipe(client_r, agent_w), _pipe(agent_r, client_w))

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    print(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", file=sys.stderr, flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    host, _, port = sys.argv[1].rpartition(":")
    try:
        asyncio.run(_relay(host, int(port)))
    except KeyboardInterrupt:
        print('{"gate": {}}', flush=True)
