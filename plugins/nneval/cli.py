"""``capmetrics nneval train`` and ``capmetrics nneval score`` (the NNEval learned metric)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from capmetrics.cli.untrusted import MaxImageAspect, MaxImagePixels, TrustCode, shared_file_options
from capmetrics.errors import CapmetricsError, SpecError, UnknownComponentError


def default_cache() -> Path:
    """The feature cache of ``nneval train``: ``nneval/`` under the one cache root
    (``$CAPMETRICS_CACHE_DIR``, else ``$XDG_CACHE_HOME/capmetrics``, else ``~/.cache/capmetrics``),
    read when the command runs."""
    from capmetrics.io.cache import component_cache

    return component_cache("nneval")


def _training_images(
    train: Path | None,
    flickr8k_split: str | None,
    root: Path | None,  # type: ignore[no-untyped-def]
    images: Path | None = None,
):
    from capmetrics.analysis.meta import flickr8k_root
    from capmetrics.data.loaders import load_dataset
    from capmetrics.plugins.nneval.training_data import load_flickr8k_split

    if (train is None) == (flickr8k_split is None):
        raise SpecError("give either --train DATASET or --flickr8k-split train|dev|test")
    if train is not None:
        return load_dataset(train, images=images)
    return load_flickr8k_split(flickr8k_root(root), flickr8k_split, images)  # type: ignore[arg-type]


def _validation(
    spec: str | None,
    root: Path | None,
    fraction: float,
    seed: int,  # type: ignore[no-untyped-def]
    images: Path | None = None,
):
    """Validation judgments: a preset name or a JSONL file, optionally one seeded half of its
    images."""
    from capmetrics.analysis.meta import PRESETS
    from capmetrics.cli.meta import load_judgments_arg
    from capmetrics.data.judgments import Judgments

    if spec is None:
        return None
    preset = spec if spec in PRESETS else None
    judgments, _ = load_judgments_arg(
        None if preset else spec, preset, root, None, None if preset else images
    )
    if not isinstance(judgments, Judgments):
        raise SpecError(f"{spec}: early stopping needs rated judgments, not pairwise ones")
    if fraction < 1:
        first, _ = judgments.split_by_group(fraction, seed)
        judgments = judgments.subset(first)
    return judgments


def _train_human_vs_machine(
    model,
    out: Path,
    train: Path | None,
    flickr8k_split: str | None,  # type: ignore[no-untyped-def]
    root: Path | None,
    system_output: Path | None,
    validation: str | None,
    validation_fraction: float,
    impostor_pool: int,
    impostor_sampling: str,
    seed: int,
    images_dir: Path | None = None,
) -> None:
    """The paper's training: human vs machine (or impostor) captions, early-stopped on judgments."""
    from capmetrics.plugins.nneval.training_data import build_training_set, load_system_output

    images = _training_images(train, flickr8k_split, root, images_dir)
    machine = load_system_output(system_output) if system_output else None
    training = build_training_set(
        images,
        system_output=machine,
        impostor_pool=impostor_pool,
        impostor_sampling=impostor_sampling,
        seed=seed,
    )
    judged = _validation(validation, root, validation_fraction, seed, images_dir)
    typer.echo(f"training on {len(training)} candidates from {len(images)} images", err=True)
    model.fit(training, judged)
    model.save(out)


def _rating_sets(
    fit_specs: list[str],
    stop_specs: list[str],
    root: Path | None,
    fraction: float,
    stop_share: float,
    seed: int,
    images: Path | None = None,
) -> tuple[list[Any], list[Any], int, int]:
    """(training, early-stopping) judgments for ``fit_ratings``: of a seeded share ``fraction`` of
    the images judged in any of the sets (the same images in every set; the rest stays unseen), a
    seeded ``stop_share`` early-stops on ``stop_specs``, the others train on ``fit_specs``."""
    from capmetrics.data.judgments import choose_groups
    from capmetrics.plugins.nneval.rating_targets import of_images, split_images

    if not 0 < fraction <= 1 or not 0 < stop_share < 1:
        raise SpecError(
            f"--rating-fraction must be in (0, 1] and --early-stopping-share in (0, 1), not "
            f"{fraction} and {stop_share}"
        )
    loaded = {
        spec: _validation(spec, root, 1.0, seed, images)
        for spec in dict.fromkeys([*fit_specs, *stop_specs])
    }
    used = split_images(list(loaded.values()), fraction, seed)
    fit = choose_groups(used, 1 - stop_share, seed)
    stop = used - fit
    if not fit or not stop:
        raise SpecError(
            f"{len(used)} judged image(s) cannot give both training and early-stopping images"
        )
    return (
        [loaded[s].subset(of_images(loaded[s], fit)) for s in fit_specs],
        [loaded[s].subset(of_images(loaded[s], stop)) for s in stop_specs],
        len(fit),
        len(stop),
    )


def build_cli() -> typer.Typer:
    """The ``nneval`` command group (added to ``capmetrics`` by the ``register_commands`` hook)."""
    group = typer.Typer(help="Train and use the NNEval learned metric.", no_args_is_help=True)

    @group.command("train")
    def train_cli(
        out: Annotated[Path, typer.Argument(help="Folder to write the model to.")],
        train: Annotated[
            Path | None,
            typer.Option(help="Captioned dataset whose references give the training images."),
        ] = None,
        flickr8k_split: Annotated[
            str | None,
            typer.Option(help="Train on a Flickr8k split (train, dev, test) from --root."),
        ] = None,
        root: Annotated[
            Path | None,
            typer.Option(help="Folder of the raw Flickr8k files (or $CAPMETRICS_FLICKR8K)."),
        ] = None,
        system_output: Annotated[
            Path | None,
            typer.Option(
                help="Machine captions per image (JSON, COCO results or JSONL); default: impostors."
            ),
        ] = None,
        validation: Annotated[
            str | None,
            typer.Option(
                help="Early-stopping judgments: flickr8k-expert, flickr8k-cf or a JSONL file."
            ),
        ] = None,
        validation_fraction: Annotated[
            float,
            typer.Option(
                help="Use this seeded share of the validation images (the rest stays unseen)."
            ),
        ] = 1.0,
        learner: Annotated[
            str, typer.Option(help="Learner spec, e.g. 'nneval(lr=0.001, patience=20)'.")
        ] = "nneval",
        feature: Annotated[
            list[str] | None,
            typer.Option(
                "--feature", "-f", help="Feature metric spec; repeat. Default: the paper's set."
            ),
        ] = None,
        impostor_pool: Annotated[
            int,
            typer.Option(
                help="Draw impostors from this many nearest captions of other images (0: all)."
            ),
        ] = 0,
        impostor_sampling: Annotated[
            str, typer.Option(help="Ranks of the impostors within the pool: uniform or log-rank.")
        ] = "uniform",
        ratings: Annotated[
            list[str] | None,
            typer.Option(
                "--ratings",
                help=(
                    "Fit P(human) to these human ratings instead (flickr8k-expert, flickr8k-cf or "
                    "a JSONL file; repeat)."
                ),
            ),
        ] = None,
        rating_fraction: Annotated[
            float,
            typer.Option(
                help=(
                    "With --ratings: use this seeded share of the judged images, the same in "
                    "every set (the rest stays unseen)."
                )
            ),
        ] = 1.0,
        early_stopping_share: Annotated[
            float,
            typer.Option(
                help=(
                    "With --ratings: of those images, this seeded share early-stops, the rest "
                    "trains."
                )
            ),
        ] = 0.25,
        stop_on: Annotated[
            list[str] | None,
            typer.Option(
                "--stop-on",
                help=(
                    "With --ratings: early-stop on these judgments (repeat); default: the "
                    "--ratings sets."
                ),
            ),
        ] = None,
        seed: Annotated[
            int, typer.Option(help="Seeds the training set, the validation split and the network.")
        ] = 0,
        cache: Annotated[
            Path | None,
            typer.Option(
                help="Feature cache folder (default: nneval/ in the cache root, "
                "$CAPMETRICS_CACHE_DIR or $XDG_CACHE_HOME/capmetrics or "
                "~/.cache/capmetrics)."
            ),
        ] = None,
        images: Annotated[
            Path | None,
            typer.Option(
                help=(
                    "Folder of the items' images, for features that need images (clip-score, "
                    "...): relative image paths resolve against it (Flickr8k: its .jpg files)."
                )
            ),
        ] = None,
    ) -> None:
        """Train NNEval: human vs machine captions, early-stopped on human judgments; or, with
        --ratings, fitted to human ratings."""
        from capmetrics.cli import EXIT_USAGE, fail
        from capmetrics.registry.compose import compose

        try:
            params: dict[str, object] = {"seed": seed, "cache_dir": str(cache or default_cache())}
            if feature:
                params["features"] = list(feature)
            model = compose(learner, "learner", **params)
        except (SpecError, UnknownComponentError) as err:
            fail(err, EXIT_USAGE)
        try:
            if ratings:
                if train or flickr8k_split or system_output or validation:
                    raise SpecError(
                        "--ratings trains on judged images: give none of --train, "
                        "--flickr8k-split, --system-output, --validation"
                    )
                fit, stop, n_fit, n_stop = _rating_sets(
                    ratings,
                    stop_on or ratings,
                    root,
                    rating_fraction,
                    early_stopping_share,
                    seed,
                    images,
                )
                typer.echo(
                    f"fitting ratings of {n_fit} judged images, early-stopping on {n_stop}",
                    err=True,
                )
                model.fit_ratings(fit, stop)  # type: ignore[attr-defined]
                model.save(out)  # type: ignore[attr-defined]
            else:
                if stop_on:
                    raise SpecError("--stop-on goes with --ratings")
                _train_human_vs_machine(
                    model,
                    out,
                    train,
                    flickr8k_split,
                    root,
                    system_output,
                    validation,
                    validation_fraction,
                    impostor_pool,
                    impostor_sampling,
                    seed,
                    images,
                )
        except SpecError as err:
            fail(err, EXIT_USAGE)
        except CapmetricsError as err:
            fail(err)
        runs = []
        for _, log in model.members_:  # type: ignore[attr-defined]
            best = (
                f", validation tau {log.validation[log.best_epoch]:.4f}" if log.validation else ""
            )
            runs.append(f"epoch {log.best_epoch + 1} of {len(log.loss)}{best}")
        typer.echo(
            f"wrote {out} ({'networks: ' if len(runs) > 1 else ''}{'; '.join(runs)})", err=True
        )

    @group.command("score")
    def score_cli(
        data: Annotated[
            Path, typer.Argument(help="Dataset to score (any format `capmetrics score` reads).")
        ],
        model: Annotated[
            Path, typer.Option(help="Model folder written by `capmetrics nneval train`.")
        ],
        fmt: Annotated[str, typer.Option("--format", help="json, csv or table.")] = "table",
        out: Annotated[Path | None, typer.Option(help="Write the results to this file.")] = None,
        images: Annotated[
            Path | None,
            typer.Option(help="Folder of the items' images (models with image features)."),
        ] = None,
        file: Annotated[
            list[str] | None,
            typer.Option(
                "--file",
                help=(
                    "A file the model's features need that is not in its folder (e.g. a CLIP "
                    "checkpoint); repeat."
                ),
            ),
        ] = None,
        trust_code: TrustCode = False,
        max_image_pixels: MaxImagePixels = None,
        max_image_aspect: MaxImageAspect = None,
    ) -> None:
        """Score a dataset with a trained NNEval model (same as --metric 'nneval(model=PATH)')."""
        import json

        from capmetrics.cli import EXIT_USAGE, fail
        from capmetrics.data.loaders import load_dataset
        from capmetrics.engine.scoring import score

        try:
            from capmetrics.io.atomic import check_output

            check_output(
                out, (data, model, Path(model) / "nneval.json", Path(model) / "weights.npz")
            )
            files = f", files=[{', '.join(json.dumps(f) for f in file)}]" if file else ""
            spec = f"nneval(model={json.dumps(str(model))}{files})"
            with shared_file_options(trust_code, max_image_pixels, max_image_aspect):
                results = score(load_dataset(data, images=images), [spec])
        except (SpecError, UnknownComponentError) as err:
            fail(err, EXIT_USAGE)
        except CapmetricsError as err:
            fail(err)
        if out:
            results.write(out, fmt)
            typer.echo(f"wrote {out}", err=True)
        else:
            typer.echo(results.render(fmt), nl=False)

    return group
