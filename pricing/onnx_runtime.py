"""ONNX export of the demand boosters and a lean onnxruntime session around it.

Every member booster is converted with onnxmltools (``TreeEnsembleClassifier``,
no ZipMap); :func:`merge_members` keeps only the tree node of each member,
slices out ``p(book)`` and concatenates the members into one ``(n, k)`` output
called ``p_book``. One graph, one ``session.run`` per quote, whatever the
ensemble size (``bench/onnx_vs_native.py`` measures it against one session
per member).

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

from collections.abc import Sequence

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


def booster_to_onnx(booster: lgb.Booster, *, n_features: int) -> onnx.ModelProto:
    """One booster as onnxmltools emits it (outputs ``label`` and ``probabilities``)."""
    import onnxmltools
    from onnxmltools.convert.common.data_types import FloatTensorType

    return onnxmltools.convert_lightgbm(
        booster,
        initial_types=[(INPUT_NAME, FloatTensorType([None, n_features]))],
        target_opset=TARGET_OPSET,
        zipmap=False,
    )


def merge_members(models: Sequence[onnx.ModelProto], *, n_features: int) -> onnx.ModelProto:
    """Fuse converted members into one graph with a single ``(n, k)`` float output ``p_book``."""
    nodes: list[onnx.NodeProto] = []
    columns: list[str] = []
    initializers = [
        helper.make_tensor("p1_start", TensorProto.INT64, [1], [1]),
        helper.make_tensor("p1_end", TensorProto.INT64, [1], [2]),
        helper.make_tensor("p1_axis", TensorProto.INT64, [1], [1]),
    ]
    ml_version = 1
    for i, model in enumerate(models):
        trees = [n for n in model.graph.node if n.op_type == "TreeEnsembleClassifier"]
        if len(trees) != 1:
            msg = f"member {i}: got {len(trees)} TreeEnsembleClassifier nodes, expected 1"
            raise BundleError(msg)
        node = onnx.NodeProto()
        node.CopyFrom(trees[0])
        node.name = f"m{i}_trees"
        node.ClearField("output")
        node.output.extend([f"m{i}_label", f"m{i}_proba"])
        nodes.append(node)
        nodes.append(helper.make_node("Slice", [f"m{i}_proba", "p1_start", "p1_end", "p1_axis"], [f"m{i}_p1"]))
        columns.append(f"m{i}_p1")
        ml_version = max(ml_version, *(o.version for o in model.opset_import if o.domain == "ai.onnx.ml"))
    nodes.append(helper.make_node("Concat", columns, [OUTPUT_NAME], axis=1))
    graph = helper.make_graph(
        nodes,
        "pricestream_demand",
        [helper.make_tensor_value_info(INPUT_NAME, TensorProto.FLOAT, [None, n_features])],
        [helper.make_tensor_value_info(OUTPUT_NAME, TensorProto.FLOAT, [None, len(models)])],
        initializer=initializers,
    )
    merged = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", TARGET_OPSET), helper.make_opsetid("ai.onnx.ml", ml_version)],
        producer_name="pricestream",
    )
    merged.ir_version = models[0].ir_version if models else merged.ir_version
    onnx.checker.check_model(merged)
    return merged


def to_onnx(members: Sequence[lgb.Booster], *, n_features: int) -> onnx.ModelProto:
    """Convert and fuse ``members`` (see :func:`merge_members`)."""
    return merge_members([booster_to_onnx(m, n_features=n_features) for m in members], n_features=n_features)


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
            self._session = ort.InferenceSession(
                model, sess_options=session_options(), providers=["CPUExecutionProvider"]
            )
        except (RuntimeError, ValueError) as exc:
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
