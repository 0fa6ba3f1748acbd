"""What a service plugs into the runtime: a :class:`Step` that turns input records into outputs.

A step is the pure part of a service. The runtime hands it parsed records in batches and
produces, dead-letters and commits around it:

* :meth:`Step.parse` turns one raw record into the step's input (whatever it raises sends the
  record to ``<topic>.dlq``: a parse is pure, so its failure is the record's fault);
* :meth:`Step.process` turns a batch into :class:`Output` records (the runtime produces them);
  an exception listed in :attr:`Step.record_errors` makes the runtime retry the batch one
  record at a time and dead-letter the ones that still fail;
* :meth:`Step.durable` makes side effects outside Kafka durable (a Redis write, a parquet flush)
  and says whether everything consumed so far is; offsets are committed only then;
* :meth:`Step.restore` / :meth:`Step.checkpoint` keep operator state in step with the offsets;
* :meth:`Step.health` names the step's own dependencies for ``/healthz``.

Example:
    >>> class Upper(Step[str]):
    ...     def parse(self, record: Record[bytes]) -> str:
    ...         return record.value.decode()
    ...     def process(self, batch, ctx):
    ...         return [Output("out", b"k", r.value.upper().encode()) for r in batch]
    >>> step = Upper()
    >>> raw = Record("in", 0, 7, b"k", b"abc")
    >>> step.process([raw.with_value(step.parse(raw))], None)[0].value
    b'ABC'
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, NamedTuple, Protocol, TypeVar

T = TypeVar("T")
U = TypeVar("U")

Offsets = dict[str, int]
"""``"topic:partition" -> next offset to read`` (physical topic names)."""

Headers = list[tuple[str, str | bytes | None]]


def offset_key(topic: str, partition: int) -> str:
    """The :data:`Offsets` key of a partition.

    Example:
        >>> offset_key("t", 3), split_key("t.x:3")
        ('t:3', ('t.x', 3))
    """
    return f"{topic}:{partition}"


def split_key(key: str) -> tuple[str, int]:
    topic, part = key.rsplit(":", 1)
    return topic, int(part)


@dataclass(frozen=True, slots=True)
class Record(Generic[T]):
    """One input record: where it came from (logical topic) and its value (raw bytes or parsed)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: T
    timestamp_ms: int | None = None

    def with_value(self, value: U) -> Record[U]:
        return Record(self.topic, self.partition, self.offset, self.key, value, self.timestamp_ms)


class Output(NamedTuple):
    """One record to produce (``topic`` is logical; the runtime applies the prefix)."""

    topic: str
    key: bytes
    value: bytes
    headers: Headers | None = None


class BatchContext(Protocol):
    """What a step may ask the runtime about its inputs while processing a batch."""

    def caught_up(self, topic: str, partition: int) -> bool:
        """Whether a partition (logical topic) had nothing left to read as of the last fetch."""
        ...


class Step(Generic[T]):
    """Base of every processing step (override :meth:`parse` and :meth:`process`)."""

    record_errors: ClassVar[tuple[type[Exception], ...]] = ()
    """Exceptions of :meth:`process` caused by one record's content (retried record by record, then DLQ'd)."""

    transient_errors: ClassVar[tuple[type[Exception], ...]] = ()
    """Exceptions of :meth:`process` meaning a dependency is down (the batch is retried with backoff)."""

    def parse(self, record: Record[bytes]) -> T:
        raise NotImplementedError

    def process(self, batch: Sequence[Record[T]], ctx: BatchContext | None) -> Sequence[Output]:
        raise NotImplementedError

    def durable(self, *, force: bool) -> bool:
        """Make what was processed durable; ``True`` when everything so far is (offsets may be committed).

        ``force`` is set when the runtime stops, idles or loses partitions: write now.
        """
        return True

    def restore(self, committed: Mapping[str, int]) -> Offsets | None:
        """Load state at start-up; returns the offsets to start from (``None``: the group's ``committed``)."""
        return None

    def checkpoint(self, offsets: Mapping[str, int]) -> None:
        """Save state that must move with ``offsets`` (called before they are committed)."""

    def health(self) -> dict[str, str | None]:
        """``{dependency: None if up else what is wrong}`` for the step's own dependencies."""
        return {}

    def close(self) -> None:
        """Release the step's clients (called once, after the last commit)."""

    def describe(self) -> dict[str, Any]:
        """Extra fields for the progress log line."""
        return {}

    def counters(self) -> dict[str, object]:
        """The step's own totals at the end of a run (:attr:`RunStats.step`); the progress fields by default."""
        return self.describe()
