"""Read CLIP checkpoints in the formats users have into one engine (transformers' ``CLIPModel``):

- an OpenAI ``clip`` checkpoint (``ViT-B-32.pt``: a TorchScript archive, or a plain state dict
  as ``torch.save`` writes it) and PAC-S's (``{"state_dict": ...}``, the same layout);
- a Hugging Face ``CLIPModel`` folder (``config.json`` + weights, with its tokenizer and
  image-processor config when present), or a ``CLIPTextModelWithProjection`` folder (model type
  ``clip_text_model``: text features only, images are refused);
- an open_clip checkpoint: a folder with ``open_clip_config.json`` and
  ``open_clip_pytorch_model.bin`` / ``open_clip_model.safetensors`` (the layout open_clip
  saves and publishes), or a bare open_clip state dict file (same keys as OpenAI's) with the
  activation given by the user.

OpenAI and open_clip ViT weights map one to one onto ``CLIPModel``'s (the fused attention
projection is split into q, k, v; the projections are transposed). ResNet image towers are not
supported. Nothing is downloaded.

Reading a checkpoint runs none of its code: state dicts go through
``torch.load(weights_only=True)`` or safetensors, and a TorchScript archive (whose scripted
methods run while it loads) is recognised from its zip entries before torch opens it and
refused unless the user passes ``trust_code`` (:mod:`capmetrics.io.trust`). Paths must be regular
files (or folders of them): a FIFO or a device is refused before it is read.
"""

from __future__ import annotations

import os
import pickle
import stat
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from capmetrics.errors import MetricError
from capmetrics.io.digests import files_digest
from capmetrics.io.model_folder import check_model_path
from capmetrics.plugins.clip_score._preprocess import OPENAI_MEAN, OPENAI_STD, Preprocess

OPENAI_EOT = 49407
OPENAI_SOT = 49406
#: Long-CLIP keeps CLIP's positions below this one and fine-tunes (stretched) ones above.
LONGCLIP_KEPT = 20
OPEN_CLIP_WEIGHTS = (
    "open_clip_model.safetensors",
    "open_clip_pytorch_model.bin",
    "open_clip_pytorch_model.pt",
)


@dataclass
class Loaded:
    """A loaded checkpoint: the engine, how to prepare its inputs, and what identifies it."""

    model: Any  # transformers.CLIPModel (CLIPTextModelWithProjection: text only), eval mode
    preprocess: Preprocess | None  # None: a text tower alone (no images)
    context: int
    tokenizer: Any  # a Hugging Face tokenizer, or None for CLIP's BPE (ClipBPE)
    format: str
    checksum: str

    @property
    def vision(self) -> bool:
        """Whether the checkpoint has an image tower (a ``clip_text_model`` folder has not)."""
        return self.preprocess is not None

    @property
    def dim(self) -> int:
        """The size of the projected features."""
        return int(self.model.config.projection_dim)

    def text_features(self, inputs: dict[str, Any]) -> Any:
        """The projected text features of a batch of model inputs (a tensor)."""
        if not self.vision:
            return self.model(**inputs).text_embeds
        out = self.model.get_text_features(**inputs)
        return out if hasattr(out, "float") else out.pooler_output  # newer: an output object


def file_checksum(paths: list[Path], root: Path | None = None) -> str:
    """sha256 over the files' names (relative to ``root``) and bytes."""
    return "sha256:" + files_digest(paths, root)


def load_checkpoint(path: str, activation: str = "auto", trust_code: bool = False) -> Loaded:
    """Load ``path`` (a file or folder, see the module doc); ``trust_code``: load a TorchScript
    archive too (its code runs), else it is refused with how to convert it.

    Raises:
        MetricError: naming ``model=`` and the problem (missing path, not a CLIP checkpoint,
            no vision tower, unsupported architecture).
    """
    p = Path(path).expanduser()
    if not p.exists():
        raise MetricError(
            f"model={path!r}: no such file or folder (CLIP weights are never downloaded; "
            "give the path of an OpenAI .pt, a PAC-S .pth, a Hugging Face CLIPModel folder or "
            "an open_clip checkpoint)"
        )
    if p.is_dir():
        check_model_path(p, f"model={path!r}")  # no FIFO or device inside (before any library)
        if (p / "open_clip_config.json").is_file():
            return _open_clip_folder(p, path, activation, trust_code)
        if (p / "config.json").is_file():
            return _hf_folder(p, path)
        raise MetricError(
            f"model={path!r} is a folder without config.json (Hugging Face) or "
            "open_clip_config.json (open_clip): not a CLIP checkpoint"
        )
    state, fmt = _read_state_dict(p, path, trust_code)
    if "positional_embedding_res" in state:
        fmt = "longclip-" + fmt
    act = "quick_gelu" if activation == "auto" else activation
    model, context, size = openai_layout_model(state, path, act)
    return Loaded(model, Preprocess(size, size), context, None, fmt, file_checksum([p]))


def check_regular_file(p: Path, path: str) -> None:
    """Refuse a path that is not a regular file (a FIFO would hang, a device never end)."""
    try:
        mode = os.stat(p).st_mode
    except OSError as err:
        raise MetricError(
            f"model={path!r}: cannot read {str(p)!r} ({err.strerror or err})"
        ) from None
    if not stat.S_ISREG(mode):
        raise MetricError(
            f"model={path!r}: {str(p)!r} is not a regular file (a checkpoint is a file or a folder "
            "of files, not a pipe or a device)"
        )


def is_torchscript(p: Path) -> bool:
    """Whether ``p`` is a TorchScript archive: a zip whose entries hold scripted code
    (``<name>/code/...``, ``<name>/constants.pkl``), read from the zip's directory without torch."""
    with open(p, "rb") as f:
        if f.read(4) != b"PK\x03\x04":
            return False
    try:
        with zipfile.ZipFile(p) as z:
            names = z.namelist()
    except (zipfile.BadZipFile, OSError, ValueError):
        return False
    for name in (
        names
    ):  # <root>/code/... or <root>/constants.pkl; the root is the file's stem (maybe "code")
        parts = name.split("/")
        if len(parts) >= 2 and (
            parts[1] == "constants.pkl" or (parts[1] == "code" and len(parts) > 2)
        ):
            return True
    return False


def torchscript_refusal(path: str) -> str:
    """The one-line refusal of a TorchScript archive, with how to convert it."""
    stem = Path(path).with_suffix("").name
    return (
        f"model={path!r} is a TorchScript archive: loading one runs the code inside it, so "
        "capmetrics does not, unless you trust where it came from and say so (clip-model(..., "
        "trust_code=true) or --trust-code). Or convert it once, in a Python session you trust: "
        "import torch; torch.save(torch.jit.load("
        f'{path!r}, map_location="cpu").state_dict(), "{stem}-state-dict.pt"); then use that file'
    )


def weights_only_refusal(path: str, err: BaseException) -> str:
    """The one-line refusal of a pickle that holds more than tensors."""
    text = (
        str(err).split("WeightsUnpickler error:", 1)[-1]
        if "WeightsUnpickler error:" in str(err)
        else ""
    )
    first = next((line.strip() for line in text.splitlines() if line.strip()), type(err).__name__)
    return (
        f"model={path!r}: its weights are a pickle that holds more than tensors ({first}); "
        "capmetrics reads checkpoints with torch.load(weights_only=True) and never runs code from "
        "them: use a state dict saved with torch.save(model.state_dict()) or a .safetensors file"
    )


def _read_state_dict(p: Path, path: str, trust_code: bool = False) -> tuple[dict[str, Any], str]:
    check_regular_file(p, path)
    if is_torchscript(p):  # decided from the zip's entries, before any torch call
        if not trust_code:
            raise MetricError(torchscript_refusal(path))
        import torch

        try:
            return dict(
                torch.jit.load(str(p), map_location="cpu").state_dict()
            ), "openai-torchscript"
        except Exception as err:
            raise MetricError(
                f"model={path!r}: cannot read the TorchScript archive ({err})"
            ) from None
    import torch

    if p.suffix == ".safetensors":
        from safetensors.torch import load_file

        try:
            return dict(load_file(str(p))), "state-dict"
        except Exception as err:
            raise MetricError(f"model={path!r} is not a safetensors file ({err})") from None
    try:
        obj = torch.load(str(p), map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        raise MetricError(weights_only_refusal(path, err)) from None
    except Exception as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise MetricError(
            f"model={path!r} is not a CLIP checkpoint (torch cannot read it: {first})"
        ) from None
    fmt = "state-dict"
    if isinstance(obj, dict) and isinstance(
        obj.get("state_dict"), dict
    ):  # PAC-S, training checkpoints
        obj, fmt = obj["state_dict"], "pac-s-state-dict"
    if not isinstance(obj, dict) or not all(isinstance(k, str) for k in obj):
        raise MetricError(
            f"model={path!r} is not a CLIP checkpoint (expected a state dict, got "
            f"{type(obj).__name__})"
        )
    if obj and all(k.startswith("module.") for k in obj):
        obj = {k[len("module.") :]: v for k, v in obj.items()}
    return obj, fmt


def openai_layout_model(state: dict[str, Any], path: str, activation: str) -> tuple[Any, int, int]:
    """A ``CLIPModel`` holding OpenAI/open_clip-layout ViT weights; its context length and
    image size."""
    import torch

    sd = {
        k: (v.detach() if isinstance(v, torch.Tensor) else torch.as_tensor(np.asarray(v))).float()
        for k, v in state.items()
    }
    if "token_embedding.weight" not in sd or "text_projection" not in sd:
        raise MetricError(
            f"model={path!r} is not a CLIP checkpoint (no CLIP text tower: token_embedding and "
            "text_projection are missing)"
        )
    if not any(k.startswith("visual.") for k in sd):
        raise MetricError(
            f"model={path!r} has no vision tower (no visual.* weights): image-grounded metrics "
            "need a full CLIP model"
        )
    if "visual.conv1.weight" not in sd or "visual.class_embedding" not in sd:
        raise MetricError(
            f"model={path!r}: only ViT image towers are supported (this looks like a ResNet CLIP)"
        )
    conv = sd["visual.conv1.weight"]
    v_width, patch = conv.shape[0], conv.shape[-1]
    v_layers = _count_layers(sd, "visual.transformer.resblocks.")
    grid = round((sd["visual.positional_embedding"].shape[0] - 1) ** 0.5)
    t_width = sd["ln_final.weight"].shape[0]
    t_layers = _count_layers(sd, "transformer.resblocks.")
    if "positional_embedding_res" in sd:
        sd["positional_embedding"] = longclip_positions(sd, path)
    context, vocab = sd["positional_embedding"].shape[0], sd["token_embedding.weight"].shape[0]
    embed = sd["text_projection"].shape[1]
    from transformers import CLIPConfig

    config = CLIPConfig(
        text_config=dict(
            vocab_size=vocab,
            hidden_size=t_width,
            intermediate_size=sd["transformer.resblocks.0.mlp.c_fc.weight"].shape[0],
            num_hidden_layers=t_layers,
            num_attention_heads=t_width // 64,
            max_position_embeddings=context,
            hidden_act=activation,
            layer_norm_eps=1e-5,
            bos_token_id=OPENAI_SOT,
            eos_token_id=OPENAI_EOT,
            pad_token_id=0,
            projection_dim=embed,
        ),
        vision_config=dict(
            hidden_size=v_width,
            intermediate_size=sd["visual.transformer.resblocks.0.mlp.c_fc.weight"].shape[0],
            num_hidden_layers=v_layers,
            num_attention_heads=v_width // 64,
            image_size=grid * patch,
            patch_size=patch,
            hidden_act=activation,
            layer_norm_eps=1e-5,
            projection_dim=embed,
        ),
        projection_dim=embed,
    )
    hf = {}
    for tower, src, dst in (("text", "", "text_model."), ("vision", "visual.", "vision_model.")):
        layers = t_layers if tower == "text" else v_layers
        for i in range(layers):
            a, b = f"{src}transformer.resblocks.{i}.", f"{dst}encoder.layers.{i}."
            for which, part in zip("qkv", sd[a + "attn.in_proj_weight"].chunk(3)):
                hf[f"{b}self_attn.{which}_proj.weight"] = part
            for which, part in zip("qkv", sd[a + "attn.in_proj_bias"].chunk(3)):
                hf[f"{b}self_attn.{which}_proj.bias"] = part
            for old, new in (
                ("attn.out_proj", "self_attn.out_proj"),
                ("ln_1", "layer_norm1"),
                ("ln_2", "layer_norm2"),
                ("mlp.c_fc", "mlp.fc1"),
                ("mlp.c_proj", "mlp.fc2"),
            ):
                hf[f"{b}{new}.weight"] = sd[f"{a}{old}.weight"]
                hf[f"{b}{new}.bias"] = sd[f"{a}{old}.bias"]
    hf.update(
        {
            "text_model.embeddings.token_embedding.weight": sd["token_embedding.weight"],
            "text_model.embeddings.position_embedding.weight": sd["positional_embedding"],
            "text_model.final_layer_norm.weight": sd["ln_final.weight"],
            "text_model.final_layer_norm.bias": sd["ln_final.bias"],
            "text_projection.weight": sd["text_projection"].t().contiguous(),
            "vision_model.embeddings.patch_embedding.weight": sd["visual.conv1.weight"],
            "vision_model.embeddings.class_embedding": sd["visual.class_embedding"],
            "vision_model.embeddings.position_embedding.weight": sd["visual.positional_embedding"],
            "vision_model.pre_layrnorm.weight": sd["visual.ln_pre.weight"],
            "vision_model.pre_layrnorm.bias": sd["visual.ln_pre.bias"],
            "vision_model.post_layernorm.weight": sd["visual.ln_post.weight"],
            "vision_model.post_layernorm.bias": sd["visual.ln_post.bias"],
            "visual_projection.weight": sd["visual.proj"].t().contiguous(),
            "logit_scale": sd.get(
                "logit_scale", torch.tensor(np.log(1 / 0.07), dtype=torch.float32)
            ),
        }
    )
    model = _build(config)
    result = model.load_state_dict(hf, strict=False)
    missing = [k for k in result.missing_keys if not k.endswith("position_ids")]
    if missing or result.unexpected_keys:
        raise MetricError(
            f"model={path!r}: the weights do not fit a CLIP ViT ({len(missing)} missing, "
            f"e.g. {(missing or result.unexpected_keys)[0]})"
        )
    return model.eval(), int(context), int(grid * patch)


def longclip_positions(sd: dict[str, Any], path: str) -> Any:
    """Long-CLIP's text position table (``longclip-B.pt``, ``longclip-L.pt``): its ``encode_text``
    adds ``positional_embedding`` at the first :data:`LONGCLIP_KEPT` positions and
    ``positional_embedding_res`` at the others (its ``mask1``/``mask2``); one table does the
    same."""
    import torch

    pos, res = sd["positional_embedding"], sd["positional_embedding_res"]
    if pos.shape != res.shape or pos.shape[0] <= LONGCLIP_KEPT:
        raise MetricError(
            f"model={path!r}: positional_embedding_res {tuple(res.shape)} does not fit "
            f"positional_embedding {tuple(pos.shape)} (Long-CLIP's layout has two equal tables)"
        )
    return torch.cat([pos[:LONGCLIP_KEPT], res[LONGCLIP_KEPT:]], dim=0).contiguous()


def _count_layers(sd: dict[str, Any], prefix: str) -> int:
    return len({k[len(prefix) :].split(".")[0] for k in sd if k.startswith(prefix)})


def _build(config: Any) -> Any:
    from transformers import CLIPModel

    try:
        from transformers.initialization import no_init_weights  # transformers >= 5
    except ImportError:  # pragma: no cover - older transformers
        from transformers.modeling_utils import no_init_weights
    with no_init_weights():
        return CLIPModel(config)


#: A text tower alone (``CLIPTextModelWithProjection``): text features, no images.
TEXT_ONLY = "clip_text_model"


def no_vision_tower(path: str) -> str:
    """The one-line refusal to embed images with a text tower alone."""
    return (
        f"model={path!r} is a text tower only ({TEXT_ONLY}): it has no vision tower; "
        "image-grounded metrics need a full CLIPModel (model_type clip)"
    )


def _hf_folder(p: Path, path: str) -> Loaded:
    from transformers import AutoConfig, CLIPModel, CLIPTextModelWithProjection

    try:
        config = AutoConfig.from_pretrained(str(p), local_files_only=True)
    except (OSError, ValueError) as err:
        raise MetricError(
            f"model={path!r} is not a model folder ({str(err).splitlines()[0]})"
        ) from None
    if config.model_type not in ("clip", TEXT_ONLY):
        raise MetricError(
            f"model={path!r} is a {config.model_type!r} model, not a CLIP model with a text "
            f"tower (model_type clip, or {TEXT_ONLY} for text features only)"
        )
    engine = CLIPModel if config.model_type == "clip" else CLIPTextModelWithProjection
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        model, info = engine.from_pretrained(
            str(p), local_files_only=True, output_loading_info=True, dtype="float32"
        )
    except pickle.UnpicklingError as err:  # transformers reads .bin weights with weights_only=True
        raise MetricError(weights_only_refusal(path, err)) from None
    except (OSError, ValueError) as err:
        raise MetricError(
            f"model={path!r}: cannot load the {engine.__name__} weights "
            f"({str(err).splitlines()[0]})"
        ) from None
    finally:
        hf_logging.set_verbosity(level)
    absent = [k for k in info.get("missing_keys", []) if not k.endswith("position_ids")]
    absent += [str(k) for k in info.get("mismatched_keys", [])]
    if absent and config.model_type == TEXT_ONLY and any("projection" in k for k in absent):
        raise MetricError(
            f"model={path!r} is a text tower only ({TEXT_ONLY}) without its projection (a "
            "CLIPTextModel, not CLIPTextModelWithProjection): it gives no CLIP text features, "
            "and it has no vision tower for image-grounded metrics"
        )
    if absent:
        raise MetricError(
            f"model={path!r}: the weights are incomplete ({len(absent)} missing or mismatched, "
            f"e.g. {absent[0]})"
        )
    tokenizer = None
    if any((p / f).is_file() for f in ("tokenizer.json", "vocab.json", "tokenizer_config.json")):
        from transformers import AutoTokenizer

        try:
            tokenizer = AutoTokenizer.from_pretrained(str(p), local_files_only=True)
        except (OSError, ValueError, TypeError) as err:
            raise MetricError(
                f"model={path!r} has an unusable tokenizer ({str(err).splitlines()[0]})"
            ) from None
    files = sorted(
        f
        for f in p.rglob("*")
        if f.is_file() and f.suffix in (".safetensors", ".bin", ".json", ".txt")
    )
    if config.model_type == TEXT_ONLY:
        context = int(config.max_position_embeddings)
        return Loaded(
            model.eval(), None, context, tokenizer, "hf-" + TEXT_ONLY, file_checksum(files, p)
        )
    preprocess = _hf_preprocess(p, int(config.vision_config.image_size))
    context = int(config.text_config.max_position_embeddings)
    return Loaded(
        model.eval(), preprocess, context, tokenizer, "hf-clipmodel", file_checksum(files, p)
    )


def _config(path: Path) -> dict:
    """A model folder's JSON config, read bounded (a regular file of at most 16 MiB, nested at
    most 64 deep: :func:`capmetrics.io.strict_json.read_json`); not an object is a named error."""
    from capmetrics.io.strict_json import MAX_DEPTH, read_json

    cfg = read_json(
        path, "a model config", 16 << 20, MAX_DEPTH, header=f"cannot load the model config {path}"
    )
    if not isinstance(cfg, dict):
        raise MetricError(f"{path}: a model config must be a JSON object, got {type(cfg).__name__}")
    return cfg


def _hf_preprocess(p: Path, image_size: int) -> Preprocess:
    cfg_file = p / "preprocessor_config.json"
    if not cfg_file.is_file():
        return Preprocess(image_size, image_size, rgb_first=True, floor_crop=True)
    cfg = _config(cfg_file)
    size = cfg.get("size", image_size)
    size = size.get("shortest_edge", image_size) if isinstance(size, dict) else int(size)
    crop = cfg.get("crop_size", size)
    crop = crop.get("height", size) if isinstance(crop, dict) else int(crop)
    if (
        cfg.get("resample", 3) != 3
        or not cfg.get("do_center_crop", True)
        or not cfg.get("do_resize", True)
    ):
        raise MetricError(
            f"model={str(p)!r}: its image processor is not CLIP's (bicubic resize + centre crop)"
        )
    return Preprocess(
        int(size),
        int(crop),
        tuple(cfg.get("image_mean", OPENAI_MEAN)),
        tuple(cfg.get("image_std", OPENAI_STD)),
        rgb_first=True,
        floor_crop=True,
    )


def _open_clip_folder(p: Path, path: str, activation: str, trust_code: bool = False) -> Loaded:
    cfg = _config(p / "open_clip_config.json")
    model_cfg = cfg.get("model_cfg", cfg)
    weights = next((p / f for f in OPEN_CLIP_WEIGHTS if (p / f).is_file()), None)
    if weights is None:
        raise MetricError(
            f"model={path!r}: an open_clip folder needs one of {', '.join(OPEN_CLIP_WEIGHTS)}"
        )
    vision, text = model_cfg.get("vision_cfg", {}), model_cfg.get("text_cfg", {})
    if (
        "timm_model_name" in vision
        or "hf_model_name" in text
        or isinstance(vision.get("layers"), list)
    ):
        raise MetricError(
            f"model={path!r}: only open_clip's own ViT towers are supported (not timm, HF text or "
            "ResNet)"
        )
    unsupported = [
        k
        for k in ("attentional_pool", "no_ln_pre", "final_ln_after_pool", "proj_bias")
        if vision.get(k) or text.get(k)
    ]
    if (
        unsupported
        or vision.get("pool_type", "tok") != "tok"
        or text.get("pool_type", "argmax") != "argmax"
    ):
        raise MetricError(
            f"model={path!r}: open_clip options {unsupported or ['pool_type']} are not supported"
        )
    state, _ = _read_state_dict(weights, path, trust_code)
    act = (
        activation
        if activation != "auto"
        else ("quick_gelu" if model_cfg.get("quick_gelu") else "gelu")
    )
    model, context, size = openai_layout_model(state, path, act)
    pre = cfg.get("preprocess_cfg", {})
    if (
        pre.get("interpolation", "bicubic") != "bicubic"
        or pre.get("resize_mode", "shortest") != "shortest"
    ):
        raise MetricError(
            f"model={path!r}: open_clip preprocessing other than bicubic shortest-side resize is "
            "not supported"
        )
    preprocess = Preprocess(
        size, size, tuple(pre.get("mean", OPENAI_MEAN)), tuple(pre.get("std", OPENAI_STD))
    )
    return Loaded(
        model,
        preprocess,
        context,
        None,
        f"open_clip-{act}",
        file_checksum([p / "open_clip_config.json", weights], p),
    )
