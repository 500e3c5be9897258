"""A fitted scikit-learn GradientBoostingRegressor as flat arrays, evaluated for a batch of kernels in a few numpy
operations. A search loop asks for a hundred graphs a second; scikit-learn's own predict costs about a millisecond a
call however few rows it gets, and a graph needs one call per kernel kind. The arrays give the same numbers
(tests/test_kernels_predict.py checks them against GradientBoostingRegressor.predict)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.ensemble import GradientBoostingRegressor

LEAF = -1  # scikit-learn's child index of a leaf (sklearn.tree._tree.TREE_LEAF)


@dataclass(frozen=True)
class PackedTrees:
    """Every tree's nodes padded to one width: feature, threshold, children and leaf value per (tree, node)."""

    feature: np.ndarray
    threshold: np.ndarray
    left: np.ndarray
    right: np.ndarray
    value: np.ndarray
    depth: int
    base: float
    rate: float

    @classmethod
    def of(cls, model: GradientBoostingRegressor) -> PackedTrees:
        trees = [stage[0].tree_ for stage in model.estimators_]
        width = max(tree.node_count for tree in trees)

        def pad(name: str, fill: float) -> np.ndarray:
            out = np.full((len(trees), width), fill, dtype=float)
            for row, tree in enumerate(trees):
                values = getattr(tree, name)
                out[row, : tree.node_count] = values.reshape(tree.node_count)
            return out

        left, right = pad("children_left", LEAF).astype(np.int64), pad("children_right", LEAF).astype(np.int64)
        # a leaf points at itself, so every tree can be walked the same number of steps
        nodes = np.arange(width)[None, :].repeat(len(trees), axis=0)
        left, right = np.where(left == LEAF, nodes, left), np.where(right == LEAF, nodes, right)
        base = float(np.ravel(model.init_.predict(np.zeros((1, model.n_features_in_))))[0])
        return cls(pad("feature", 0).astype(np.int64), pad("threshold", 0.0), left, right, pad("value", 0.0),
                   max(tree.max_depth for tree in trees), base, float(model.learning_rate))

    def predict(self, x: np.ndarray) -> np.ndarray:
        """The regressor's prediction for each row of x."""
        x = np.asarray(x, dtype=np.float32)  # as the trees were split: on float32 features
        rows, trees = len(x), self.feature.shape[0]
        tree_index = np.arange(trees)[None, :]
        node = np.zeros((rows, trees), dtype=np.int64)
        row_index = np.arange(rows)[:, None]
        for _ in range(self.depth):
            feature = self.feature[tree_index, node]
            go_left = x[row_index, feature] <= self.threshold[tree_index, node]
            node = np.where(go_left, self.left[tree_index, node], self.right[tree_index, node])
        return np.asarray(self.base + self.rate * self.value[tree_index, node].sum(axis=1), dtype=float)
