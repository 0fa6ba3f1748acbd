"""Kafka supervisor specs for Druid: load the committed JSON, point it at a cluster, submit.

The specs live next to this module (``supervisors/<topic>.json``); their README explains the
rollup and granularity choices. The ``features.v1`` file lists the key dimensions only: one
``double`` dimension per stored feature of :data:`events.catalog.VIEWS` is appended when the
spec is loaded, so a catalogue change reaches Druid without editing JSON.

A ``topic_prefix`` isolates tests and tenants: it prefixes the Kafka topic (as
:meth:`events.config.KafkaConfig.topic` does) and leaves the datasource name, which analysts'
SQL names, alone unless ``datasource_prefix`` is given.

Example:
    >>> spec = load_spec("features.v1", kafka_bootstrap="k:9092", topic_prefix="t1-")
    >>> spec["spec"]["ioConfig"]["topic"], spec["spec"]["dataSchema"]["dataSource"]
    ('t1-features.v1', 'features_v1')
    >>> spec_columns("features.v1")[:5]
    ('hotel_id', 'room_type', 'stay_date', 'view', 'version')
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import httpx

from events.catalog import VIEWS
from infra.druid.errors import SupervisorError

SPEC_DIR = Path(__file__).resolve().parent / "supervisors"
SUPERVISED_TOPICS: tuple[str, ...] = ("features.v1", "behaviour.events")
DATASOURCES = {"features.v1": "features_v1", "behaviour.events": "behaviour_events"}
_SUPERVISOR_API = "/druid/indexer/v1/supervisor"
STORED_FEATURES: tuple[str, ...] = tuple(name for _, names in VIEWS.values() for name in names)
"""Features carried by ``features.v1`` rows (derived ratios are computed by readers, not stored)."""


@cache
def _raw_spec(topic: str) -> dict[str, Any]:
    path = SPEC_DIR / f"{topic}.json"
    if not path.exists():
        msg = f"no supervisor spec for topic {topic!r} at {path}; known: {list(SUPERVISED_TOPICS)}"
        raise SupervisorError(msg)
    spec: dict[str, Any] = json.loads(path.read_text())
    if topic == "features.v1":
        dims = spec["spec"]["dataSchema"]["dimensionsSpec"]["dimensions"]
        listed = {d if isinstance(d, str) else d["name"] for d in dims}
        dims.extend({"type": "double", "name": name} for name in STORED_FEATURES if name not in listed)
    return spec


def load_spec(
    topic: str, *, kafka_bootstrap: str, topic_prefix: str = "", datasource_prefix: str = "",
    consumer_properties: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The supervisor spec for ``topic``, pointed at ``kafka_bootstrap``.

    ``consumer_properties`` (a secure stack's SASL settings of the ``druid`` principal,
    :func:`infra.kafka_security.java_client_properties`) are added to the spec's ``consumerProperties``.

    Raises:
        SupervisorError: no spec file exists for ``topic``.
    """
    spec = copy.deepcopy(_raw_spec(topic))
    io = spec["spec"]["ioConfig"]
    io["topic"] = f"{topic_prefix}{io['topic']}"
    io["consumerProperties"]["bootstrap.servers"] = kafka_bootstrap
    io["consumerProperties"].update(consumer_properties or {})
    schema = spec["spec"]["dataSchema"]
    schema["dataSource"] = f"{datasource_prefix}{schema['dataSource']}"
    return spec


def spec_columns(topic: str) -> tuple[str, ...]:
    """Dimension names (then metric names) that the spec for ``topic`` stores."""
    schema = _raw_spec(topic)["spec"]["dataSchema"]
    dims = tuple(d if isinstance(d, str) else d["name"] for d in schema["dimensionsSpec"]["dimensions"])
    metrics = tuple(m.get("name") or m["aggregator"]["name"] for m in schema.get("metricsSpec", []))
    return dims + metrics


def submit_supervisors(
    druid_url: str,
    kafka_bootstrap: str,
    *,
    topic_prefix: str = "",
    datasource_prefix: str = "",
    topics: tuple[str, ...] = SUPERVISED_TOPICS,
    timeout: float = 30.0,
    consumer_properties: Mapping[str, str] | None = None,
) -> list[str]:
    """Create or update the Kafka supervisors; returns their ids (the datasource names).

    ``druid_url`` is the router (its management proxy forwards to the overlord) or the
    coordinator-overlord itself. Submitting an existing supervisor updates it in place.

    Raises:
        SupervisorError: the overlord answered with an error (its message is included).
    """
    ids = []
    for topic in topics:
        spec = load_spec(
            topic, kafka_bootstrap=kafka_bootstrap, topic_prefix=topic_prefix, datasource_prefix=datasource_prefix,
            consumer_properties=consumer_properties,
        )
        body = _call("POST", f"{druid_url}{_SUPERVISOR_API}", json=spec, timeout=timeout)
        ids.append(str(body["id"]))
    return ids


def supervisor_state(druid_url: str, supervisor_id: str, *, timeout: float = 10.0) -> str:
    """Detailed state of a supervisor (``RUNNING``, ``PENDING``, ``UNHEALTHY_TASKS`` ...)."""
    body = _call("GET", f"{druid_url}{_SUPERVISOR_API}/{supervisor_id}/status", timeout=timeout)
    return str(body["payload"].get("detailedState") or body["payload"]["state"])


def terminate_supervisor(druid_url: str, supervisor_id: str, *, timeout: float = 30.0) -> None:
    """Stop a supervisor and its tasks (publishing what they ingested)."""
    _call("POST", f"{druid_url}{_SUPERVISOR_API}/{supervisor_id}/terminate", timeout=timeout)


def _call(method: str, url: str, *, timeout: float, json: dict[str, Any] | None = None) -> dict[str, Any]:
    try:
        resp = httpx.request(method, url, json=json, timeout=timeout)
    except httpx.HTTPError as exc:
        msg = f"Druid supervisor API {method} {url} failed: {exc}"
        raise SupervisorError(msg) from exc
    if resp.status_code >= 400:
        msg = f"Druid supervisor API {method} {url} answered {resp.status_code}: {resp.text[:1000]}"
        raise SupervisorError(msg)
    body: dict[str, Any] = resp.json()
    return body
