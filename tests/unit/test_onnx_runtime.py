"""The load-time split of a fused multi-member graph: same output, bit for bit, and one node per member."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort

from pricing.models import DemandModelConfig, fit_members
from pricing.onnx_runtime import OnnxDemandModel, session_options, split_targets, to_onnx


def _data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 1, size=(n, 4)).astype(np.float32)
    x[rng.random(x.shape) < 0.1] = np.nan  # the missing-value branches must survive the split
    y = (rng.random(n) < 1 / (1 + np.exp(4 * (np.nan_to_num(x[:, 0]) - 0.5)))).astype(np.float32)
    return x, y


def test_split_graph_answers_exactly_like_the_fused_graph() -> None:
    x, y = _data(600, seed=3)
    members = fit_members(x, y, config=DemandModelConfig(n_members=3, num_trees=25, num_leaves=7, bootstrap=True))
    fused = to_onnx(members, n_features=4)
    reference = ort.InferenceSession(fused.SerializeToString(), sess_options=session_options(),
                                     providers=["CPUExecutionProvider"])
    model = OnnxDemandModel(fused.SerializeToString())
    probe, _ = _data(300, seed=4)
    expected = reference.run(None, {"input": probe})[0]
    got = model.predict(probe)
    assert got.shape == (300, 3) and model.n_members == 3
    assert np.array_equal(got, expected)
    split = split_targets(fused)
    sizes = [len([a for a in n.attribute if a.name == "nodes_nodeids"][0].ints) for n in split.graph.node[:3]]
    assert sum(sizes) == len([a for a in fused.graph.node[0].attribute if a.name == "nodes_nodeids"][0].ints)
    onnx.checker.check_model(split)


def test_a_single_member_graph_is_left_as_it_is() -> None:
    x, y = _data(300, seed=5)
    fused = to_onnx(fit_members(x, y, config=DemandModelConfig(num_trees=5, num_leaves=4)), n_features=4)
    assert split_targets(fused) is fused
