"""ONNX export of the demand boosters and a lean onnxruntime session around it.

Every member booster is converted with onnxmltools (``TreeEnsembleClassifier``,
no ZipMap); :func:`merge_members` moves all members' trees into one
``TreeEnsembleRegressor`` with one target per member, followed by a
``Sigmoid``: a ``(n, k)`` output called ``p_book``. One graph, one
``session.run`` per quote, whatever the ensemble size
(``bench/onnx_vs_native.py`` measures it against one session per member).

That fused graph is the bundle format. At load, :class:`OnnxDemandModel` runs it
as one single-target node per member (:func:`split_targets`): same trees, same
sums, bit-identical output, but onnxruntime's single-target kernel walks the
heavy grid (41 rows x 5 members x 120 trees) in ~18% less CPU than its
multi-target kernel.

Example:
    >>> import numpy as np
    >>> from pricing.models import DemandModelConfig, fit_members, predict_native
    >>> rng = np.random.default_rng(0)
    >>> x = rng.uniform(0, 1, size=(300, 3)).astype(np.float32)
    >>> y = (rng.random(300) < 1 - x[:, 0]).astype(np.float32)
    >>> members = fit_members(x, y, config=DemandModelConfig(n_members=2, num_trees=5, num_leaves=4))
    >>> model = OnnxDemandModel(to_onnx(members, n_features=3).SerializeToString())
    >>> p = model.predict(x[:4])
    >>> p.shape, float(np.abs(p - predict_native(members, x[:4])).max()) < 1e-5
    ((4, 2), True)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import google.protobuf.message
import lightgbm as lgb
import numpy as np
import numpy.typing as npt
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

from pricing.errors import BundleError

INPUT_NAME = "input"
OUTPUT_NAME = "p_book"
TARGET_OPSET = 15
"""Highest ``ai.onnx`` opset onnxmltools 1.16 emits for LightGBM; onnxruntime 1.32 runs it."""
IR_VERSION = 8
"""ONNX IR version matching opset 15 (readable by every onnxruntime since 1.10)."""


def booster_to_onnx(booster: lgb.Booster, *, n_features: int) -> onnx.ModelProto:
    """One booster as onnxmltools emits it (outputs ``label`` and ``probabilities``)."""
    import onnxmltools
    from onnxmltools.convert.common.data_types import FloatTensorType

    model: onnx.ModelProto = onnxmltools.convert_lightgbm(
        booster,
        initial_types=[(INPUT_NAME, FloatTensorType([None, n_features]))],
        target_opset=TARGET_OPSET,
        zipmap=False,
    )
    return model


_NODE_KEYS = (
    "nodes_falsenodeids",
    "nodes_featureids",
    "nodes_hitrates",
    "nodes_missing_value_tracks_true",
    "nodes_modes",
    "nodes_nodeids",
    "nodes_treeids",
    "nodes_truenodeids",
    "nodes_values",
)


def _tree_attributes(model: onnx.ModelProto, member: int) -> dict[str, Any]:
    trees = [n for n in model.graph.node if n.op_type == "TreeEnsembleClassifier"]
    if len(trees) != 1:
        msg = f"member {member}: got {len(trees)} TreeEnsembleClassifier nodes, expected 1"
        raise BundleError(msg)
    attrs = {a.name: helper.get_attribute_value(a) for a in trees[0].attribute}
    if attrs.get("post_transform") != b"LOGISTIC" or set(attrs.get("class_ids", [])) - {0}:
        msg = f"member {member}: expected a binary classifier with a logistic link"
        raise BundleError(msg)
    return attrs


def merge_members(models: Sequence[onnx.ModelProto], *, n_features: int) -> onnx.ModelProto:
    """Fuse converted binary members into one ``TreeEnsembleRegressor`` (one target per member) + ``Sigmoid``.

    Each member's leaf weights are its raw log-odds; summing them per target and
    applying the sigmoid gives exactly the classifier's ``p(book)``, without the
    label output, the ``[1 - p, p]`` pair and the per-member slicing. One node
    walks all members' trees: 7.7 us per single row against 14.7 us for the
    classifier graph in our measurements.
    """
    merged: dict[str, list[Any]] = {key: [] for key in (*_NODE_KEYS, "target_ids", "target_nodeids")}
    merged.update(target_treeids=[], target_weights=[])
    offset = 0
    for i, model in enumerate(models):
        attrs = _tree_attributes(model, i)
        for key in _NODE_KEYS:
            values = list(attrs[key])
            merged[key] += [t + offset for t in values] if key == "nodes_treeids" else values
        merged["target_ids"] += [i] * len(attrs["class_ids"])
        merged["target_nodeids"] += list(attrs["class_nodeids"])
        merged["target_treeids"] += [t + offset for t in attrs["class_treeids"]]
        merged["target_weights"] += list(attrs["class_weights"])
        offset = max(merged["nodes_treeids"]) + 1
    attributes: dict[str, Any] = {"n_targets": len(models), "aggregate_function": "SUM", "post_transform": "NONE"}
    trees = helper.make_node("TreeEnsembleRegressor", [INPUT_NAME], ["log_odds"], domain="ai.onnx.ml")
    trees.attribute.extend(helper.make_attribute(key, value) for key, value in {**attributes, **merged}.items())
    graph = helper.make_graph(
        [trees, helper.make_node("Sigmoid", ["log_odds"], [OUTPUT_NAME])],
        "pricestream_demand",
        [helper.make_tensor_value_info(INPUT_NAME, TensorProto.FLOAT, [None, n_features])],
        [helper.make_tensor_value_info(OUTPUT_NAME, TensorProto.FLOAT, [None, len(models)])],
    )
    fused = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", TARGET_OPSET), helper.make_opsetid("ai.onnx.ml", 1)],
        producer_name="pricestream",
    )
    fused.ir_version = IR_VERSION
    onnx.checker.check_model(fused)
    return fused


def to_onnx(members: Sequence[lgb.Booster], *, n_features: int) -> onnx.ModelProto:
    """Convert and fuse ``members`` (see :func:`merge_members`)."""
    return merge_members([booster_to_onnx(m, n_features=n_features) for m in members], n_features=n_features)


def split_targets(model: onnx.ModelProto) -> onnx.ModelProto:
    """A fused ``n_targets > 1`` graph as one single-target ``TreeEnsembleRegressor`` per target, concatenated.

    Graphs of another shape (one target, other nodes) come back unchanged.

    Example:
        >>> import numpy as np
        >>> from pricing.models import DemandModelConfig, fit_members
        >>> rng = np.random.default_rng(1)
        >>> x = rng.uniform(0, 1, size=(200, 2)).astype(np.float32)
        >>> y = (rng.random(200) < x[:, 1]).astype(np.float32)
        >>> fused = to_onnx(fit_members(x, y, config=DemandModelConfig(n_members=3, num_trees=4, num_leaves=4)),
        ...                 n_features=2)
        >>> [n.op_type for n in split_targets(fused).graph.node]
        ['TreeEnsembleRegressor', 'TreeEnsembleRegressor', 'TreeEnsembleRegressor', 'Concat', 'Sigmoid']
    """
    nodes = list(model.graph.node)
    if [n.op_type for n in nodes] != ["TreeEnsembleRegressor", "Sigmoid"]:
        return model
    attrs = {a.name: a for a in nodes[0].attribute}
    n_targets = attrs["n_targets"].i if "n_targets" in attrs else 1
    if n_targets < 2 or ("post_transform" in attrs and attrs["post_transform"].s != b"NONE"):
        return model
    values = {name: _values(attr) for name, attr in attrs.items() if name.startswith(("nodes_", "target_"))}
    tree_target = np.zeros(int(values["target_treeids"].max()) + 1, dtype=np.int64)
    tree_target[values["target_treeids"]] = values["target_ids"]
    node_target = tree_target[values["nodes_treeids"]]
    parts = [_target_node(k, attrs, values, node_target) for k in range(n_targets)]
    concat = helper.make_node("Concat", [n.output[0] for n in parts], ["log_odds"], axis=1)
    graph = helper.make_graph([*parts, concat, nodes[1]], model.graph.name, list(model.graph.input),
                              list(model.graph.output))
    split = helper.make_model(graph, opset_imports=list(model.opset_import), producer_name=model.producer_name)
    split.ir_version = model.ir_version
    return split


def _target_node(
    k: int,
    attrs: Mapping[str, onnx.AttributeProto],
    values: Mapping[str, npt.NDArray[Any]],
    node_target: npt.NDArray[np.int64],
) -> onnx.NodeProto:
    """The single-target ``TreeEnsembleRegressor`` of target ``k``: its trees' nodes, and their leaves as target 0."""
    node = helper.make_node("TreeEnsembleRegressor", [INPUT_NAME], [f"log_odds_{k}"], domain="ai.onnx.ml")
    for name, array in values.items():
        mask = (node_target if name.startswith("nodes_") else values["target_ids"]) == k
        picked = np.zeros(int(mask.sum()), dtype=np.int64) if name == "target_ids" else array[mask]
        _fill(node.attribute.add(), attrs[name], picked)
    node.attribute.extend(helper.make_attribute(key, value) for key, value in
                          {"n_targets": 1, "aggregate_function": "SUM", "post_transform": "NONE"}.items())
    return node


def _values(attr: onnx.AttributeProto) -> npt.NDArray[Any]:
    if attr.type == onnx.AttributeProto.INTS:
        return np.fromiter(attr.ints, dtype=np.int64, count=len(attr.ints))
    if attr.type == onnx.AttributeProto.FLOATS:
        return np.fromiter(attr.floats, dtype=np.float32, count=len(attr.floats))
    return np.array(list(attr.strings), dtype=object)


def _fill(out: onnx.AttributeProto, like: onnx.AttributeProto, values: npt.NDArray[Any]) -> None:
    """Name and type ``out`` like ``like`` and give it ``values`` (in place: no copy of a large attribute)."""
    out.name, out.type = like.name, like.type
    {onnx.AttributeProto.INTS: out.ints, onnx.AttributeProto.FLOATS: out.floats,
     onnx.AttributeProto.STRINGS: out.strings}[like.type].extend(values.tolist())


def session_options() -> ort.SessionOptions:
    """Single-threaded, sequential, fully optimised: latency per call, not throughput per core."""
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.log_severity_level = 3  # errors only: the library never prints
    return opts


class OnnxDemandModel:
    """An onnxruntime session over a merged demand graph.

    Args:
        model: serialized ONNX bytes or a path to a ``.onnx`` file.
    """

    def __init__(self, model: bytes | str) -> None:
        try:
            proto = onnx.load_from_string(model) if isinstance(model, bytes) else onnx.load(model)
            self._session = ort.InferenceSession(
                split_targets(proto).SerializeToString(),
                sess_options=session_options(),
                providers=["CPUExecutionProvider"],
            )
        except (RuntimeError, ValueError, OSError, google.protobuf.message.DecodeError) as exc:
            msg = f"model: could not load ONNX graph ({exc})"
            raise BundleError(msg) from exc
        inputs = self._session.get_inputs()
        self.n_features = int(inputs[0].shape[1])
        self.n_members = int(self._session.get_outputs()[0].shape[1])
        self._outputs = [OUTPUT_NAME]

    def predict(self, x: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """``(n_rows, n_members)`` booking probabilities for a float32 ``(n_rows, n_features)`` batch."""
        out: npt.NDArray[np.float32] = self._session.run(self._outputs, {INPUT_NAME: x})[0]
        return out
