"""NNEval's network: gradients, scaling, early stopping."""

from __future__ import annotations

import numpy as np
import pytest
from capmetrics.plugins.nneval.network import MLP, MinMaxScaler, train


def assert_gradients_match_finite_differences(
    mlp: MLP, x: np.ndarray, y: np.ndarray, rng: np.random.Generator
) -> None:
    _, grads = mlp.gradients(x, y, l2=0.1)
    for param, grad in zip(mlp.params, grads):
        idx = tuple(rng.integers(0, s) for s in param.shape)
        old = param[idx]
        param[idx] = old + 1e-6
        up = mlp.gradients(x, y, 0.1)[0]
        param[idx] = old - 1e-6
        down = mlp.gradients(x, y, 0.1)[0]
        param[idx] = old
        assert grad[idx] == pytest.approx((up - down) / 2e-6, rel=1e-4, abs=1e-8)


def test_gradients_match_finite_differences() -> None:
    rng = np.random.default_rng(0)
    mlp = MLP.create([3, 5, 4, 2], "he-normal", rng)
    assert_gradients_match_finite_differences(
        mlp, rng.normal(size=(7, 3)), rng.integers(0, 2, 7), rng
    )


def test_scaler_and_early_stopping_keep_the_best_epoch() -> None:
    scaler = MinMaxScaler.fit(np.array([[0.0, 5.0], [2.0, 5.0]]))
    assert scaler.transform(np.array([[1.0, 5.0], [3.0, 7.0]])).tolist() == [[0.0, 0.0], [2.0, 0.0]]
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 2))
    y = (x[:, 0] > 0).astype(int)
    mlp = MLP.create([2, 8, 2], "glorot-uniform", rng)
    scores = iter([0.1, 0.5, 0.3, 0.2, 0.4, 0.9])
    settings = {
        "lr": 0.01,
        "batch_size": 30,
        "l2": 0.0,
        "max_epochs": 10,
        "patience": 3,
        "lr_decay": 1.0,
        "decay_every": 0,
    }
    log = train(mlp, x, y, rng=rng, validate=lambda m: next(scores), **settings)
    assert log.best_epoch == 1 and len(log.loss) == 5  # stopped 3 epochs after the best (0.5)
    assert ((mlp.predict(x) > 0.5) == y).mean() > 0.8


def test_soft_targets_generalise_the_labels() -> None:
    rng = np.random.default_rng(1)
    mlp = MLP.create([3, 5, 2], "glorot-uniform", rng)
    x, y = rng.normal(size=(6, 3)), np.array([0, 1, 1, 0, 1, 0])
    loss, grads = mlp.gradients(x, y, l2=0.1)
    soft_loss, soft_grads = mlp.gradients(x, y.astype(float), l2=0.1)
    assert soft_loss == loss and all(np.array_equal(a, b) for a, b in zip(grads, soft_grads))
    t = np.array([0.0, 0.25, 1.0, 0.5, 0.75, 1 / 3])
    p = mlp.predict(x)
    expected = -np.mean(t * np.log(p) + (1 - t) * np.log(1 - p)) + 0.05 * sum(
        (w * w).sum() for w in mlp.weights
    )
    assert mlp.gradients(x, t, l2=0.1)[0] == pytest.approx(expected, rel=1e-12)
    assert_gradients_match_finite_differences(mlp, x, t, rng)
