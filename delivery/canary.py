"""Stable, salted traffic split: the same request key always lands on the same arm.

``blake2b(salt + key)`` gives 64 uniform bits, read as a number in [0, 1). A key whose
number falls below ``share`` goes to the candidate. Changing the salt reshuffles keys
(one salt per rollout, so one rollout's canary guests are not always the next one's);
raising ``share`` only adds keys to the candidate, it never moves one back.

Example:
    >>> assign_arm("guest-42", 0.05, salt="v2")
    ('incumbent', 0.95)
    >>> assign_arm("guest-42", 0.05, salt="v2") == assign_arm("guest-42", 0.05, salt="v2")
    True
"""

from __future__ import annotations

import hashlib
from typing import Literal

from routing.errors import RoutingInputError

Arm = Literal["candidate", "incumbent"]

_SCALE = float(2**64)
_SEPARATOR = b"\x1f"  # unit separator: salt "a"+key "bc" and salt "ab"+key "c" must differ


def hash_unit(request_key: str, salt: str) -> float:
    """A uniform number in [0, 1) fixed by ``salt`` and ``request_key``.

    Example:
        >>> 0.0 <= hash_unit("k", "s") < 1.0
        True
    """
    digest = hashlib.blake2b(salt.encode() + _SEPARATOR + request_key.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / _SCALE


def assign_arm(request_key: str, share: float, salt: str = "") -> tuple[Arm, float]:
    """Arm for ``request_key`` and the probability that this arm was chosen (its propensity).

    Args:
        request_key: what keeps a guest on one arm (guest key, else request id).
        share: candidate share in [0, 1].
        salt: per-rollout salt.

    Raises:
        RoutingInputError: ``share`` outside [0, 1].
    """
    if not 0.0 <= share <= 1.0:
        raise RoutingInputError(field="share", value=share, expected="a number in [0, 1]")
    if hash_unit(request_key, salt) < share:
        return "candidate", share
    return "incumbent", 1.0 - share
