"""Compiled demand models: each member booster compiled to machine code by lleaves (LLVM).

The ``compiled`` model backend (``PRICESTREAM_MODEL_BACKEND=compiled``) scores a bundle's LightGBM
boosters without a runtime: lleaves turns every member into one native function that walks its trees
in double precision and applies the booster's own sigmoid, exactly as ``Booster.predict`` does; the
members' columns make the same ``(n, members)`` float32 ``p_book`` as the ONNX graph
(:class:`pricing.onnx_runtime.OnnxDemandModel`), so the pricers take either.

What makes a single row cheap is the call path, not the trees: per thread and row count, the float64
input and output buffers and their addresses are made once, so a call is one ``copyto``, one ctypes
call per member and one float32 copy of the result (``bench/onnx_vs_native.py`` measures it).

The trainer writes the object code into the bundle (:func:`export_compiled`: ``compiled_<i>.o`` per
member and ``compiled.json``, flat beside the boosters like the bundle's other files). The code is
specific to the CPU and the compiler, so the manifest names both with the sha256 of each booster
file; :meth:`CompiledDemandModel.from_bundle` loads it when all match and otherwise compiles in
memory at load (a few seconds per member) and logs why.

Example:
    >>> import tempfile
    >>> import numpy as np
    >>> from pricing.models import DemandModelConfig, fit_members, predict_native
    >>> rng = np.random.default_rng(0)
    >>> x = rng.uniform(0, 1, size=(300, 3)).astype(np.float32)
    >>> y = (rng.random(300) < 1 - x[:, 0]).astype(np.float32)
    >>> members = fit_members(x, y, config=DemandModelConfig(n_members=2, num_trees=5, num_leaves=4))
    >>> model = CompiledDemandModel.from_boosters(members, workdir=tempfile.mkdtemp())
    >>> p = model.predict(x[:4])
    >>> p.shape, p.dtype, float(np.abs(p - predict_native(members, x[:4])).max()) < 1e-6
    ((4, 2), dtype('float32'), True)
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import logging
import threading
from collections.abc import Sequence
from importlib.metadata import version
from pathlib import Path
from typing import Literal, Protocol, cast

import lightgbm as lgb
import numpy as np
import numpy.typing as npt

from pricing.errors import BundleError

ModelBackend = Literal["onnx", "compiled"]
"""How a pricer scores its demand model: onnxruntime over ``model.onnx``, or the compiled boosters."""
MANIFEST_FILE = "compiled.json"
OBJECT_FILE = "compiled_{member}.o"
ENTRY = "forest_root"
BUFFER_ROWS = 4096
"""Largest row count whose buffers a thread keeps; quotes use 9 to 41 rows, benches 1,000."""
BUFFER_SIZES = 16
"""Most row counts a thread keeps buffers for (a pricer uses two or three)."""

_ENTRY_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int)
"""lleaves' ``forest_root(double *rows, double *out, int start, int end)``; CFUNCTYPE drops the GIL."""

log = logging.getLogger(__name__)

_Buffers = tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], int, int]
"""A thread's rows and output arrays for one row count, and their addresses."""


class _ExecutionEngine(Protocol):
    def get_function_address(self, name: str) -> int: ...


class CompiledBooster(Protocol):
    """What this module uses of a compiled ``lleaves.Model`` (lleaves ships no type hints): its input width and
    the LLVM execution engine holding the compiled ``forest_root``."""

    _execution_engine: _ExecutionEngine

    def num_feature(self) -> int: ...


def build_target() -> dict[str, str]:
    """What the object code depends on: compiler versions and the host CPU.

    Example:
        >>> sorted(build_target())
        ['cpu', 'cpu_features', 'lleaves', 'llvmlite']
    """
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    return {
        "lleaves": version("lleaves"),
        "llvmlite": version("llvmlite"),
        "cpu": str(llvm.get_host_cpu_name()),
        "cpu_features": str(llvm.get_host_cpu_features().flatten()),
    }


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _check_binary(path: Path) -> None:
    """Refuse a booster whose objective is not ``binary`` (its output would not be ``p(book)``)."""
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.startswith("objective="):
                if not line.startswith("objective=binary"):
                    msg = f"booster {path}: {line.strip()!r}, expected 'objective=binary sigmoid:...'"
                    raise BundleError(msg)
                return
    msg = f"booster {path}: no objective line, expected 'objective=binary sigmoid:...'"
    raise BundleError(msg)


def _compile(booster_file: Path, cache: Path | None) -> CompiledBooster:
    """One lleaves model; ``cache`` is read if it exists and written if not (``None``: in memory)."""
    import lleaves

    _check_binary(booster_file)
    try:
        model = lleaves.Model(model_file=str(booster_file))
        # lleaves' default cache blocking (34 trees): one block of 120 inlined trees took 20x the compile time
        model.compile(cache=None if cache is None else str(cache))
    except (OSError, RuntimeError, ValueError) as exc:
        msg = f"booster {booster_file}: lleaves could not compile it ({exc})"
        raise BundleError(msg) from exc
    return cast("CompiledBooster", model)


def export_compiled(bundle: str | Path, booster_files: Sequence[str]) -> Path:
    """Compile a bundle's boosters into ``compiled_<i>.o`` beside them, with ``compiled.json``; returns its path.

    Args:
        bundle: the bundle directory holding ``booster_files``.
        booster_files: the boosters' file names in member order (``meta.json``'s ``boosters``).

    Raises:
        BundleError: if a booster is unreadable, not binary, or does not compile.
    """
    root = Path(bundle)
    members = []
    for i, name in enumerate(booster_files):
        target = root / OBJECT_FILE.format(member=i)
        target.unlink(missing_ok=True)  # lleaves reads an existing cache file instead of compiling
        _compile(root / name, target)
        members.append({"booster": name, "booster_sha256": _sha256(root / name), "object": target.name})
    manifest = {"target": build_target(), "entry": ENTRY, "members": members}
    out = root / MANIFEST_FILE
    out.write_text(json.dumps(manifest, indent=2, sort_keys=True), encoding="utf-8")
    return out


def _stale(bundle: Path, booster_files: Sequence[str]) -> str | None:
    """Why the bundle's compiled members cannot be loaded here, or ``None`` if they can."""
    path = bundle / MANIFEST_FILE
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        return f"{path} unreadable ({exc})"
    if not isinstance(manifest, dict) or not isinstance(manifest.get("members"), list):
        return f"{path}: expected an object with a 'members' list"
    built, here = manifest.get("target"), build_target()
    if built != here:
        return f"{path}: built for {built}, this host is {here}"
    names = [m.get("booster") for m in manifest["members"] if isinstance(m, dict)]
    if names != list(booster_files):
        return f"{path}: members {names}, meta.json lists {list(booster_files)}"
    for i, member in enumerate(manifest["members"]):
        if member.get("booster_sha256") != _sha256(bundle / member["booster"]):
            return f"{path}: {member['booster']} changed since it was compiled"
        if member.get("object") != OBJECT_FILE.format(member=i) or not (bundle / member["object"]).is_file():
            return f"{path}: object file {member.get('object')!r} missing"
    return None


class CompiledDemandModel:
    """Compiled member boosters behind :class:`pricing.onnx_runtime.OnnxDemandModel`'s ``predict``.

    Args:
        models: compiled lleaves models, one per member, in member order.
    """

    def __init__(self, models: Sequence[CompiledBooster]) -> None:
        if not models:
            msg = "models: got 0 compiled members, expected at least 1"
            raise BundleError(msg)
        widths = {int(m.num_feature()) for m in models}
        if len(widths) != 1:
            msg = f"models: members take {sorted(widths)} inputs, expected one width"
            raise BundleError(msg)
        self._models = list(models)  # the models own the execution engines the entry points live in
        self._entries = [_ENTRY_TYPE(m._execution_engine.get_function_address(ENTRY)) for m in models]
        self.n_features = widths.pop()
        self.n_members = len(models)
        self._local = threading.local()

    @classmethod
    def from_bundle(cls, bundle: str | Path, booster_files: Sequence[str]) -> CompiledDemandModel:
        """The bundle's compiled members; compiled in memory (and logged) if the artefact does not fit this host.

        Raises:
            BundleError: if a booster is unreadable, not binary, or does not compile.
        """
        root = Path(bundle)
        reason = _stale(root, booster_files)
        if reason is None:
            objects = [root / OBJECT_FILE.format(member=i) for i in range(len(booster_files))]
            return cls([_compile(root / name, obj) for name, obj in zip(booster_files, objects, strict=True)])
        log.warning("bundle %s: compiling %d member(s) at load: %s", root, len(booster_files), reason)
        return cls([_compile(root / name, None) for name in booster_files])

    @classmethod
    def from_boosters(cls, boosters: Sequence[lgb.Booster], *, workdir: str | Path) -> CompiledDemandModel:
        """Compile in-memory boosters (their text is written to ``workdir``, which must exist)."""
        files = []
        for i, booster in enumerate(boosters):
            path = Path(workdir) / f"booster_{i}.txt"
            booster.save_model(str(path))
            files.append(path)
        return cls([_compile(path, None) for path in files])

    def _buffers(self, n: int) -> _Buffers:
        cache: dict[int, _Buffers] | None = getattr(self._local, "buffers", None)
        if cache is None:
            cache = self._local.buffers = {}
        found = cache.get(n)
        if found is None:
            rows = np.empty((n, self.n_features), dtype=np.float64)
            out = np.empty((self.n_members, n), dtype=np.float64)
            found = (rows, out, rows.ctypes.data, out.ctypes.data)
            if n <= BUFFER_ROWS and len(cache) < BUFFER_SIZES:
                cache[n] = found
        return found

    def predict(self, x: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """``(n_rows, n_members)`` booking probabilities for a float32 ``(n_rows, n_features)`` batch.

        Raises:
            BundleError: if ``x`` is not two-dimensional with ``n_features`` columns.
        """
        if x.ndim != 2 or x.shape[1] != self.n_features:
            msg = f"x: shape {x.shape}, expected (n_rows, {self.n_features})"
            raise BundleError(msg)
        n = x.shape[0]
        rows, out, rows_at, out_at = self._buffers(n)
        np.copyto(rows, x)  # LightGBM compares float64 inputs with float64 thresholds: so does the code
        stride = 8 * n
        for i, entry in enumerate(self._entries):
            entry(rows_at, out_at + i * stride, 0, n)
        return out.T.astype(np.float32)
