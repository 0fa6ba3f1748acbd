"""The control plane's records and state: what every serving replica must agree on, and how it merges.

Two kinds of state drive a serving replica: the registry's live model per tier, and the
rollout (stage, weights, candidate). Each change is one :class:`ControlRecord` carrying the
*whole* new state of its kind, keyed by its kind on the compacted ``control.v1`` topic
(:mod:`delivery.control_kafka` is the Kafka adapter). Compaction keeps the newest record per
key, so a replica started later catches up by reading the topic alone.

The version of a record is its offset in the single-partition topic: the broker assigns it,
so it is monotone and unique whatever the number of publishers, and compaction removes
records without renumbering the rest. :meth:`ControlState.apply` takes records in version
order and ignores any version at or below the last one applied of that kind: re-reading
the topic (a restart, a reconnect) changes nothing.

Model bundles live in a shared *store* (a volume every replica mounts). A record names a
bundle by a path relative to the store and carries the sha256 of its ONNX files;
:func:`verify` checks the bytes before a replica loads them, and a replica that finds a
mismatch refuses the record and keeps serving what it had.

Exception tree (under :class:`pricing.errors.PricingError`)::

    ControlPlaneError        a control record cannot be read or applied
    └── ArtefactMismatch     a bundle's files differ from the sha256 in its record

Example:
    >>> import hashlib, tempfile
    >>> from pathlib import Path
    >>> store = Path(tempfile.mkdtemp())
    >>> (store / "light" / "v2").mkdir(parents=True)
    >>> _ = (store / "light" / "v2" / "model.onnx").write_bytes(b"onnx-v2")
    >>> sha = hashlib.sha256(b"onnx-v2").hexdigest()
    >>> v2 = Artefact(version="v2", tier="light", path="light/v2", onnx_sha256={"model.onnx": sha})
    >>> record = ControlRecord.registry_change(RegistryView(generation=3, live={"light": v2}))
    >>> state = ControlState(store)
    >>> state.apply(7, record), state.apply(7, record), state.generation
    (True, False, 7)
    >>> state.current("light").version, state.current("heavy") is None
    ('v2', True)
    >>> _ = (store / "light" / "v2" / "model.onnx").write_bytes(b"tampered")
    >>> try:
    ...     state.apply(8, ControlRecord.registry_change(RegistryView(generation=4, live={"light": v2})))
    ... except ArtefactMismatch as exc:
    ...     str(exc).split(":")[0]
    "field 'onnx_sha256' of light/v2/model.onnx"
    >>> state.versions["registry"], state.current("light").version  # refused for good; v2 as before
    (8, 'v2')
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from delivery import RolloutState
from pricing.errors import PricingError

Kind = Literal["registry", "rollout"]
TIERS = ("light", "heavy")


class ControlPlaneError(PricingError):
    """A control record cannot be read or applied (names the field, the value and the expectation)."""


class ArtefactMismatch(ControlPlaneError):
    """A model bundle in the shared store does not have the bytes its control record names."""


class Artefact(BaseModel):
    """One model bundle in the shared store: ``path`` is relative to it, with its ONNX files' sha256."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: str = Field(min_length=1)
    tier: Literal["light", "heavy"]
    path: str
    onnx_sha256: dict[str, str]

    @field_validator("path")
    @classmethod
    def _relative(cls, value: str) -> str:
        parts = PurePosixPath(value).parts
        if not parts or PurePosixPath(value).is_absolute() or ".." in parts:
            msg = f"field 'path': got {value!r}, expected a path relative to the model store, without '..'"
            raise ValueError(msg)
        return value

    def locate(self, store: Path) -> Path:
        """The bundle directory under ``store``."""
        return store / self.path


class RegistryView(BaseModel):
    """The registry as replicas need it: the live model per tier, and the newest registered one."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    generation: int = Field(ge=0)
    live: dict[str, Artefact] = Field(default_factory=dict)
    latest: dict[str, Artefact] = Field(default_factory=dict)
    change: str = ""
    """What changed (``promoted light-r3``), for the replicas' logs and ``/healthz``."""


class ControlRecord(BaseModel):
    """One state change, keyed by :attr:`kind` on the control topic."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Kind
    published_at: datetime
    registry: RegistryView | None = None
    rollout: RolloutState | None = None
    candidate: Artefact | None = None
    """The bundle of the rollout's candidate version (a replica loads it to shadow or serve it)."""

    @classmethod
    def registry_change(cls, view: RegistryView, *, at: datetime | None = None) -> ControlRecord:
        return cls(kind="registry", published_at=at or datetime.now(tz=UTC), registry=view)

    @classmethod
    def rollout_change(
        cls, state: RolloutState, *, candidate: Artefact | None, at: datetime | None = None
    ) -> ControlRecord:
        return cls(kind="rollout", published_at=at or datetime.now(tz=UTC), rollout=state, candidate=candidate)

    @property
    def key(self) -> bytes:
        """The compaction key: one live record per kind."""
        return self.kind.encode()


def parse_record(raw: bytes | None) -> ControlRecord:
    """A record from the topic's bytes.

    Raises:
        ControlPlaneError: the bytes are not a control record (names the first bad field).
    """
    from pydantic import ValidationError

    try:
        record = ControlRecord.model_validate_json(raw or b"")
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "<record>"
        msg = f"control record field {where!r}: got {str(first.get('input'))[:80]!r}, expected {first['msg']}"
        raise ControlPlaneError(msg) from exc
    if (record.kind == "registry") != (record.registry is not None) or (
        record.kind == "rollout" and record.rollout is None
    ):
        msg = f"control record of kind {record.kind!r}: expected its {record.kind!r} field set (and only that)"
        raise ControlPlaneError(msg)
    return record


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def verify(artefact: Artefact, store: Path) -> Path:
    """The bundle directory of ``artefact`` once every ONNX file has the sha256 its record names.

    Raises:
        ArtefactMismatch: a file is missing or its bytes differ.
    """
    bundle = artefact.locate(store)
    for name, expected in sorted(artefact.onnx_sha256.items()):
        where = f"{artefact.path}/{name}"
        try:
            got = sha256_file(bundle / name)
        except OSError as exc:
            msg = f"field 'path' {where!r}: cannot read it under the model store {str(store)!r} ({exc.strerror})"
            raise ArtefactMismatch(msg) from exc
        if got != expected:
            msg = f"field 'onnx_sha256' of {where}: got {got[:3]}... expected {expected[:3]}..."
            raise ArtefactMismatch(msg)
    return bundle


@dataclass(frozen=True)
class StoreEntry:
    """A verified bundle, as the scorer's :class:`~pricing.scorer.ModelEntry` (``version``, ``path``, ``tier``)."""

    version: str
    tier: str
    path: Path


class ControlState:
    """What a replica has applied: the newest verified registry view and rollout state.

    It is a :class:`~pricing.scorer.ModelSource` (``generation``, ``current``) so that
    :meth:`pricing.scorer.Scorer.reload_from` follows it as it follows a registry directory,
    and it :meth:`show` s a version's bundle for the rollout's candidate loader.

    Args:
        store: the shared model store.
        check: verify bundles' sha256 when a record is applied (on by default).
    """

    def __init__(self, store: Path, *, check: bool = True) -> None:
        self.store = Path(store)
        self.check = check
        self.versions: dict[str, int] = {}
        self.registry: RegistryView | None = None
        self.rollout: RolloutState | None = None
        self.candidate: Artefact | None = None
        self._registry_version = 0

    def apply(self, version: int, record: ControlRecord) -> bool:
        """Adopt ``record`` (at offset ``version``); ``False`` when it is not newer than what was applied.

        Raises:
            ArtefactMismatch: a bundle it names fails :func:`verify`; nothing changes but the version
                seen (the record is refused for good, the state keeps the previous one).
        """
        if version <= self.versions.get(record.kind, -1):
            return False
        self.versions[record.kind] = version
        if record.kind == "registry" and record.registry is not None:
            if self.check:
                for artefact in record.registry.live.values():
                    verify(artefact, self.store)
            self.registry, self._registry_version = record.registry, version
        elif record.rollout is not None:
            if self.check and record.candidate is not None:
                verify(record.candidate, self.store)
            self.rollout, self.candidate = record.rollout, record.candidate
        return True

    @property
    def generation(self) -> int:
        """The version of the registry record in force (moves whenever the live models may have)."""
        return self._registry_version

    def current(self, tier: str) -> StoreEntry | None:
        """The live bundle of ``tier`` (``None`` before any registry record)."""
        artefact = None if self.registry is None else self.registry.live.get(tier)
        return None if artefact is None else self._entry(artefact)

    def show(self, version: str) -> StoreEntry:
        """The bundle of ``version``: a live, the newest registered, or the rollout candidate.

        Raises:
            ControlPlaneError: no record applied names it.
        """
        known = [*(self.registry.live.values() if self.registry else ()),
                 *(self.registry.latest.values() if self.registry else ()),
                 *((self.candidate,) if self.candidate else ())]
        for artefact in known:
            if artefact.version == version:
                return self._entry(artefact)
        msg = f"field 'version': got {version!r}, expected one of {sorted({a.version for a in known})}"
        raise ControlPlaneError(msg)

    def _entry(self, artefact: Artefact) -> StoreEntry:
        return StoreEntry(version=artefact.version, tier=artefact.tier, path=artefact.locate(self.store))
