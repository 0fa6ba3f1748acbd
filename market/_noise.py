"""Counter-based deterministic noise: the same integers always give the same draw.

The ground truth must be a pure function of its arguments (no hidden RNG
state), so spike calendars and competitor noise come from hashing the key
instead of from a stream of random numbers.

Example:
    >>> unit(1, 2, 3) == unit(1, 2, 3)
    True
    >>> 0.0 <= unit(1, 2, 3) < 1.0
    True
    >>> abs(sum(noise(7, i) for i in range(4000)) / 4000) < 0.05
    True
"""

from __future__ import annotations

import math

_M64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
_TWO_53 = float(1 << 53)
_LOGISTIC_SCALE = math.sqrt(3.0) / math.pi  # makes the logistic unit-variance


def _splitmix(x: int) -> int:
    x = (x + _GOLDEN) & _M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _M64
    return x ^ (x >> 31)


def mix(*values: int) -> int:
    """A 64-bit hash of a sequence of integers (order matters).

    Python's tuple hash of ints does not depend on ``PYTHONHASHSEED`` (only str,
    bytes and datetime hashes are salted), so it is a fast, process-independent
    first stage; splitmix64 then spreads its bits.
    """
    return _splitmix(hash(values) & _M64)


def unit(*values: int) -> float:
    """A uniform draw in [0, 1) fixed by ``values``."""
    return (mix(*values) >> 11) / _TWO_53


def noise(*values: int) -> float:
    """A zero-mean, unit-variance logistic draw fixed by ``values`` (one hash, one log).

    Example:
        >>> noise(0, 1) == noise(0, 1)
        True
    """
    u = ((mix(*values) >> 11) + 0.5) / _TWO_53
    return math.log(u / (1.0 - u)) * _LOGISTIC_SCALE


def noises(n: int, *values: int) -> list[float]:
    """``n`` independent :func:`noise` draws from one key (a splitmix64 chain after one hash).

    Example:
        >>> noises(3, 5, 6) == noises(3, 5, 6) and len(set(noises(3, 5, 6))) == 3
        True
    """
    x, out = mix(*values), []
    for _ in range(n):
        u = ((x >> 11) + 0.5) / _TWO_53
        out.append(math.log(u / (1.0 - u)) * _LOGISTIC_SCALE)
        x = _splitmix(x)
    return out
