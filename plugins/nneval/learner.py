"""NNEval (Sharif et al., ECCV 2018): a learned caption metric over other metrics' scores.

The learner ``nneval`` fits a ReLU MLP that tells human captions (class 1) from machine captions
(class 0) on a feature vector of metric scores, early-stopped on the Kendall τ between P(human)
and validation human judgments. ``fit_ratings`` instead fits P(human) to human ratings (each
judged item's mean rating rescaled to [0, 1], soft-target cross-entropy), early-stopped likewise.
Saved, it is the distance ``nneval(model=PATH)``: the score of a caption is P(human). Defaults
follow the paper; the released code's choices are options (``scaling=none``, ``init=he-normal``,
``lr_decay=0.5``/``decay_every=3``). See docs/metrics/nneval.md.

Non-finite feature values (e.g. a WMD with no shared vocabulary) follow ``nonfinite``:
``worst`` replaces each by the feature's worst finite training value (its minimum for a
similarity, its maximum for a distance) and counts the replacements in the model file; ``raise``
refuses them. No example is ever dropped.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
from capmetrics import Learner
from capmetrics.errors import MetricError, NotFittedError
from capmetrics.plugins.nneval.features import build_feature, check_features, paper_features
from capmetrics.plugins.nneval.model_files import (
    MODEL_FORMAT,
    MODEL_JSON,
    WEIGHTS,
    model_folder,
    write_weights,
)


class NNEval(Learner):
    """The NNEval learner: an MLP over metric scores trained on human-vs-machine captions or ratings.

    Args:
        features: feature metric specs; ``None`` for the paper's set (CIDEr-D, BLEU-1..4,
            METEOR, WMD similarity; SPICE only when listed) as far as installed.
        hidden: sizes of the hidden ReLU layers.
        scaling: ``minmax`` (paper: each feature to [-1, 1] over the training data) or ``none``
            (released code).
        init: ``glorot-uniform`` (paper) or ``he-normal`` (released code).
        l2: weight of ½·Σ‖W‖² (biases not regularised).
        lr: Adam learning rate.
        batch_size: mini-batch size (paper 75).
        max_epochs: at most this many epochs (paper 500).
        patience: stop after this many epochs without a better validation τ (0: run all).
        lr_decay: multiply the learning rate by this every ``decay_every`` epochs (0: never).
        decay_every: see ``lr_decay`` (released code: 0.5 every 3 epochs).
        validation_rating: per validation item, the ``mode`` (paper; ties: median of the modes)
            or ``mean`` of its ratings, or ``all`` rating points.
        kendall: τ variant for early stopping, ``b`` or ``c``; or one per validation set (a list,
            e.g. ``[c, b]`` for Flickr8k-Expert then Flickr8k-CF, their presets' statistics).
        nonfinite: ``worst`` or ``raise`` (module docstring).
        seed: seeds initialisation and mini-batch order.
        cache_dir: folder for cached feature matrices (``None``: no cache).
    """

    name = "nneval"

    def __init__(self, features: list[str] | None = None, hidden: list[int] = [72, 72],  # noqa: B006
                 scaling: Literal["minmax", "none"] = "minmax",
                 init: Literal["glorot-uniform", "he-normal"] = "glorot-uniform", l2: float = 1e-4,
                 lr: float = 1e-3, batch_size: int = 75, max_epochs: int = 500, patience: int = 20,
                 lr_decay: float = 1.0, decay_every: int = 0,
                 validation_rating: Literal["mode", "mean", "all"] = "mode", kendall: Literal["b", "c"] | list[Literal["b", "c"]] = "b",
                 nonfinite: Literal["worst", "raise"] = "worst", seed: int = 0, cache_dir: str | None = None) -> None:
        self.features = features
        self.hidden = hidden
        self.scaling = scaling
        self.init = init
        self.l2 = l2
        self.lr = lr
        self.batch_size = batch_size
        self.max_epochs = max_epochs
        self.patience = patience
        self.lr_decay = lr_decay
        self.decay_every = decay_every
        self.validation_rating = validation_rating
        self.kendall = kendall
        self.nonfinite = nonfinite
        self.seed = seed
        self.cache_dir = cache_dir

    # -- features ---------------------------------------------------------------------------
    def feature_specs(self) -> list[str]:
        """The fitted feature specs, else the configured ones (resolving ``None``)."""
        if hasattr(self, "features_"):
            return list(self.features_)
        return list(self.features) if self.features is not None else paper_features()

    def raw_features(self, candidates: Sequence[str], references: Sequence[Sequence[str]]) -> np.ndarray:
        """Feature matrix (candidates × features) before the non-finite policy and scaling."""
        from capmetrics.plugins.nneval.features import feature_matrix

        specs = self.feature_specs()
        built = self.__dict__.get("_feature_metrics")
        if built is None or built[0] != specs:  # built once, so a JVM or an embedding model loads once
            built = self.__dict__["_feature_metrics"] = (specs, check_features(specs, "NNEval"))
        return feature_matrix(built[1], candidates, references, self.cache_dir)

    def _clean(self, x: np.ndarray, fitting: bool) -> np.ndarray:
        bad = ~np.isfinite(x)
        if fitting:
            counts = bad.sum(axis=0)
            self.nonfinite_counts_ = {s: int(c) for s, c in zip(self.features_, counts)}
            if bad.all(axis=0).any():
                raise MetricError("NNEval: feature(s) with no finite training value: "
                                  + ", ".join(s for s, b in zip(self.features_, bad.all(axis=0)) if b))
        if not bad.any():
            return x
        if self.nonfinite == "raise":
            cols = [s for s, b in zip(self.features_, bad.any(axis=0)) if b]
            rows = np.flatnonzero(bad.any(axis=1))
            raise MetricError(f"NNEval: {int(bad.sum())} non-finite feature value(s) in {', '.join(cols)} "
                              f"(first at candidate {rows[0]}); use nonfinite=worst to replace them")
        return np.where(bad, self.fill_[None, :], x)

    def _worst(self, x: np.ndarray) -> np.ndarray:
        higher = np.array([build_feature(s).higher_is_better for s in self.features_])
        masked = np.where(np.isfinite(x), x, np.nan)
        return np.where(higher, np.nanmin(masked, axis=0), np.nanmax(masked, axis=0))

    def _inputs(self, raw: np.ndarray) -> np.ndarray:
        x = self._clean(np.asarray(raw, dtype=float), fitting=False)
        return self.scaler_.transform(x) if self.scaler_ is not None else x

    # -- training -----------------------------------------------------------------------------
    def fit(self, training: Any, validation: Any = None) -> NNEval:
        """Fit on a :class:`~capmetrics.plugins.nneval.training_data.TrainingSet`, early-stopping on
        :class:`~capmetrics.data.judgments.Judgments` when given."""
        self.features_ = self.feature_specs()
        x = self.raw_features(training.candidates, training.references)
        val = None
        if validation is not None:
            cands, refs, _ = validation.dataset.flat_pairs()
            val = (self.raw_features(cands, refs), validation)
        return self.fit_features(x, training.labels, val)

    def fit_features(self, x: np.ndarray, labels: np.ndarray,
                     validation: tuple[np.ndarray, Any] | None = None) -> NNEval:
        """Fit on precomputed raw features; ``validation`` = (raw features per item, Judgments)."""
        x = np.asarray(x, dtype=float)
        labels = np.asarray(labels, dtype=int)
        if set(np.unique(labels)) != {0, 1}:
            raise MetricError("NNEval needs both human (1) and machine (0) training candidates")
        self._train(x, labels, [validation] if validation is not None else [])
        self.n_train_ = {"human": int(labels.sum()), "machine": int((labels == 0).sum())}
        self.objective_ = "human-vs-machine"
        return self

    def fit_ratings(self, training: Sequence[Any], validation: Sequence[Any] = ()) -> NNEval:
        """Fit P(human) to human ratings: every item of the :class:`~capmetrics.data.judgments.Judgments`
        in ``training`` is an example whose target is its mean rating rescaled to [0, 1]
        (:func:`~capmetrics.plugins.nneval.rating_targets.rating_targets`); early-stops on the mean
        Kendall τ over the ``validation`` judgments."""
        self.features_ = self.feature_specs()

        def with_features(sets: Sequence[Any]) -> list[tuple[np.ndarray, Any]]:
            return [(self.raw_features(*j.dataset.flat_pairs()[:2]), j) for j in sets]

        return self.fit_rating_features(with_features(training), with_features(validation))

    def fit_rating_features(self, training: Sequence[tuple[np.ndarray, Any]],
                            validation: Sequence[tuple[np.ndarray, Any]] = ()) -> NNEval:
        """:meth:`fit_ratings` on precomputed raw features: (raw features per item, Judgments) pairs."""
        from capmetrics.plugins.nneval.rating_targets import rating_targets, source_name

        if not training:
            raise MetricError("NNEval: fit_ratings needs at least one set of training judgments")
        x = np.vstack([np.asarray(f, dtype=float) for f, _ in training])
        targets = np.concatenate([rating_targets(j) for _, j in training])
        if x.shape[0] != targets.size:
            raise MetricError(f"NNEval: feature rows {x.shape[0]} do not match {targets.size} judged items")
        self._train(x, targets, list(validation))
        self.n_train_ = {}
        for k, (_, j) in enumerate(training):
            name = source_name(j)
            self.n_train_[name if name not in self.n_train_ else f"{name} ({k + 1})"] = len(j.dataset)
        self.objective_ = "ratings"
        return self

    def _train(self, x: np.ndarray, targets: np.ndarray, validation: list[tuple[np.ndarray, Any]]) -> None:
        """Scale, initialise and train on class labels or soft targets (``network.train``)."""
        from capmetrics.plugins.nneval.network import MLP, MinMaxScaler, train

        if not hasattr(self, "features_"):
            self.features_ = self.feature_specs()
        if x.shape != (targets.size, len(self.features_)):
            raise MetricError(f"NNEval: feature matrix {x.shape} does not match {targets.size} targets × "
                              f"{len(self.features_)} features")
        self.fill_ = self._worst(x)
        x = self._clean(x, fitting=True)
        self.scaler_ = MinMaxScaler.fit(x) if self.scaling == "minmax" else None
        inputs = self.scaler_.transform(x) if self.scaler_ is not None else x
        rng = np.random.default_rng(self.seed)
        self.mlp_ = MLP.create([x.shape[1], *self.hidden, 2], self.init, rng)
        validate = self._validator(validation) if validation else None
        self.log_ = train(self.mlp_, inputs, targets, lr=self.lr, batch_size=self.batch_size, l2=self.l2,
                          max_epochs=self.max_epochs, patience=self.patience, lr_decay=self.lr_decay,
                          decay_every=self.decay_every, rng=rng, validate=validate)
        if validate is not None and self.log_.best_epoch < 0:
            warnings.warn("NNEval: no epoch gave a defined validation tau (every caption scored alike); "
                          "the initial weights were kept. Lower lr.", stacklevel=3)

    def _validator(self, sets: list[tuple[np.ndarray, Any]]) -> Callable[[Any], float]:
        """The early-stopping criterion: Kendall τ (``kendall``: the variant, or one per set) of
        P(human) against each validation set's ratings (``validation_rating``), averaged over the sets."""
        from capmetrics.meta import correlations

        variants = self.kendall if isinstance(self.kendall, list) else [self.kendall] * len(sets)
        if len(variants) != len(sets) or not set(variants) <= {"b", "c"}:
            raise MetricError(f"NNEval: kendall={self.kendall!r} must be b, c or a list of them, one per "
                              f"validation set ({len(sets)})")
        prepared = []
        for (raw, judgments), variant in zip(sets, variants):
            if self.validation_rating == "all":
                index, rating = judgments.point_item, judgments.point_rating
            else:
                index, rating = np.arange(len(judgments.dataset)), judgments.item_rating(self.validation_rating)
            prepared.append((self._inputs(raw), index, rating, f"kendall_{variant}"))

        def validate(model: Any) -> float:
            values = [correlations(model.predict(inputs)[index], rating)[key] for inputs, index, rating, key in prepared]
            value = values[0] if len(values) == 1 else float(np.mean(values))
            return -np.inf if np.isnan(value) else value

        return validate

    # -- use ------------------------------------------------------------------------------------
    def _check_fitted(self) -> None:
        if not hasattr(self, "mlp_"):
            raise NotFittedError("NNEval is not fitted; call fit() or NNEval.load(path)")

    def predict_features(self, raw: np.ndarray) -> np.ndarray:
        """P(human) from raw feature rows."""
        self._check_fitted()
        return self.mlp_.predict(self._inputs(raw))

    def predict(self, candidates: Sequence[str], references: Sequence[Sequence[str]]) -> np.ndarray:
        """P(human) of each candidate against its references."""
        self._check_fitted()
        return self.predict_features(self.raw_features(candidates, references))

    # -- persistence ------------------------------------------------------------------------------
    def save(self, path: str | Path, provenance: dict[str, Any] | None = None) -> Path:
        """Write ``path/nneval.json`` (features, scaler, settings, training log, ``provenance``:
        how it was trained) and ``path/weights.npz``; equal models give equal bytes."""
        self._check_fitted()
        folder = Path(path)
        folder.mkdir(parents=True, exist_ok=True)
        arrays = {f"w{i}": w for i, w in enumerate(self.mlp_.weights)}
        arrays.update({f"b{i}": b for i, b in enumerate(self.mlp_.biases)})
        write_weights(folder / WEIGHTS, arrays)
        from capmetrics import __version__

        meta: dict[str, Any] = {
            "format": MODEL_FORMAT, "version": 1, "capmetrics": __version__,
            "features": self.features_,
            "feature_signatures": [build_feature(s).signature() for s in self.features_],
            "scaler": None if self.scaler_ is None else self.scaler_.to_json(),
            "fill": self.fill_.tolist(),
            "params": {k: v for k, v in self.get_params().items() if k not in ("features", "cache_dir")},
            "training": {"examples": self.n_train_, "nonfinite_replaced": self.nonfinite_counts_,
                         "best_epoch": self.log_.best_epoch + 1, "epochs_run": len(self.log_.loss),
                         "loss": self.log_.loss, "validation_kendall": self.log_.validation},
        }
        if getattr(self, "objective_", None) == "ratings":  # absent for human-vs-machine (older files)
            meta["training"]["objective"] = "ratings"
        if provenance:
            meta["provenance"] = provenance
        (folder / MODEL_JSON).write_text(json.dumps(meta, indent=1), encoding="utf-8")
        return folder

    @classmethod
    def load(cls, path: str | Path) -> NNEval:
        """Load a model written by :meth:`save` (the folder or its ``nneval.json``)."""
        from capmetrics.plugins.nneval.network import MLP, MinMaxScaler

        folder = model_folder(path)
        if not (folder / MODEL_JSON).is_file() or not (folder / WEIGHTS).is_file():
            raise MetricError(f"{folder} is not an NNEval model: expected {MODEL_JSON} and {WEIGHTS} in it")
        meta = json.loads((folder / MODEL_JSON).read_text(encoding="utf-8"))
        if meta.get("format") != MODEL_FORMAT:
            raise MetricError(f"{folder / MODEL_JSON} is not a {MODEL_FORMAT} file")
        check_features(meta["features"], f"NNEval model {folder}")
        model = cls(features=list(meta["features"]), **meta["params"])
        model.features_ = list(meta["features"])
        with np.load(folder / WEIGHTS) as arrays:
            n = len([k for k in arrays.files if k.startswith("w")])
            model.mlp_ = MLP([arrays[f"w{i}"] for i in range(n)], [arrays[f"b{i}"] for i in range(n)])
        scaler = meta["scaler"]
        model.scaler_ = None if scaler is None else MinMaxScaler(np.array(scaler["lo"]), np.array(scaler["hi"]))
        model.fill_ = np.array(meta["fill"], dtype=float)
        model.training_ = meta["training"]
        return model
