"""Redaction of credentials in text that leaves the process: messages, logs, reasons.

Client libraries put the address they failed to reach into their exception texts, and
our own messages name it too. An address may carry credentials
(``redis://user:pass@host``), and a connection string or a client config may carry a
password (Feast's ``host:port,password=...``, librdkafka's ``sasl.password``). Every
place that turns an address or a third-party exception into text runs it through
:func:`redact` first; :func:`redact_exception` does the same for ``Type: message``.

What is removed: the password part of any ``scheme://user:password@`` (the user name
stays, it helps to debug and is not a secret), the value of any ``password=``,
``passwd=``, ``secret=``, ``token=`` or ``sasl.password`` setting (``=``, ``:`` or a
quoted dict form), and every literal secret the caller passes. The host, port and
database stay: they are what an operator needs to find the failing dependency.

Example:
    >>> redact("Redis at 'redis://app:s3cret@10.0.0.5:6379/0' could not be read")
    "Redis at 'redis://app:***@10.0.0.5:6379/0' could not be read"
    >>> redact("rediss://:hunter2@cache:6380")
    'rediss://:***@cache:6380'
    >>> redact("127.0.0.1:6379,db=0,password=hunter2,ssl=true")
    '127.0.0.1:6379,db=0,password=***,ssl=true'
    >>> redact("{'sasl.password': 'p@ss w0rd', 'bootstrap.servers': 'k:9092'}")
    "{'sasl.password': '***', 'bootstrap.servers': 'k:9092'}"
    >>> redact("auth failed for token abc123", secrets=["abc123"])
    'auth failed for token ***'
    >>> redact_exception(ConnectionError("redis://u:pw@h:1 refused"))
    'ConnectionError: redis://u:***@h:1 refused'
"""

from __future__ import annotations

import re
from collections.abc import Iterable

MASK = "***"
"""What stands where a secret was."""

# userinfo of a URL: scheme://[user][:password]@ ; the password may hold anything but '@', '/' and spaces
# (an unescaped '@' inside a password is invalid in a URL; clients would not parse it either).
_URL_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.\-]*://[^:/@\s'\"]*):(?P<secret>[^@/\s'\"]+)@")
_KEY = r"(?:sasl[._]password|password|passwd|pwd|secret|token|api[_-]?key)"
# key='value' / key: "value" (dict reprs, JSON, YAML)
_QUOTED = re.compile(rf"(?P<head>['\"]?{_KEY}['\"]?\s*[:=]\s*)(?P<q>['\"])(?P<secret>.*?)(?P=q)", re.IGNORECASE)
# key=value / key: value up to a separator (connection strings, query strings, log lines)
_BARE = re.compile(rf"(?P<head>\b{_KEY}\s*[:=]\s*)(?P<secret>[^\s,;&'\"}}\]]+)", re.IGNORECASE)


def redact(text: str, *, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with every credential it carries replaced by :data:`MASK`.

    Args:
        text: a message, an address, a client's exception text.
        secrets: literal values that must not appear either (a configured password);
            empty and ``None`` entries are ignored.
    """
    for secret in secrets:
        if secret:
            text = text.replace(secret, MASK)
    text = _URL_PASSWORD.sub(rf"\g<head>:{MASK}@", text)
    text = _QUOTED.sub(rf"\g<head>\g<q>{MASK}\g<q>", text)
    return _BARE.sub(lambda m: m["head"] + (m["secret"] if m["secret"] == MASK else MASK), text)


def redact_exception(exc: BaseException, *, secrets: Iterable[str | None] = ()) -> str:
    """``"Type: message"`` of ``exc``, redacted."""
    return redact(f"{type(exc).__name__}: {exc}", secrets=secrets)


__all__ = ["MASK", "redact", "redact_exception"]
