"""Source specs that are URLs, as messages show them: secrets hidden, malformed ones named.

Every message, log line, report and checkpoint that names a source names it
through :func:`redact`; every source that takes a URL apart asks
:func:`malformed_url` first, so a spec ``urlsplit`` refuses is a one-line
error naming it, never a ``ValueError``. Pure: ``urllib.parse`` splits
strings and reads nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import unquote, urlsplit

__all__ = ["MIN_SCRUBBED", "malformed_url", "redact", "scrub", "secrets_in"]

#: Query parameters whose value is a secret (``?password=``, Rasa's ``?token=``,
#: ``sasl_password=``): their values are hidden in messages.
_SECRET_PARAMETER = re.compile(r"(?i)((?:^|&)[^=&]*(?:password|token|secret)[^=&]*=)[^&]*")


def redact(spec: str) -> str:
    """``spec`` with any secret a URL holds hidden, for messages: the password after
    ``user:`` (up to the last ``@`` before the host) and the value of a query
    parameter named for a password, token or secret.

    Split by hand, never by ``urlsplit``: a spec too malformed for it (a `[`
    without its `]`) is still redacted, so the message saying so shows no secret.
    """
    prefix = "follow:" if spec.startswith("follow:") else ""
    url = spec.removeprefix(prefix)
    scheme, separator, rest = url.partition("://")
    if not separator:
        return spec
    rest, hash_, fragment = rest.partition("#")
    rest, question, query = rest.partition("?")
    slash = rest.find("/")
    netloc, path = (rest, "") if slash < 0 else (rest[:slash], rest[slash:])
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        if ":" in userinfo:
            netloc = userinfo.split(":", 1)[0] + ":***@" + host
    query = _SECRET_PARAMETER.sub(r"\1***", query)
    return f"{prefix}{scheme}://{netloc}{path}{question}{query}{hash_}{fragment}"


def malformed_url(url: str) -> str | None:
    """Why ``url`` is not a URL ``urlsplit`` can take apart (a `[` without its
    `]`, a bracketed host that is no IP address), or None when it is one. (Its
    port is left to the source: libpq and Kafka take several ``host:port``.)"""
    try:
        urlsplit(url)
    except ValueError as exc:
        netloc = url.partition("://")[2].split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]
        if netloc.count("[") != netloc.count("]"):
            return "a `[` without its `]` (an IPv6 host goes in brackets: `[::1]:PORT`)"
        return str(exc)
    return None


#: Secrets shorter than this are not looked for in free text: replacing every
#: `pw` in a message would garble it (they are still hidden in the spec shown).
MIN_SCRUBBED = 4


def secrets_in(spec: str) -> list[str]:
    """The secrets a spec holds (what :func:`redact` hides), as written and
    percent-decoded, for :func:`scrub` to look for in other text."""
    url = spec.removeprefix("follow:")
    if "://" not in url:
        return []
    rest = url.partition("://")[2].partition("#")[0]
    rest, _, query = rest.partition("?")
    netloc = rest.split("/", 1)[0]
    found = []
    if "@" in netloc and ":" in netloc.rsplit("@", 1)[0]:
        found.append(netloc.rsplit("@", 1)[0].split(":", 1)[1])
    for match in _SECRET_PARAMETER.finditer(query):
        found.append(query[match.end(1) : match.end()])
    return [s for secret in found for s in {secret, unquote(secret)}]


def scrub(text: str, secrets: Iterable[str | None]) -> str:
    """``text`` with every secret of ``secrets`` in it replaced by ``***``: for
    messages that quote what a library or a server said (libpq quotes the
    password it could not parse; a server may echo the token it was sent)."""
    for secret in sorted({s for s in secrets if s and len(s) >= MIN_SCRUBBED}, key=len)[::-1]:
        text = text.replace(secret, "***")
    return text
