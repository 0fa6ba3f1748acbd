"""Errors raised by :mod:`audit` (the decision log, its anchors and verification).

Exception tree::

    AuditLogError   the audit log cannot take or read an entry (closed log, disk error,
                    a line that is no entry, an anchor that disagrees with the chain)

Example:
    >>> isinstance(AuditLogError("closed"), ValueError)
    True
"""

from __future__ import annotations


class AuditLogError(ValueError):
    """The audit log cannot take or read an entry (closed log, disk error, a line that is no entry)."""
