"""Online writer: ``features.v1`` rows into Redis, in Feast's layout, idempotent and order-safe.

Every row (one view's values for one entity; the feature job has merged the tiles) is applied by a
Lua compare-and-set (``features/cas.lua``) on its entity hash: the view's fields are written only
when the row's ``version`` is greater than the stored one, so a replayed or reordered delivery
changes nothing. The
check and the write are one atomic step inside Redis, so two writers racing on the same keys
still leave the newest version (Feast's own ``online_write_batch`` dedup reads, then writes, in
two round trips). A batch is one pipelined round trip of script calls, 64 rows each (on a Redis
Cluster, ``redis+cluster://`` URLs, the calls are grouped per hash slot: :func:`script_chunks`). Offsets
are committed only after the batch is in Redis (:class:`events.runtime.Runtime`), so a
crash replays rather than loses, and a replay is a no-op because equal versions are skipped.
Within a batch only the newest row of each (key, view) is sent: the older ones would be
overwritten in the same round trip anyway (``superseded``; under a backlog the per-hotel view
repeats each hotel hundreds of times in one batch).

Example:
    >>> from prometheus_client import CollectorRegistry
    >>> writer = OnlineWriter(FeaturesConfig(), registry=CollectorRegistry())
    >>> writer.write_rows([])
    WriteResult(written=0, skipped_stale=0, superseded=0)
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, NamedTuple

import redis
from prometheus_client import CollectorRegistry
from redis.cluster import RedisCluster

from events.catalog import VIEWS
from events.redact import redact
from events.runtime import BatchContext, Output, Record, Runtime, RuntimeConfig, Step
from events.runtime.service import run_service, service_config
from features.config import FeaturesConfig
from features.connection import STORE_ERRORS, RedisClient, redis_client, slot_of
from features.errors import OnlineStoreError
from features.freshness import FreshnessTracker, publish
from features.layout import encode_double, encode_ts, feature_field, redis_key, ts_field, version_field
from features.rows import FeatureRow, parse_row

CAS_SCRIPT = (Path(__file__).with_name("cas.lua")).read_text()
_CAS_SHA = hashlib.sha1(CAS_SCRIPT.encode()).hexdigest()  # noqa: S324 - Redis names scripts by their SHA-1
# Rows per script call: one call blocks Redis while it runs (~5 us a row), so a whole 2,000-row
# batch in one call would hold the scorer's reads for ~10 ms; 64 rows keep that well under 1 ms
# and still share the per-command cost of the client and the server.
_ROWS_PER_CALL = 64
_PUBLISH_EVERY_S = 1.0  # status file refresh: often enough for a CLI, cheap next to a Redis round trip


class WriteResult(NamedTuple):
    written: int
    skipped_stale: int
    """Rows whose version was not newer than the one in Redis (replays, out-of-order writers)."""
    superseded: int = 0
    """Rows dropped before the round trip: a newer row of the same key and view was in the batch."""


def newest_per_key(rows: Sequence[FeatureRow], project: str) -> list[tuple[bytes, FeatureRow]]:
    """(Redis key, row) keeping only the highest version of each (key, view), in first-seen order."""
    newest: dict[tuple[bytes, str], tuple[bytes, FeatureRow]] = {}
    for row in rows:
        key = row_key(row, project)
        held = newest.get((key, row.view))
        if held is None or row.version > held[1].version:
            newest[(key, row.view)] = (key, row)
    return list(newest.values())


def script_chunks(batch: Sequence[tuple[bytes, FeatureRow]], *, cluster: bool) -> list[list[tuple[bytes, FeatureRow]]]:
    """The script calls of a batch: runs of :data:`_ROWS_PER_CALL` rows; on a cluster, of one hash slot each.

    A script's keys must all live in one slot on a cluster (else ``CROSSSLOT``), so rows are grouped
    by their key's slot first (first-seen order kept within a slot).

    Example:
        >>> rows = [(b"a", None), (b"b", None), (b"a", None)]
        >>> [len(c) for c in script_chunks(rows, cluster=False)]
        [3]
        >>> sorted(len(c) for c in script_chunks(rows, cluster=True))
        [1, 2]
    """
    if not cluster:
        return [list(batch[start : start + _ROWS_PER_CALL]) for start in range(0, len(batch), _ROWS_PER_CALL)]
    by_slot: dict[int, list[tuple[bytes, FeatureRow]]] = {}
    for item in batch:
        by_slot.setdefault(slot_of(item[0]), []).append(item)
    return [rows[start : start + _ROWS_PER_CALL] for rows in by_slot.values()
            for start in range(0, len(rows), _ROWS_PER_CALL)]


# Each view's Redis field names, computed once (a murmur hash per feature name otherwise, per row).
_FIELDS = {view: (version_field(view), ts_field(view), [(name, feature_field(view, name)) for name in names])
           for view, (_, names) in VIEWS.items()}


def cas_args(row: FeatureRow) -> list[bytes | str]:
    """ARGV of the compare-and-set script for one row: pairs after the version, version field and value, pairs."""
    version, ts, fields = _FIELDS[row.view]
    args: list[bytes | str] = [str(len(fields) + 1), version, str(row.version), ts, encode_ts(row.feature_time)]
    for name, field in fields:
        args += [field, encode_double(row.features.get(name))]
    return args


def _chunk_args(chunk: Sequence[tuple[bytes, FeatureRow]]) -> list[bytes | str]:
    args: list[bytes | str] = []
    for _, row in chunk:
        args += cas_args(row)
    return args


def row_key(row: FeatureRow, project: str) -> bytes:
    return _entity_key(VIEWS[row.view][0], row.key, project)


@lru_cache(maxsize=65_536)
def _entity_key(keys: tuple[str, ...], values: tuple[str, ...], project: str) -> bytes:
    """Feast's hash key of an entity, cached: a flush writes each entity's views together."""
    return redis_key(keys, values, project)


class OnlineWriter:
    """Apply feature rows to Redis (the pure-ish core; :func:`run` adds Kafka around it).

    Args:
        config: feature store settings (Redis, project).
        registry: Prometheus registry for the freshness metrics.
        client: an existing redis-py client (else one is made from ``config``).
        clock: wall clock in seconds (freshness lags are ``clock() - publish_time``).
    """

    def __init__(
        self,
        config: FeaturesConfig,
        *,
        registry: CollectorRegistry | None = None,
        client: RedisClient | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.freshness = FreshnessTracker(registry)
        self._client = client if client is not None else redis_client(config)
        self._cluster = isinstance(self._client, RedisCluster)
        if not isinstance(self._client, RedisCluster):
            self._script = self._client.register_script(CAS_SCRIPT)
        self._wait = (config.redis_wait_replicas, config.redis_wait_ms)
        self._clock = clock
        self._published = 0.0

    def write_rows(self, rows: Sequence[FeatureRow]) -> WriteResult:
        """Compare-and-set the newest row per key in one pipelined round trip; older or equal versions are skipped.

        Raises:
            OnlineStoreError: Redis could not be reached or refused the script.
        """
        if not rows:
            return WriteResult(0, 0)
        batch = newest_per_key(rows, self.config.project)
        chunks = script_chunks(batch, cluster=self._cluster)
        try:
            if isinstance(self._client, RedisCluster):
                replies = self._execute_cluster(self._client, chunks)
            else:
                with self._client.pipeline(transaction=False) as pipe:
                    for chunk in chunks:
                        self._script(keys=[key for key, _ in chunk], args=_chunk_args(chunk), client=pipe)
                    replies = pipe.execute()
        except STORE_ERRORS as exc:
            msg = f"Redis at {redact(self.config.redis_url)!r} failed a batch of {len(rows)} rows: {exc}"
            raise OnlineStoreError(msg) from exc
        applied = [ok == 1 for reply in replies for ok in reply]
        now_ms = self._clock() * 1000.0
        written = 0
        for (_, row), ok in zip((item for chunk in chunks for item in chunk), applied, strict=True):
            if ok:
                written += 1
                self.freshness.observe((now_ms - row.publish_time) / 1000.0)
        superseded = len(rows) - len(batch)
        self.freshness.count_rows(written=written, skipped_stale=len(batch) - written + superseded)
        return WriteResult(written, len(batch) - written, superseded)

    def _execute_cluster(self, cluster: RedisCluster, chunks: list[list[tuple[bytes, FeatureRow]]]) -> list[list[int]]:
        """One cluster pipeline of ``EVALSHA`` calls (one slot each); scripts a node lacks are loaded and rerun.

        A promoted replica or a restarted node has an empty script cache (Redis 7 does not replicate
        ``SCRIPT LOAD``), so a ``NOSCRIPT`` reply loads the script on every master and reruns just
        those calls. With ``wait_replicas``, each master written is asked to ``WAIT`` for that many
        replicas: the batch is acknowledged only once they have it.
        """
        sha = _CAS_SHA
        replies: list[Any] = [None] * len(chunks)
        pending = list(range(len(chunks)))
        for _attempt in range(2):
            with cluster.pipeline(transaction=False) as pipe:
                for i in pending:
                    keys = [key for key, _ in chunks[i]]
                    pipe.execute_command("EVALSHA", sha, len(keys), *keys, *_chunk_args(chunks[i]))
                results = pipe.execute(raise_on_error=False)
            for i, result in zip(pending, results, strict=True):
                replies[i] = result
            pending = [i for i in pending if isinstance(replies[i], redis.exceptions.NoScriptError)]
            if not pending:
                break
            cluster.execute_command("SCRIPT LOAD", CAS_SCRIPT)  # redis-py sends it to every master
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
        self._wait_for_replicas(cluster, {chunk[0][0] for chunk in chunks})
        return replies

    def _wait_for_replicas(self, cluster: RedisCluster, keys: set[bytes]) -> None:
        replicas, wait_ms = self._wait
        if replicas <= 0 or not keys:
            return
        nodes = {node.name: node for node in map(cluster.get_node_from_key, keys) if node is not None}
        for node in nodes.values():
            acked = int(cluster.execute_command("WAIT", replicas, wait_ms, target_nodes=node))
            if acked < replicas:
                msg = (f"Redis Cluster master {node.name}: {acked} replica(s) acknowledged within {wait_ms} ms, "
                       f"expected wait_replicas={replicas}; the batch is retried")
                raise redis.RedisError(msg)

    def publish_status(self, *, force: bool = False) -> None:
        """Write the freshness summary for ``pricestream features status`` (throttled)."""
        now = self._clock()
        if force or now - self._published >= _PUBLISH_EVERY_S:
            publish(self.freshness.summary(), self.config.status_file)
            self._published = now

    def ping(self) -> str | None:
        """``None`` when Redis answers, else what is wrong (for ``/healthz``)."""
        try:
            self._client.ping()
        except STORE_ERRORS as exc:
            return f"down: {exc}"
        return None

    def close(self) -> None:
        self._client.close()


@dataclass
class RunStats:
    polled: int = 0
    written: int = 0
    skipped_stale: int = 0
    superseded: int = 0
    dead_lettered: int = 0


class OnlineWriteStep(Step[FeatureRow]):
    """The online writer as a runtime step: parse ``features.v1`` rows, compare-and-set them into Redis.

    Redis being down is a transient error (the runtime keeps the batch and retries; ``/healthz``
    names ``redis``); the output is durable once :meth:`process` returned.
    """

    transient_errors = (OnlineStoreError,)

    def __init__(self, writer: OnlineWriter) -> None:
        self.writer = writer
        self.stats = RunStats()

    def parse(self, record: Record[bytes]) -> FeatureRow:
        return parse_row(record.value)

    def process(self, batch: Sequence[Record[FeatureRow]], ctx: BatchContext | None) -> list[Output]:
        result = self.writer.write_rows([r.value for r in batch])
        self.stats.written += result.written
        self.stats.skipped_stale += result.skipped_stale
        self.stats.superseded += result.superseded
        return []

    def durable(self, *, force: bool) -> bool:
        self.writer.publish_status(force=force)
        return True

    def health(self) -> dict[str, str | None]:
        return {"redis": self.writer.ping()}

    def describe(self) -> dict[str, Any]:
        return {"written": self.stats.written, "skipped_stale": self.stats.skipped_stale}

    def close(self) -> None:
        self.writer.publish_status(force=True)
        self.writer.close()


def runtime_config(config: FeaturesConfig, **overrides: object) -> RuntimeConfig:
    """The runtime settings of the online writer (group ``online_group``, at-least-once) plus ``overrides``."""
    return service_config({"name": "online-writer", "kafka": config.kafka, "inputs": (config.topic,),
                           "group_id": config.online_group, "max_batch": config.batch_size}, **overrides)


def run(
    config: FeaturesConfig,
    *,
    max_idle_s: float | None = None,
    stop_event: threading.Event | None = None,
    registry: CollectorRegistry | None = None,
    poll_timeout_s: float = 0.5,
    runtime: RuntimeConfig | None = None,
) -> RunStats:
    """Consume ``features.v1`` into Redis until ``stop_event`` is set or the topic is idle ``max_idle_s``.

    Offsets are committed after each batch is in Redis; unparseable rows go to ``features.v1.dlq``.
    ``runtime`` (the ``services run`` command) overrides the runtime settings built from ``config``.
    """
    registry = registry if registry is not None else CollectorRegistry()
    step = OnlineWriteStep(OnlineWriter(config, registry=registry))
    rc = runtime or runtime_config(config, max_idle_s=max_idle_s, poll_timeout_s=poll_timeout_s)
    totals = run_service(Runtime(rc, step, registry=registry, stop_event=stop_event))
    step.stats.polled = totals.consumed
    step.stats.dead_lettered = totals.dead_lettered
    return step.stats
