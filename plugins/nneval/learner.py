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

Features that need images (``clip-score`` and the other image-grounded metrics) are computed
with each candidate's image (its item's: ``TrainingSet.item_images``, the judged datasets'
images, ``predict(..., images)``) through the metric's ``score_images``, as ``capmetrics score``
computes them.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
from capmetrics import Learner
from capmetrics.errors import MetricError, NotFittedError
from capmetrics.plugins.nneval.features import (
    build_feature,
    build_interaction,
    check_features,
    paper_features,
)
from capmetrics.plugins.nneval.model_files import (
    MODEL_FORMAT,
    MODEL_JSON,
    MODEL_VERSION,
    WEIGHTS,
    attach_feature_files,
    confine_model_specs,
    detach_feature_files,
    model_folder,
    read_model_json,
    upgrade_model_specs,
    without_programs,
    write_weights,
)


class NNEval(Learner):
    """The NNEval learner: an MLP over metric scores trained on human-vs-machine captions or
    ratings.

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
        interaction: a sentence embedder spec (e.g. ``bert``, the bundled MiniLM): the inputs also
            get, per candidate, ``[c ⊙ r, |c − r|]`` of its unit vector ``c`` and the unit mean
            ``r`` of its references' (scaled like the features); ``None``: metric scores only.
        ensemble: ``none``: one network over all training examples; ``per-set``: with
            :meth:`fit_ratings`, one network per training judgment set, each early-stopped on all
            validation sets; a caption's score is then the logistic of the mean of their log-odds.
        seed: seeds initialisation and mini-batch order.
        cache_dir: folder for cached feature matrices (``None``: no cache).
    """

    name = "nneval"
    path_params = ("cache_dir",)  # a folder of feature values it creates
    #: Settings left out of a model file at their default, so files written before they existed
    #: stay byte-identical.
    _DEFAULTS: ClassVar[dict[str, object]] = {"interaction": None, "ensemble": "none"}

    def __init__(
        self,
        features: list[str] | None = None,
        hidden: list[int] = [72, 72],  # noqa: B006
        scaling: Literal["minmax", "none"] = "minmax",
        init: Literal["glorot-uniform", "he-normal"] = "glorot-uniform",
        l2: float = 1e-4,
        lr: float = 1e-3,
        batch_size: int = 75,
        max_epochs: int = 500,
        patience: int = 20,
        lr_decay: float = 1.0,
        decay_every: int = 0,
        validation_rating: Literal["mode", "mean", "all"] = "mode",
        kendall: Literal["b", "c"] | list[Literal["b", "c"]] = "b",
        nonfinite: Literal["worst", "raise"] = "worst",
        interaction: str | None = None,
        ensemble: Literal["none", "per-set"] = "none",
        seed: int = 0,
        cache_dir: str | None = None,
    ) -> None:
        if ensemble not in ("none", "per-set"):
            raise MetricError(f"NNEval: ensemble must be none or per-set, got {ensemble!r}")
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
        self.interaction = interaction
        self.ensemble = ensemble
        self.seed = seed
        self.cache_dir = cache_dir

    # -- features ---------------------------------------------------------------------------
    def feature_specs(self) -> list[str]:
        """The fitted feature specs, else the configured ones (resolving ``None``)."""
        if hasattr(self, "features_"):
            return list(self.features_)
        return list(self.features) if self.features is not None else paper_features()

    def run_components(self) -> list[Any]:
        """The feature metrics and interaction embedder a run builds, for readiness checks (a
        feature whose extra is missing raises here as in a run)."""
        _, metrics, embedder = self._built()
        return [*metrics, *([embedder] if embedder is not None else [])]

    def needs_images(self) -> bool:
        """Whether a feature needs the candidates' images (``clip-score``, ...)."""
        return any(m.needs_images for m in self._built()[1])

    def _built(self) -> tuple[Any, list[Any], Any]:
        specs = self.feature_specs()
        built = self.__dict__.get("_feature_metrics")
        if built is None or built[0] != (
            specs,
            self.interaction,
        ):  # built once: a JVM or a model loads once
            metrics = check_features(specs, "NNEval")
            # the interaction embedder of a feature metric (e.g. embedding-cosine's) is reused:
            # loaded once
            shared = (
                m.embedder
                for m in metrics
                if getattr(getattr(m, "embedder", None), "spec", None) == self.interaction
            )
            embedder = (
                (next(shared, None) or build_interaction(self.interaction, "NNEval"))
                if self.interaction
                else None
            )
            built = (specs, self.interaction), metrics, embedder
            self.__dict__["_feature_metrics"] = built
        return built  # type: ignore[no-any-return]

    def raw_features(
        self,
        candidates: Sequence[str],
        references: Sequence[Sequence[str]],
        images: Sequence[Any] | None = None,
        ids: Sequence[object] | None = None,
    ) -> np.ndarray:
        """Feature matrix (candidates × features) before the non-finite policy and scaling.

        ``images``: each candidate's image (a path or a loaded image), for the features that
        need images; ``ids``: each candidate's item id, to name the items without one."""
        from capmetrics.plugins.nneval.features import feature_matrix

        built = self._built()
        return feature_matrix(
            built[1], candidates, references, self.cache_dir, built[2], images, ids
        )

    def dataset_features(self, dataset: Any) -> np.ndarray:
        """:meth:`raw_features` of every candidate of a :class:`~capmetrics.data.model.Dataset`,
        with its item's image and id."""
        cands, refs, offsets = dataset.flat_pairs()
        ids = [item.id for item in dataset.items for _ in item.candidates]
        return self.raw_features(cands, refs, dataset.flat_images(), ids)

    def _clean(self, x: np.ndarray, fitting: bool) -> np.ndarray:
        bad = ~np.isfinite(x)
        if fitting:
            counts = bad.sum(axis=0)
            self.nonfinite_counts_ = {s: int(c) for s, c in zip(self.features_, counts)}
            if bad.all(axis=0).any():
                raise MetricError(
                    "NNEval: feature(s) with no finite training value: "
                    + ", ".join(s for s, b in zip(self.features_, bad.all(axis=0)) if b)
                )
        if not bad.any():
            return x
        if self.nonfinite == "raise":
            cols = [s for s, b in zip(self.features_, bad.any(axis=0)) if b]
            rows = np.flatnonzero(bad.any(axis=1))
            raise MetricError(
                f"NNEval: {int(bad.sum())} non-finite feature value(s) in {', '.join(cols)} "
                f"(first at candidate {rows[0]}); use nonfinite=worst to replace them"
            )
        return np.where(bad, self.fill_[None, :], x)

    def _worst(self, x: np.ndarray) -> np.ndarray:
        higher = np.array(
            [build_feature(s).higher_is_better for s in self.features_]
            + [True] * (x.shape[1] - len(self.features_))
        )
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
        x = self.raw_features(
            training.candidates, training.references, training.item_images, training.images
        )
        val = None
        if validation is not None:
            val = (self.dataset_features(validation.dataset), validation)
        return self.fit_features(x, training.labels, val)

    def fit_features(
        self, x: np.ndarray, labels: np.ndarray, validation: tuple[np.ndarray, Any] | None = None
    ) -> NNEval:
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
        """Fit P(human) to human ratings: every item of the
        :class:`~capmetrics.data.judgments.Judgments` in ``training`` is an example whose target is
        its mean rating rescaled to [0, 1]
        (:func:`~capmetrics.plugins.nneval.rating_targets.rating_targets`); early-stops on the mean
        Kendall τ over the ``validation`` judgments."""
        self.features_ = self.feature_specs()

        def with_features(sets: Sequence[Any]) -> list[tuple[np.ndarray, Any]]:
            return [(self.dataset_features(j.dataset), j) for j in sets]

        return self.fit_rating_features(with_features(training), with_features(validation))

    def fit_rating_features(
        self,
        training: Sequence[tuple[np.ndarray, Any]],
        validation: Sequence[tuple[np.ndarray, Any]] = (),
    ) -> NNEval:
        """:meth:`fit_ratings` on precomputed raw features: (raw features per item, Judgments)
        pairs."""
        from capmetrics.plugins.nneval.rating_targets import rating_targets, source_name

        if not training:
            raise MetricError("NNEval: fit_ratings needs at least one set of training judgments")
        x = np.vstack([np.asarray(f, dtype=float) for f, _ in training])
        targets = np.concatenate([rating_targets(j) for _, j in training])
        if x.shape[0] != targets.size:
            raise MetricError(
                f"NNEval: feature rows {x.shape[0]} do not match {targets.size} judged items"
            )
        groups = None
        if self.ensemble == "per-set" and len(training) > 1:
            ends = np.cumsum([len(j.dataset) for _, j in training])
            groups = [np.arange(end - len(j.dataset), end) for end, (_, j) in zip(ends, training)]
        self._train(x, targets, list(validation), groups)
        self.n_train_ = {}
        for k, (_, j) in enumerate(training):
            name = source_name(j)
            self.n_train_[name if name not in self.n_train_ else f"{name} ({k + 1})"] = len(
                j.dataset
            )
        self.objective_ = "ratings"
        return self

    def _train(
        self,
        x: np.ndarray,
        targets: np.ndarray,
        validation: list[tuple[np.ndarray, Any]],
        groups: list[np.ndarray] | None = None,
    ) -> None:
        """Scale, initialise and train on class labels or soft targets (``network.train``): one
        network, or one per row group of ``groups`` (all share the scaling, fitted on all rows)."""
        from capmetrics.plugins.nneval.network import MLP, MinMaxScaler, train

        if not hasattr(self, "features_"):
            self.features_ = self.feature_specs()
        extra = x.shape[1] - len(self.features_)
        if x.shape[0] != targets.size or extra < 0 or (extra > 0) != bool(self.interaction):
            raise MetricError(
                f"NNEval: feature matrix {x.shape} does not match {targets.size} targets × "
                f"{len(self.features_)} features"
                + (" and the interaction inputs" if self.interaction else "")
            )
        self.fill_ = self._worst(x)
        x = self._clean(x, fitting=True)
        self.scaler_ = MinMaxScaler.fit(x) if self.scaling == "minmax" else None
        inputs = self.scaler_.transform(x) if self.scaler_ is not None else x
        rng = np.random.default_rng(self.seed)
        validate = self._validator(validation) if validation else None
        rows = [np.arange(targets.size)] if groups is None else groups
        self.members_ = []
        for member in rows:
            mlp = MLP.create([x.shape[1], *self.hidden, 2], self.init, rng)
            log = train(
                mlp,
                inputs[member],
                targets[member],
                lr=self.lr,
                batch_size=self.batch_size,
                l2=self.l2,
                max_epochs=self.max_epochs,
                patience=self.patience,
                lr_decay=self.lr_decay,
                decay_every=self.decay_every,
                rng=rng,
                validate=validate,
            )
            if validate is not None and log.best_epoch < 0:
                warnings.warn(
                    "NNEval: no epoch gave a defined validation tau (every caption scored alike); "
                    "the initial weights were kept. Lower lr.",
                    stacklevel=3,
                )
            self.members_.append((mlp, log))
        self.mlp_, self.log_ = self.members_[0]

    def _validator(self, sets: list[tuple[np.ndarray, Any]]) -> Callable[[Any], float]:
        """The early-stopping criterion: Kendall τ (``kendall``: the variant, or one per set) of
        P(human) against each validation set's ratings (``validation_rating``), averaged over the
        sets."""
        from capmetrics.analysis.meta import correlations

        variants = self.kendall if isinstance(self.kendall, list) else [self.kendall] * len(sets)
        if len(variants) != len(sets) or not set(variants) <= {"b", "c"}:
            raise MetricError(
                f"NNEval: kendall={self.kendall!r} must be b, c or a list of them, one per "
                f"validation set ({len(sets)})"
            )
        prepared = []
        for (raw, judgments), variant in zip(sets, variants):
            if self.validation_rating == "all":
                index, rating = judgments.point_item, judgments.point_rating
            else:
                index, rating = (
                    np.arange(len(judgments.dataset)),
                    judgments.item_rating(self.validation_rating),
                )
            prepared.append((self._inputs(raw), index, rating, f"kendall_{variant}"))

        def validate(model: Any) -> float:
            values = [
                correlations(model.predict(inputs)[index], rating)[key]
                for inputs, index, rating, key in prepared
            ]
            value = values[0] if len(values) == 1 else float(np.mean(values))
            return -np.inf if np.isnan(value) else value

        return validate

    # -- use ------------------------------------------------------------------------------------
    def _check_fitted(self) -> None:
        if not hasattr(self, "mlp_"):
            raise NotFittedError("NNEval is not fitted; call fit() or NNEval.load(path)")

    def predict_features(self, raw: np.ndarray) -> np.ndarray:
        """P(human) from raw feature rows (with several networks, the logistic of their mean
        log-odds)."""
        self._check_fitted()
        inputs = self._inputs(raw)
        if len(self.members_) == 1:
            return self.mlp_.predict(inputs)
        return 1.0 / (
            1.0 + np.exp(-np.mean([m.log_odds(inputs) for m, _ in self.members_], axis=0))
        )

    def predict(
        self,
        candidates: Sequence[str],
        references: Sequence[Sequence[str]],
        images: Sequence[Any] | None = None,
    ) -> np.ndarray:
        """P(human) of each candidate against its references (and ``images[i]``, its image, for
        the features that need images)."""
        self._check_fitted()
        return self.predict_features(self.raw_features(candidates, references, images))

    # -- persistence ------------------------------------------------------------------------------
    def save(self, path: str | Path, provenance: dict[str, Any] | None = None) -> Path:
        """Write ``path/nneval.json`` (features, scaler, settings, training log, ``provenance``:
        how it was trained) and ``path/weights.npz``; equal models give equal bytes."""
        self._check_fitted()
        folder = Path(path)
        folder.mkdir(parents=True, exist_ok=True)
        members = self.members_
        arrays = {}
        for k, (mlp, _) in enumerate(members):  # the first network's arrays keep their plain names
            prefix = f"m{k}_" if k else ""
            arrays.update({f"{prefix}w{i}": w for i, w in enumerate(mlp.weights)})
            arrays.update({f"{prefix}b{i}": b for i, b in enumerate(mlp.biases)})
        write_weights(folder / WEIGHTS, arrays)
        from capmetrics import __version__

        features, files = detach_feature_files(
            [without_programs(f) for f in self.features_], folder
        )
        meta: dict[str, Any] = {
            "format": MODEL_FORMAT,
            "version": MODEL_VERSION,
            "capmetrics": __version__,
            "features": features,
            **({"feature_files": files} if files else {}),
            "feature_signatures": [build_feature(s).signature() for s in self.features_],
            **(
                {"interaction_signature": build_interaction(self.interaction, "NNEval").signature()}
                if self.interaction
                else {}
            ),
            "scaler": None if self.scaler_ is None else self.scaler_.to_json(),
            "fill": self.fill_.tolist(),
            "params": {
                k: v
                for k, v in self.get_params().items()
                if k not in ("features", "cache_dir")
                and not (k in ("interaction", "ensemble") and v == self._DEFAULTS[k])
            },
            "training": {
                "examples": self.n_train_,
                "nonfinite_replaced": self.nonfinite_counts_,
                "best_epoch": self.log_.best_epoch + 1,
                "epochs_run": len(self.log_.loss),
                "loss": self.log_.loss,
                "validation_kendall": self.log_.validation,
            },
        }
        if (
            getattr(self, "objective_", None) == "ratings"
        ):  # absent for human-vs-machine (older files)
            meta["training"]["objective"] = "ratings"
        if len(members) > 1:  # one network per training set; "training" above describes the first
            meta["training"]["members"] = [
                {
                    "examples": name,
                    "best_epoch": log.best_epoch + 1,
                    "epochs_run": len(log.loss),
                    "loss": log.loss,
                    "validation_kendall": log.validation,
                }
                for name, (_, log) in zip(self.n_train_, members)
            ]
        if provenance:
            meta["provenance"] = provenance
        (folder / MODEL_JSON).write_text(json.dumps(meta, indent=1), encoding="utf-8")
        return folder

    @classmethod
    def load(cls, path: str | Path, files: list[str] | None = None) -> NNEval:
        """Load a model written by :meth:`save` (the folder or its ``nneval.json``); ``files``:
        the files its features need (a CLIP checkpoint) that are not in its folder
        (:func:`~capmetrics.plugins.nneval.model_files.attach_feature_files`)."""
        from capmetrics.plugins.nneval.network import MLP, MinMaxScaler

        folder = model_folder(path)
        if not (folder / MODEL_JSON).is_file() or not (folder / WEIGHTS).is_file():
            raise MetricError(
                f"{folder} is not an NNEval model: expected {MODEL_JSON} and {WEIGHTS} in it"
            )
        meta = read_model_json(folder / MODEL_JSON)
        if meta.get("format") != MODEL_FORMAT:
            raise MetricError(f"{folder / MODEL_JSON} is not a {MODEL_FORMAT} file")
        upgrade_model_specs(meta, str(folder / MODEL_JSON))
        confine_model_specs(meta, folder)
        features = attach_feature_files(meta, folder, files)
        check_features(features, f"NNEval model {folder}")
        if meta["params"].get("interaction"):
            build_interaction(meta["params"]["interaction"], f"NNEval model {folder}")
        model = cls(features=list(features), **meta["params"])
        model.features_ = list(features)
        with np.load(folder / WEIGHTS) as arrays:
            n = len([k for k in arrays.files if k.startswith("w")])
            count = 1 + len(meta["training"].get("members", [None])[1:])
            prefixes = [f"m{k}_" if k else "" for k in range(count)]
            model.members_ = [
                (
                    MLP(
                        [arrays[f"{p}w{i}"] for i in range(n)],
                        [arrays[f"{p}b{i}"] for i in range(n)],
                    ),
                    None,
                )
                for p in prefixes
            ]
        model.mlp_ = model.members_[0][0]
        scaler = meta["scaler"]
        model.scaler_ = (
            None if scaler is None else MinMaxScaler(np.array(scaler["lo"]), np.array(scaler["hi"]))
        )
        model.fill_ = np.array(meta["fill"], dtype=float)
        model.training_ = meta["training"]
        return model
