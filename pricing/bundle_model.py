"""A bundle's demand model, checked against its ``meta.json``, and the envelope it was trained on.

Split from :mod:`pricing.tiers`: loading a bundle refuses an ONNX file whose checksum is not the
one ``meta.json`` recorded, or a model whose inputs are not the columns it lists, before any request
is priced on it.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from pricing.compiled import CompiledDemandModel, ModelBackend
from pricing.errors import BundleError
from pricing.onnx_runtime import OnnxDemandModel
from pricing.training import ONNX_FILE

DemandModel = OnnxDemandModel | CompiledDemandModel
"""The two backends of a bundle's demand model; both take a model matrix and answer ``(n, members)``."""


class Envelope(NamedTuple):
    """What a bundle was trained on: its price range and its other inputs' 1st-99th percentile bounds.

    Unknown bounds are infinite, so nothing falls outside them.
    """

    price_range: tuple[float, float]
    low: npt.NDArray[np.float32]
    high: npt.NDArray[np.float32]

    def outside(self, row: npt.NDArray[np.float32]) -> tuple[int, int]:
        """(inputs outside the envelope, known inputs) over the non-price columns of a prepared row."""
        values = row[1:]
        known = np.isfinite(values)
        out = known & ((values < self.low) | (values > self.high))
        return int(out.sum()), int(known.sum())


def _demand_model(path: Path, meta: Mapping[str, Any], blob: bytes, backend: ModelBackend) -> DemandModel:
    """The bundle's demand model on ``backend``: onnxruntime over ``blob``, or its compiled boosters."""
    if backend == "onnx":
        return OnnxDemandModel(blob)
    if backend == "compiled":
        return CompiledDemandModel.from_bundle(path, list(meta["boosters"]))
    msg = f"backend: {backend!r}, expected 'onnx' or 'compiled'"
    raise BundleError(msg)


def load_demand_model(path: Path, meta: Mapping[str, Any], backend: ModelBackend) -> DemandModel:
    """The demand model of the bundle at ``path``, its ONNX bytes checked against ``meta["onnx_sha256"]``.

    Raises:
        BundleError: the ONNX file is unreadable or its checksum differs, the backend is unknown, or the
            model's input count is not the number of ``meta["columns"]``.
    """
    onnx_path = path / ONNX_FILE
    try:
        blob = onnx_path.read_bytes()
    except OSError as exc:
        msg = f"bundle {path}: {ONNX_FILE} unreadable ({exc})"
        raise BundleError(msg) from exc
    expected = meta["onnx_sha256"].get(ONNX_FILE)
    if hashlib.sha256(blob).hexdigest() != expected:
        msg = f"bundle {path}: {ONNX_FILE} sha256 does not match meta.json ({expected})"
        raise BundleError(msg)
    model = _demand_model(path, meta, blob, backend)
    columns = len(meta["columns"])
    if model.n_features != columns:
        msg = f"bundle {path}: model takes {model.n_features} inputs, meta lists {columns}"
        raise BundleError(msg)
    return model


def envelope_of(meta: Mapping[str, Any], columns: tuple[str, ...]) -> Envelope:
    """The training envelope ``meta.json`` records for ``columns`` (the price first), infinite where unknown.

    Example:
        >>> env = envelope_of({"envelope": {"price": [50, 200], "occupancy": [0.1, None]}}, ("price", "occupancy"))
        >>> env.price_range, env.outside(np.array([99.0, 0.05], dtype=np.float32))
        ((50.0, 200.0), (1, 1))
    """
    envelope = meta.get("envelope", {})
    bounds = [envelope.get(c, [None, None]) for c in columns[1:]]
    price = envelope.get("price", [None, None])
    price_range = (
        -math.inf if price[0] is None else float(price[0]),
        math.inf if price[1] is None else float(price[1]),
    )
    low = np.array([-math.inf if b[0] is None else b[0] for b in bounds], dtype=np.float32)
    high = np.array([math.inf if b[1] is None else b[1] for b in bounds], dtype=np.float32)
    return Envelope(price_range, low, high)
