"""Inputs of ``pricestream monitor report``, read from what the platform already records.

* the audit log (:mod:`audit.log`): tier, latency, price, model version and the input hash of
  every decision -> tier shares per hour, latency per tier, same-input flip rate per hour;
* feature rows: the decisions' own features when a ``--decisions`` JSON-lines file of
  :class:`events.models.PricingDecision` is given, else the offline store's latest value of each
  feature per stay key priced in the log -> coverage per hotel and drift against a snapshot;
* the rollout state file -> rollout weights over time.

Example:
    >>> import tempfile, pathlib
    >>> from audit.log import AuditLog
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "a.jsonl"
    >>> with AuditLog(path) as log:
    ...     _ = log.append_entry({"tier": "light", "latency_ms": 2.0, "input_sha256": "x",
    ...                           "decision": {"price": 100.0, "model_version": "v1", "hotel_id": "h1"}})
    >>> frame = audit_frame(path)
    >>> list(frame["tier"]), float(frame["latency_ms"][0])
    (['light'], 2.0)
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from events.catalog import ALL_FEATURES

if TYPE_CHECKING:
    from delivery.state import HistoryEntry
    from events.config import KafkaConfig

SHARE_BUCKET = "1h"
"""Tier shares and flip rates are reported per hour of decisions: coarse enough to be stable."""


def audit_frame(path: Path) -> pd.DataFrame:
    """One row per audit entry: time, tier, latency, price, model version, input hash, stay key."""
    rows = []
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if not line.strip():
                continue
            entry = json.loads(line)
            decision = entry.get("decision") or {}
            rows.append({
                "time": entry.get("timestamp"), "tier": entry.get("tier"), "latency_ms": entry.get("latency_ms"),
                "input_sha256": _same_inputs(decision), "price": decision.get("price"),
                "model_version": decision.get("model_version"), "hotel_id": decision.get("hotel_id"),
                "room_type": decision.get("room_type"), "stay_date": decision.get("stay_date"),
            })
    frame = pd.DataFrame(rows, columns=["time", "tier", "latency_ms", "input_sha256", "price", "model_version",
                                        "hotel_id", "room_type", "stay_date"])
    frame["time"] = pd.to_datetime(frame["time"], utc=True, format="ISO8601")
    return frame


def _same_inputs(decision: Mapping[str, object]) -> str | None:
    """The decision's request and features, hashed so that identical inputs on one day match (the audit entry's
    own ``input_sha256`` covers the request's id and time too: no two requests ever share it)."""
    from events.models import PricingDecision
    from feedback.monitors.flips import decision_input_hash

    try:
        return decision_input_hash(PricingDecision.model_validate(decision))
    except ValueError:
        return None


def tier_shares(frame: pd.DataFrame) -> list[tuple[datetime, dict[str, float]]]:
    """``[(hour, {tier: share})]`` over the log."""
    counts = frame.groupby([frame["time"].dt.floor(SHARE_BUCKET), "tier"]).size().unstack(fill_value=0)
    shares = counts.div(counts.sum(axis=1), axis=0)
    return [(t.to_pydatetime(), {str(k): float(v) for k, v in row.items()}) for t, row in shares.iterrows()]


def latencies(frame: pd.DataFrame) -> dict[str, list[float]]:
    """Decision latencies (ms) per tier."""
    return {str(t): g["latency_ms"].dropna().astype(float).tolist() for t, g in frame.groupby("tier")}


def flip_reports(frame: pd.DataFrame) -> list:
    """Cumulative same-input, same-version flip reports at the end of every hour."""
    from feedback.monitors import FlipMonitor

    monitor, reports = FlipMonitor(), []
    for hour, group in frame.sort_values("time").groupby(frame["time"].dt.floor(SHARE_BUCKET)):
        for h, v, p in zip(group["input_sha256"], group["model_version"], group["price"], strict=True):
            if isinstance(h, str) and p is not None:
                monitor.update(h, v if isinstance(v, str) else None, float(p))
        reports.append(monitor.report(at=(hour + pd.Timedelta(SHARE_BUCKET)).to_pydatetime()))
    return reports


def decision_features(path: Path) -> pd.DataFrame:
    """Features of PricingDecision JSON lines: hotel_id, time and every catalogue feature."""
    with path.open("rb") as handle:  # lines end at b"\n" only (ids may hold U+2028)
        return records_features(json.loads(line) for line in handle if line.strip())


def records_features(decisions: Iterable[Mapping]) -> pd.DataFrame:
    """Features the served decisions read live (shadow ones skipped): hotel_id, time, every catalogue feature."""
    rows = []
    for d in decisions:
        if str(d.get("arm", "incumbent")).endswith("-shadow"):
            continue
        feats = d.get("features") or {}
        rows.append({"hotel_id": d.get("hotel_id"), "time": _when(d.get("event_time")),
                     **{k: feats.get(k) for k in ALL_FEATURES}})
    frame = pd.DataFrame(rows, columns=["hotel_id", "time", *ALL_FEATURES])
    frame["time"] = pd.to_datetime(frame["time"], utc=True)
    return frame


def _when(value: object) -> pd.Timestamp | None:
    """The wire format's event time: epoch milliseconds, or ISO-8601 text."""
    if value is None:
        return None
    if isinstance(value, int | float):
        return pd.Timestamp(value, unit="ms", tz="UTC")
    return pd.Timestamp(str(value)).tz_convert("UTC")


def offline_features(offline_root: Path, keys: pd.DataFrame, *, until: datetime) -> pd.DataFrame:
    """Latest non-null value of every stored feature per stay key in ``keys``, as of ``until`` (DuckDB)."""
    from events.catalog import derive
    from features.analytics import STORED_FEATURES, offline_connection

    con = offline_connection(offline_root)
    try:
        con.register("priced", keys[["hotel_id", "room_type", "stay_date"]].drop_duplicates().astype(str))
        latest = ", ".join(f'arg_max("{f}", "__time") FILTER (WHERE "{f}" IS NOT NULL) AS "{f}"'
                           for f in STORED_FEATURES)
        sql = (
            f'SELECT p.hotel_id, p.room_type, p.stay_date, max(f."__time") AS time, {latest} FROM priced p '
            "JOIN features_v1 f ON f.hotel_id = p.hotel_id AND (f.room_type IS NULL OR "
            "(f.room_type = p.room_type AND f.stay_date = p.stay_date)) "
            'WHERE f."__time" <= ? GROUP BY ALL'
        )
        frame = con.execute(sql, [until.replace(tzinfo=None)]).df()
    finally:
        con.close()
    records = frame[list(STORED_FEATURES)].astype(object).where(frame[list(STORED_FEATURES)].notna(), None)
    derived = pd.DataFrame([derive(r) for r in records.to_dict("records")], index=frame.index)
    out = pd.concat([frame[["hotel_id", "time"]], derived.reindex(columns=list(ALL_FEATURES))], axis=1)
    out["time"] = pd.to_datetime(out["time"], utc=True)
    return out


def coverage_report(features: pd.DataFrame, *, window: timedelta, staleness: timedelta, now: datetime):  # noqa: ANN201
    """Coverage over ``window`` ending at ``now``: one read per feature row."""
    from feedback.monitors import CoverageMonitor

    monitor = CoverageMonitor(window, staleness)
    for row in features.to_dict("records"):
        values = {k: (None if pd.isna(row[k]) else float(row[k])) for k in ALL_FEATURES}
        when = row["time"].to_pydatetime() if pd.notna(row["time"]) else None
        monitor.update(str(row["hotel_id"]), values, feature_time=when, now=now)
    return monitor.report(now=now)


def drift_history(reference: pd.DataFrame, features: pd.DataFrame, *, at: datetime) -> list:
    """One drift report of ``features`` against ``reference`` (features with enough values on both sides)."""
    from feedback.monitors import DriftMonitor
    from feedback.monitors.drift import MIN_SAMPLES

    usable = [f for f in ALL_FEATURES if f in reference and reference[f].notna().sum() >= MIN_SAMPLES
              and f in features and features[f].notna().sum() > 0]
    if not usable:
        return []
    monitor = DriftMonitor(reference, features=usable)
    return [monitor.check(features[usable].astype(float), at=at)]


def rollout_weights(history: Sequence[HistoryEntry]) -> list[tuple[datetime, Mapping[str, float]]]:
    """``[(time, {incumbent, candidate})]`` from a rollout state's history."""
    return [(h.at, {"incumbent": 1.0 - h.candidate_weight, "candidate": h.candidate_weight})
            for h in history]


def read_records(config: KafkaConfig, topic: str, *, timeout_s: float = 10.0) -> list[dict]:
    """Every JSON record of a registry topic, read from the start to the high watermarks at the call.

    For the reports and gates that look at a short run's decisions and labels; a topic that does
    not exist yet reads as empty.
    """
    import uuid

    from confluent_kafka import Consumer, TopicPartition

    name = config.topic(topic)
    consumer = Consumer({**config.client_conf(), "group.id": f"pricestream-read-{uuid.uuid4()}",  # SASL when secure
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    records: list[dict] = []
    try:
        meta = consumer.list_topics(name, timeout=timeout_s).topics.get(name)
        if meta is None or meta.error is not None or not meta.partitions:
            return records
        parts = [TopicPartition(name, p, 0) for p in meta.partitions]
        left = {p.partition: end for p in parts if (end := consumer.get_watermark_offsets(p, timeout=timeout_s)[1])}
        consumer.assign(parts)
        while left:
            msg = consumer.poll(timeout_s)
            if msg is None:
                break
            if msg.error() is not None:
                continue
            records.append(json.loads(msg.value() or b"null"))
            partition, offset = int(msg.partition() or 0), int(msg.offset() or 0)
            if offset + 1 >= left.get(partition, 0):
                left.pop(partition, None)
    finally:
        consumer.close()
    return records


def write_run_dashboard(
    target: Path,
    *,
    decided: pd.DataFrame,
    features: pd.DataFrame,
    reference: pd.DataFrame | None,
    rollout_history: Sequence[HistoryEntry] = (),
    window: timedelta = timedelta(hours=24),
    staleness: timedelta = timedelta(minutes=60),
) -> Path:
    """The monitoring page of one run: audited decisions, the features they read, drift against ``reference``.

    ``monitor report`` and the demo draw the same page with it.
    """
    from feedback.dashboard import write_dashboard

    now = decided["time"].max().to_pydatetime()
    drift = [] if reference is None else drift_history(reference, features, at=now)
    return write_dashboard(
        target, coverage=coverage_report(features, window=window, staleness=staleness, now=now),
        drift_history=drift, flips=flip_reports(decided), tier_shares=tier_shares(decided),
        latencies_ms=latencies(decided), rollout_weights_history=rollout_weights(rollout_history),
    )
