"""Gate evidence from the live streams: served and shadow decisions (``pricing.decisions``) and labels.

A server in a rollout publishes every served decision with its ``arm`` (``incumbent`` or
``candidate``) and every background pricing of the other arm as ``incumbent-shadow`` or
``candidate-shadow``, with the served decision's ``request_id``. Pairing the two by request
gives the paired prices of the flip and price gates; the candidate's latencies come from its
shadow and served decisions; ``feedback.labels`` joined to served decisions by ``decision_id``
gives the booking, revenue and net value outcomes per arm: net value is revenue net of the rooms'
value, ``label x (price - bid_price)`` with the bid price (the opportunity cost per room-night) the
served decision logged; when a served decision has none, the net arrays are ``None`` and the gate
judges revenue. Only decisions from ``since`` (the start of the stage) count: the sequential gate
gets every outcome of the stage at each look. Pure: the caller reads the topics.

Example:
    >>> served = {"request_id": "r1", "decision_id": "d1", "arm": "incumbent", "price": 100.0, "latency_ms": 2.0,
    ...           "bid_price": 60.0}
    >>> shadow = {"request_id": "r1", "decision_id": "d2", "arm": "candidate-shadow", "price": 104.0,
    ...           "latency_ms": 3.0}
    >>> label = {"decision_id": "d1", "label": 1, "price": 100.0}
    >>> e = live_evidence([served, shadow], [label])
    >>> list(e.incumbent_prices), list(e.candidate_prices), list(e.candidate_latency_ms), list(e.incumbent_revenue)
    ([100.0], [104.0], [3.0], [100.0])
    >>> list(e.incumbent_net)
    [40.0]
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from delivery.gates import Evidence

_SERVED = ("incumbent", "candidate")


def _time(value: Any) -> datetime | None:
    if isinstance(value, int | float):
        return datetime.fromtimestamp(value / 1000.0, tz=UTC)
    if isinstance(value, str):
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    return None


def _in_stage(decision: Mapping[str, Any], since: datetime | None) -> bool:
    if since is None:
        return True
    at = _time(decision.get("event_time"))
    return at is not None and at >= since


def live_evidence(
    decisions: Iterable[Mapping[str, Any]],
    labels: Iterable[Mapping[str, Any]],
    *,
    since: datetime | None = None,
) -> Evidence:
    """Gate evidence of the decisions made from ``since`` on (see the module docstring)."""
    served: dict[str, Mapping[str, Any]] = {}
    by_decision: dict[str, Mapping[str, Any]] = {}
    shadows: list[Mapping[str, Any]] = []
    latency: list[float] = []
    for d in decisions:
        if not _in_stage(d, since):
            continue
        arm = str(d.get("arm", "incumbent"))
        if arm in _SERVED:
            served[str(d["request_id"])] = d
            by_decision[str(d["decision_id"])] = d
            if arm == "candidate":
                latency.append(float(d["latency_ms"]))
        elif arm.endswith("-shadow"):
            shadows.append(d)
            if arm == "candidate-shadow":
                latency.append(float(d["latency_ms"]))
    inc_prices, cand_prices = [], []
    for s in shadows:
        paired = served.get(str(s["request_id"]))
        if paired is None:
            continue
        pair = (float(paired["price"]), float(s["price"]))
        inc, cand = pair if s["arm"] == "candidate-shadow" else pair[::-1]
        inc_prices.append(inc)
        cand_prices.append(cand)
    booked: dict[str, list[float]] = {"incumbent": [], "candidate": []}
    revenue: dict[str, list[float]] = {"incumbent": [], "candidate": []}
    net: dict[str, list[float]] = {"incumbent": [], "candidate": []}
    latest: dict[str, Mapping[str, Any]] = {}
    for label in labels:  # a later revision (a cancellation) replaces the earlier label
        key = str(label.get("decision_id"))
        if key in by_decision and int(label.get("revision", 0)) >= int(latest.get(key, {}).get("revision", -1)):
            latest[key] = label
    for key, label in latest.items():
        decision = by_decision[key]
        arm = str(decision["arm"])
        value = float(label["label"])
        booked[arm].append(value)
        revenue[arm].append(float(label["price"]) * value)
        bid = decision.get("bid_price")
        net[arm].append(math.nan if bid is None else (float(label["price"]) - float(bid)) * value)
    has_net = all(not math.isnan(v) for values in net.values() for v in values)
    return Evidence(
        incumbent_prices=inc_prices, candidate_prices=cand_prices, candidate_latency_ms=latency,
        incumbent_booked=booked["incumbent"], candidate_booked=booked["candidate"],
        incumbent_revenue=revenue["incumbent"], candidate_revenue=revenue["candidate"],
        incumbent_net=net["incumbent"] if has_net else None, candidate_net=net["candidate"] if has_net else None,
    )
