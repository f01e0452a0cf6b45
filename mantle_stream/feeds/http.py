"""A Rasa server's HTTP tracker endpoint: ``http://HOST:PORT`` or ``https://...``.

``GET {base}/conversations/{conversation_id}/tracker?include_events=ALL``
returns a tracker document (``{"sender_id": ..., "events": [...]}``, flat
events), which becomes one chunk that ends its conversation, exactly as a
tracker document file does (:func:`mantle_stream.feeds.files._document_chunk`).

Which conversations: :class:`HttpOptions` ``conversations`` (the command
line's ``--conversation ID`` or the runs of ``--results DIR``). Trackers are
fetched ``concurrency`` at a time and handed on in the order the ids were
given: a conversation takes a slot from the moment its request starts until
its chunk has been handed on, so at most ``concurrency`` requests are in
flight and at most that many documents wait in memory.

Failures: a connection error, a timeout, a 5xx or a 429 is retried
``retries`` times, waiting ``backoff`` seconds and twice as long each time
after (``timeout`` bounds each whole request, its body included, not each
read); then, when no connection could be made at all, the feed fails with a
:class:`~mantle_stream.FeedError` naming the conversation and the reason;
otherwise that conversation is not read (``Feed.unread`` says why: the report
lists it) and the others are. Neither is a tracker of another conversation
than the one asked for (its ``sender_id``), nor one whose body inflates past
``max_document_bytes`` (gzip and deflate are inflated here, bounded, and
reading stops at the limit). A 401 or 403 fails at once, saying which
credentials to give (Rasa's token auth, ``?token=``, or a JWT,
``Authorization: Bearer``). A 404 -- or a tracker without events, which is
what Rasa answers for a conversation it has never seen -- is not fatal: the
conversation is skipped and ``on_missing`` called with its id and the reason
(the command line prints a warning), since a results folder may name runs
the tracker store no longer holds (the report then has no entry for it: the
warning is where it shows).

The client is ``httpx`` (the ``mantle_stream[http]`` extra), imported only
when such a feed is entered.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

import anyio
from anyio.streams.memory import MemoryObjectSendStream

from mantle_stream.core.errors import FeedError
from mantle_stream.core.urls import redact, secrets_in
from mantle_stream.feeds.base import Item, QueuedFeed
from mantle_stream.feeds.files import MAX_DOCUMENT_BYTES, _document_chunk
from mantle_stream.feeds.interface import Chunk

if TYPE_CHECKING:
    import httpx

__all__ = ["HttpFeed", "HttpOptions"]

#: What to install when httpx is missing.
INSTALL_HINT = 'pip install "mantle_stream[http]"'
#: The start of a response body quoted in an error message.
_EXCERPT = 200
#: The most a compressed body is inflated by at a time.
_INFLATE_STEP = 1 << 20


@dataclass(frozen=True)
class HttpOptions:
    """What an ``http(s)://`` source fetches and how.

    ``conversations``: the ids whose trackers to fetch. ``token``: Rasa's token
    auth (sent as ``?token=``); ``jwt``: sent as ``Authorization: Bearer``.
    ``concurrency``: requests at once; ``retries``: further attempts after a
    connection error, timeout, 5xx or 429, the first after ``backoff`` seconds
    and each next one after twice as long; ``timeout``: seconds per request.
    ``on_missing(conversation_id, reason)``: called for a conversation that
    is skipped (404, or a tracker without events). ``max_document_bytes``:
    a tracker whose body inflates past it is not read (reading stops there).
    """

    conversations: tuple[str, ...] = ()
    token: str | None = None
    jwt: str | None = None
    concurrency: int = 8
    retries: int = 3
    timeout: float = 30.0
    backoff: float = 0.5
    on_missing: Callable[[str, str], object] | None = None
    max_document_bytes: int = MAX_DOCUMENT_BYTES

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, not {self.concurrency!r}")
        if self.retries < 0:
            raise ValueError(f"retries must be at least 0, not {self.retries!r}")
        if not self.timeout > 0:
            raise ValueError(f"timeout must be positive, not {self.timeout!r}")
        if self.max_document_bytes < 1:
            raise ValueError(
                f"max_document_bytes must be at least 1, not {self.max_document_bytes!r}"
            )
        if self.backoff < 0 or math.isnan(self.backoff):
            raise ValueError(f"backoff must be at least 0, not {self.backoff!r}")


class _Retry(Exception):
    """A failure worth another attempt; its text is the reason. ``unreachable``: no
    connection to the server at all (fatal once the attempts are spent: no other
    conversation would be read either), else this conversation's (it is unread)."""

    def __init__(self, reason: str, *, unreachable: bool = False) -> None:
        super().__init__(reason)
        self.unreachable = unreachable


class HttpFeed(QueuedFeed):
    """The trackers of ``options.conversations`` from a Rasa server at ``spec``; ends."""

    def __init__(self, spec: str, options: HttpOptions, *, max_line_bytes: int) -> None:
        # A tracker document is a whole conversation, in its order.
        super().__init__(redact(spec), live=False, max_line_bytes=max_line_bytes, ordered=True)
        self._base = spec.rstrip("/")
        self._secrets = (*secrets_in(spec), options.token or "", options.jwt or "")
        self._options = options
        self._client: httpx.AsyncClient | None = None
        #: Conversations skipped, with the reason (404, no events).
        self.missing: dict[str, str] = {}

    async def _open(self) -> None:
        parts = urlsplit(self._base)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise FeedError(
                f"bad event source `{self.name}`: expected `http://HOST:PORT` or "
                "`https://HOST[:PORT][/PATH]`, the Rasa server's base URL"
            )
        if parts.query or parts.fragment:
            raise FeedError(
                f"bad event source `{self.name}`: give the Rasa server's base URL only, "
                "without `?` or `#` (the token goes in --rasa-token)"
            )
        if not self._options.conversations:
            raise FeedError(
                f"`{self.name}`: which conversations? give --conversation ID (repeatable) "
                "or --results DIR"
            )
        try:
            import httpx
        except ImportError:
            raise FeedError(
                f"reading events from `{self.name}` needs httpx: {INSTALL_HINT}"
            ) from None
        # Inflated by _body, bounded: only what it can inflate is asked for.
        headers = {"Accept": "application/json", "Accept-Encoding": "gzip, deflate"}
        if self._options.jwt:
            headers["Authorization"] = f"Bearer {self._options.jwt}"
        self._client = httpx.AsyncClient(
            headers=headers, timeout=self._options.timeout, follow_redirects=True
        )

    async def _close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    async def _produce(self, send: MemoryObjectSendStream[Item]) -> None:
        ids = list(dict.fromkeys(self._options.conversations))
        done = [anyio.Event() for _ in ids]
        results: list[Chunk | FeedError | None] = [None] * len(ids)
        slots = anyio.Semaphore(self._options.concurrency)

        async def fetch(index: int) -> None:
            try:
                results[index] = await self._fetch(ids[index])
            except FeedError as exc:
                results[index] = exc
            finally:
                done[index].set()

        with send:
            async with anyio.create_task_group() as group:

                async def launch() -> None:
                    # In id order, so the conversation handed on next always
                    # holds a slot or gets the next one: no deadlock.
                    for index in range(len(ids)):
                        await slots.acquire()
                        group.start_soon(fetch, index)

                group.start_soon(launch)
                for index in range(len(ids)):
                    await done[index].wait()
                    result, results[index] = results[index], None
                    if isinstance(result, FeedError):
                        self._error = result
                        group.cancel_scope.cancel()
                        return
                    if result is not None:
                        await send.send(result)
                    slots.release()

    def _url(self, conversation_id: str) -> str:
        segment = quote(conversation_id, safe="")  # `/`, `?`, `#`, `%` encoded
        if segment in (".", ".."):
            # Dot segments: the client removes them (`/conversations/../tracker` is
            # `/tracker`); percent-encoded, the id is a segment of its own.
            segment = segment.replace(".", "%2E")
        return f"{self._base}/conversations/{segment}/tracker"

    async def _fetch(self, conversation_id: str) -> Chunk | None:
        """One conversation's tracker as a chunk; None when it is skipped."""
        delay = self._options.backoff
        attempts = self._options.retries + 1
        for attempt in range(1, attempts + 1):
            try:
                return await self._get(conversation_id)
            except _Retry as exc:
                if attempt == attempts:
                    tries = "1 attempt" if attempts == 1 else f"{attempts} attempts"
                    if not exc.unreachable:
                        # One tracker the server keeps failing on: reported, and
                        # the other conversations still read and judged.
                        self._unread[conversation_id] = f"{exc} (gave up after {tries})"
                        return None
                    raise FeedError(
                        f"cannot read conversation `{conversation_id}` from `{self.name}`: "
                        f"{exc} (gave up after {tries})"
                    ) from None
            await anyio.sleep(delay)
            delay *= 2
        raise AssertionError("unreachable")  # pragma: no cover

    async def _get(self, conversation_id: str) -> Chunk | None:
        import httpx

        assert self._client is not None
        params = {"include_events": "ALL"}
        if self._options.token:
            params["token"] = self._options.token
        url = self._url(conversation_id)
        timeout = self._options.timeout
        try:
            # The whole request within the timeout, its body included: httpx's
            # own is per read, and a body trickled a byte at a time never trips it.
            with anyio.fail_after(timeout):
                async with self._client.stream("GET", url, params=params) as response:
                    self._touch()
                    body = await self._answer(conversation_id, response, redact(url))
        except TimeoutError:
            raise _Retry(f"no whole answer within {timeout:g} s") from None
        except httpx.TransportError as exc:
            unreachable = isinstance(exc, httpx.ConnectError)
            raise _Retry(_transport_reason(exc), unreachable=unreachable) from None
        except httpx.HTTPError as exc:  # too many redirects...
            raise FeedError(
                f"cannot read conversation `{conversation_id}` from `{self.name}`: "
                f"{type(exc).__name__}: {exc}"
            ) from None
        if body is None:
            return None
        chunk = _document_chunk(body, redact(url))
        if chunk.ends != conversation_id:
            # Judged, it would pass for the other conversation's run, and the one
            # asked for would vanish: neither is read from it.
            self._unread[conversation_id] = (
                f"the server answered with the tracker of another conversation, `{chunk.ends}`"
            )
            return None
        if not chunk.data:
            self._skip(conversation_id, "the server's tracker for it has no events")
            return None
        return chunk

    async def _answer(
        self, conversation_id: str, response: httpx.Response, name: str
    ) -> bytes | None:
        """The tracker document a response holds; None when it is skipped or unread."""
        status = response.status_code
        if status >= 500 or status == 429:
            raise _Retry(f"the server answered {status} {response.reason_phrase}")
        if status in (401, 403):
            raise FeedError(
                f"`{self.name}` refused conversation `{conversation_id}`: {status} "
                f"{response.reason_phrase}: {self._auth_hint(status)}"
            )
        if status == 404:
            self._skip(conversation_id, "the server has no such conversation (404)")
            return None
        if status != 200:
            excerpt = await _body(response, name, _EXCERPT, cut=True) or b""
            text = excerpt[:_EXCERPT].decode("utf-8", "replace").strip()
            raise FeedError(
                f"cannot read conversation `{conversation_id}` from `{self.name}`: the "
                f"server answered {status} {response.reason_phrase}: "
                f"{repr(text) if text else '(empty body)'}"
            )
        limit = self._options.max_document_bytes
        body = await _body(response, name, limit)
        if body is None:
            self._unread[conversation_id] = (
                f"its tracker document is more than the {limit}-byte limit (stopped reading there)"
            )
            return None
        return body

    def _skip(self, conversation_id: str, why: str) -> None:
        self.missing[conversation_id] = why
        if self._options.on_missing is not None:
            self._options.on_missing(conversation_id, why)

    def _auth_hint(self, status: int) -> str:
        token, jwt = self._options.token, self._options.jwt
        if status == 403:
            return (
                "the JWT may not read this conversation: give --rasa-jwt a JWT whose "
                "user role is `admin` (or whose username is the conversation id)"
            )
        if not token and not jwt:
            return (
                "the server wants credentials: give --rasa-token TOKEN (the server's "
                "--auth-token) or --rasa-jwt JWT (signed with its --jwt-secret)"
            )
        given = " and ".join(
            what for what, value in (("--rasa-token", token), ("--rasa-jwt", jwt)) if value
        )
        return (
            f"{given} not accepted: give the server's --auth-token as --rasa-token, "
            "or a JWT signed with its --jwt-secret as --rasa-jwt"
        )


def _transport_reason(exc: Exception) -> str:
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if text != type(exc).__name__ else text


async def _body(
    response: httpx.Response, name: str, limit: int, *, cut: bool = False
) -> bytes | None:
    """The body, inflated as it arrives; None once it inflates past ``limit`` bytes
    (reading stops there), or with ``cut`` its first ``limit`` bytes or so.

    gzip and deflate are inflated here, ``_INFLATE_STEP`` bytes at most at a
    time, never by httpx's decoders: one chunk of a gzip bomb inflates a
    thousandfold.
    """
    encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
    inflate: Any = None
    if encoding in ("gzip", "x-gzip"):
        inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
    elif encoding == "deflate":
        inflate = zlib.decompressobj()
    elif encoding not in ("", "identity"):
        raise FeedError(
            f"`{name}`: the server answered in Content-Encoding `{encoding}`; "
            "gzip, deflate or none was asked for"
        )
    parts: list[bytes] = []
    size = 0
    try:
        async for raw in response.aiter_raw():
            data = raw
            while data and size <= limit:
                if inflate is None:
                    out, data = data, b""
                else:
                    step = min(limit + 1 - size, _INFLATE_STEP)
                    out, data = inflate.decompress(data, step), inflate.unconsumed_tail
                parts.append(out)
                size += len(out)
            if cut and size >= limit:
                return b"".join(parts)
            if size > limit:
                return None  # (what was inflated is let go of at once)
        if inflate is not None:
            parts.append(inflate.flush())
    except zlib.error as exc:
        raise FeedError(f"`{name}`: the {encoding} body does not inflate: {exc}") from None
    return b"".join(parts)
