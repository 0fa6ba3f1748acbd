"""Gate evidence from the live streams: served and shadow decisions (``pricing.decisions``) and labels.

A server in a rollout publishes every served decision with its ``arm`` (``incumbent`` or
``candidate``) and every background pricing of the other arm as ``incumbent-shadow`` or
``candidate-shadow``, with the served decision's ``request_id``. Pairing the two by request
gives the paired prices of the flip and price gates; the candidate's latencies come from its
shadow and served decisions; ``feedback.labels`` joined to served decisions by ``decision_id``
gives the booking, revenue and net value outcomes per arm: net value is revenue net of the rooms'
value, ``label x (price - bid_price)`` with the bid price (the opportunity cost per room-night) the
served decision logged; when a served decision has none, the net arrays are ``None`` and the gate
judges revenue. Each outcome also carries the *incumbent's* expected net value of its request
(``expected_booking_prob x (price - bid_price)`` of the incumbent's served decision, or of its
``incumbent-shadow`` pricing of a request the candidate served): a value fixed before the outcome that
does not depend on the arm, which the gate adjusts for (``*_covariate``; ``None`` unless every outcome
has one, so a missing shadow never makes the adjustment lean on one arm). Only decisions from ``since``
(the start of the stage) count: the sequential gate
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
    >>> e.incumbent_covariate is None  # the served decision logged no expected_booking_prob
    True
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from delivery.gates import Evidence

_SERVED = ("incumbent", "candidate")


def _time(value: object) -> datetime | None:
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


def _expected_net(decision: Mapping[str, Any] | None) -> float:
    """A decision's own expectation of its net value: predicted booking probability x (price - bid price)."""
    if decision is None or decision.get("expected_booking_prob") is None or decision.get("bid_price") is None:
        return math.nan
    return float(decision["expected_booking_prob"]) * (float(decision["price"]) - float(decision["bid_price"]))


def _latest_labels(labels: Iterable[Mapping[str, Any]], keep: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """The newest revision of each label of a decision in ``keep`` (a cancellation replaces the booking)."""
    latest: dict[str, Mapping[str, Any]] = {}
    for label in labels:
        key = str(label.get("decision_id"))
        if key in keep and int(label.get("revision", 0)) >= int(latest.get(key, {}).get("revision", -1)):
            latest[key] = label
    return latest


def live_evidence(
    decisions: Iterable[Mapping[str, Any]],
    labels: Iterable[Mapping[str, Any]],
    *,
    since: datetime | None = None,
) -> Evidence:
    """Gate evidence of the decisions made from ``since`` on (see the module docstring)."""
    served: dict[str, Mapping[str, Any]] = {}
    by_decision: dict[str, Mapping[str, Any]] = {}
    shadows: dict[str, Mapping[str, Any]] = {}
    latency: list[float] = []
    for d in decisions:
        if not _in_stage(d, since):
            continue
        arm = str(d.get("arm", "incumbent"))
        if arm in _SERVED:
            served[str(d["request_id"])] = d
            by_decision[str(d["decision_id"])] = d
        elif arm.endswith("-shadow"):
            shadows[str(d["request_id"])] = d
        if arm in ("candidate", "candidate-shadow"):
            latency.append(float(d["latency_ms"]))
    inc_prices, cand_prices = [], []
    for request_id, s in shadows.items():
        paired = served.get(request_id)
        if paired is None:
            continue
        pair = (float(paired["price"]), float(s["price"]))
        inc, cand = pair if s["arm"] == "candidate-shadow" else pair[::-1]
        inc_prices.append(inc)
        cand_prices.append(cand)
    outcomes = _outcomes(by_decision, shadows, _latest_labels(labels, by_decision))
    return Evidence(incumbent_prices=inc_prices, candidate_prices=cand_prices, candidate_latency_ms=latency,
                    **outcomes)


def _outcomes(by_decision: Mapping[str, Mapping[str, Any]], shadows: Mapping[str, Mapping[str, Any]],
              latest: Mapping[str, Mapping[str, Any]]) -> dict[str, list[float] | None]:
    """Per arm: booked, revenue, net value and the incumbent's expected net value of each labelled request."""
    series: dict[str, dict[str, list[float]]] = {
        k: {"incumbent": [], "candidate": []} for k in ("booked", "revenue", "net", "covariate")}
    for key, label in latest.items():
        decision = by_decision[key]
        arm = str(decision["arm"])
        value, price, bid = float(label["label"]), float(label["price"]), decision.get("bid_price")
        series["booked"][arm].append(value)
        series["revenue"][arm].append(price * value)
        series["net"][arm].append(math.nan if bid is None else (price - float(bid)) * value)
        incumbent = decision if arm == "incumbent" else shadows.get(str(decision["request_id"]))
        series["covariate"][arm].append(_expected_net(incumbent))
    out: dict[str, list[float] | None] = {}
    for kind, arms in series.items():
        whole = all(not math.isnan(v) for values in arms.values() for v in values)
        for arm, values in arms.items():
            out[f"{arm}_{kind}"] = values if whole or kind in ("booked", "revenue") else None
    if out["incumbent_net"] is None:  # a covariate of net value is of no use without net value
        out["incumbent_covariate"] = out["candidate_covariate"] = None
    return out
