"""NNEval's network in numpy: min-max scaling, a ReLU MLP with a 2-way softmax, Adam training.

The loss is the mean softmax cross-entropy plus ``l2 * sum(||W||^2) / 2`` over the weight
matrices (biases are not regularised; the ½ is TensorFlow's ``l2_loss``, as in the released
code). Class 1 is "human-written"; a caption's score is P(class 1). Targets are class labels
(0/1) or, to learn from human ratings, soft targets: the wanted P(class 1) in [0, 1] (the
cross-entropy against the distribution (1 - t, t); for t in {0, 1} it is the same loss).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from capmetrics.errors import MetricError


@dataclass
class MinMaxScaler:
    """Maps each feature's training range [lo, hi] to [-1, 1] (a constant feature maps to 0)."""

    lo: np.ndarray
    hi: np.ndarray

    @classmethod
    def fit(cls, x: np.ndarray) -> MinMaxScaler:
        return cls(x.min(axis=0), x.max(axis=0))

    def transform(self, x: np.ndarray) -> np.ndarray:
        span = self.hi - self.lo
        safe = np.where(span > 0, span, 1.0)
        return np.where(span > 0, 2 * (x - self.lo) / safe - 1, 0.0)

    def to_json(self) -> dict[str, list[float]]:
        return {"lo": self.lo.tolist(), "hi": self.hi.tolist()}


def init_weights(sizes: list[int], scheme: str, rng: np.random.Generator) -> list[np.ndarray]:
    """Weight matrices for layer sizes ``sizes``: Glorot-uniform (paper) or He-normal (released
    code)."""
    weights = []
    for fan_in, fan_out in itertools.pairwise(sizes):
        if scheme == "glorot-uniform":
            limit = np.sqrt(6.0 / (fan_in + fan_out))
            weights.append(rng.uniform(-limit, limit, (fan_in, fan_out)))
        elif scheme == "he-normal":
            weights.append(rng.standard_normal((fan_in, fan_out)) * np.sqrt(2.0 / fan_in))
        else:
            raise MetricError(f"unknown initialisation {scheme!r}; use glorot-uniform or he-normal")
    return weights


@dataclass
class MLP:
    """A ReLU multilayer perceptron with a softmax output."""

    weights: list[np.ndarray]
    biases: list[np.ndarray]

    @classmethod
    def create(cls, sizes: list[int], scheme: str, rng: np.random.Generator) -> MLP:
        weights = init_weights(sizes, scheme, rng)
        return cls(weights, [np.zeros(w.shape[1]) for w in weights])

    def _layers(self, x: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
        """Hidden activations (input first) and the output logits."""
        acts = [x]
        for w, b in zip(self.weights[:-1], self.biases[:-1]):
            acts.append(np.maximum(acts[-1] @ w + b, 0.0))
        return acts, acts[-1] @ self.weights[-1] + self.biases[-1]

    def forward(self, x: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
        """Hidden activations (input first) and the softmax probabilities."""
        acts, logits = self._layers(x)
        logits -= logits.max(axis=1, keepdims=True)
        e = np.exp(logits)
        return acts, e / e.sum(axis=1, keepdims=True)

    def predict(self, x: np.ndarray) -> np.ndarray:
        """P(class 1) per row."""
        return self.forward(x)[1][:, 1]

    def log_odds(self, x: np.ndarray) -> np.ndarray:
        """log P(class 1) − log P(class 0) per row (the difference of the two output logits)."""
        logits = self._layers(x)[1]
        return logits[:, 1] - logits[:, 0]

    def gradients(self, x: np.ndarray, y: np.ndarray, l2: float) -> tuple[float, list[np.ndarray]]:
        """Loss and gradients (weights first, then biases) on one mini-batch; ``y``: integer class
        labels, or float soft targets P(class 1) in [0, 1]."""
        acts, probs = self.forward(x)
        n = x.shape[0]
        if np.issubdtype(y.dtype, np.integer):
            loss = -np.log(np.maximum(probs[np.arange(n), y], 1e-300)).mean()
            delta = probs.copy()
            delta[np.arange(n), y] -= 1.0
        else:
            target = np.column_stack([1.0 - y, y])
            loss = -(target * np.log(np.maximum(probs, 1e-300))).sum(axis=1).mean()
            delta = probs - target
        loss += 0.5 * l2 * sum(float((w * w).sum()) for w in self.weights)
        delta /= n
        gw, gb = [], []
        for layer in range(len(self.weights) - 1, -1, -1):
            gw.append(acts[layer].T @ delta + l2 * self.weights[layer])
            gb.append(delta.sum(axis=0))
            if layer:
                delta = (delta @ self.weights[layer].T) * (acts[layer] > 0)
        return float(loss), gw[::-1] + gb[::-1]

    @property
    def params(self) -> list[np.ndarray]:
        return self.weights + self.biases


@dataclass
class Adam:
    """Adam (Kingma & Ba) with TensorFlow's defaults β1 0.9, β2 0.999, ε 1e-8."""

    lr: float
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    t: int = 0
    m: list[np.ndarray] = field(default_factory=list)
    v: list[np.ndarray] = field(default_factory=list)

    def step(self, params: list[np.ndarray], grads: list[np.ndarray]) -> None:
        if not self.m:
            self.m = [np.zeros_like(p) for p in params]
            self.v = [np.zeros_like(p) for p in params]
        self.t += 1
        correction = np.sqrt(1 - self.beta2**self.t) / (1 - self.beta1**self.t)
        for p, g, m, v in zip(params, grads, self.m, self.v):
            m *= self.beta1
            m += (1 - self.beta1) * g
            v *= self.beta2
            v += (1 - self.beta2) * g * g
            p -= self.lr * correction * m / (np.sqrt(v) + self.eps)


@dataclass
class TrainLog:
    """Per-epoch training loss and validation criterion; the epoch whose weights were kept."""

    loss: list[float] = field(default_factory=list)
    validation: list[float] = field(default_factory=list)
    best_epoch: int = -1


def train(
    model: MLP,
    x: np.ndarray,
    y: np.ndarray,
    *,
    lr: float,
    batch_size: int,
    l2: float,
    max_epochs: int,
    patience: int,
    lr_decay: float,
    decay_every: int,
    rng: np.random.Generator,
    validate: Callable[[MLP], float] | None = None,
) -> TrainLog:
    """Mini-batch Adam; keeps the weights of the epoch with the best ``validate`` value.

    Without ``validate`` the final weights are kept. Training stops after ``patience`` epochs
    without improvement (0: never early).
    """
    opt = Adam(lr)
    log = TrainLog()
    best = -np.inf
    best_params = [p.copy() for p in model.params]
    for epoch in range(max_epochs):
        if decay_every and epoch and epoch % decay_every == 0:
            opt.lr *= lr_decay
        order = rng.permutation(len(x))
        total = 0.0
        for start in range(0, len(x), batch_size):
            batch = order[start : start + batch_size]
            loss, grads = model.gradients(x[batch], y[batch], l2)
            opt.step(model.params, grads)
            total += loss * len(batch)
        log.loss.append(total / len(x))
        if not np.isfinite(log.loss[-1]):
            raise MetricError(
                f"NNEval training diverged at epoch {epoch + 1} (loss {log.loss[-1]}); lower lr"
            )
        if validate is None:
            continue
        value = validate(model)
        log.validation.append(value)
        if value > best:
            best, log.best_epoch = value, epoch
            best_params = [p.copy() for p in model.params]
        elif patience and epoch - log.best_epoch >= patience:
            break
    if validate is not None:
        for p, saved in zip(model.params, best_params):
            p[...] = saved
    else:
        log.best_epoch = max_epochs - 1
    return log
