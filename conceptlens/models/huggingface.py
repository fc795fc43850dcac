"""Hugging Face transformers vision models: `hf:HUB_ID` or `hf:LOCAL_DIR`.

Loaded with `AutoModel` + `AutoImageProcessor` (`local_files_only` when HF_HUB_OFFLINE=1 or
the name is a local directory). The default embedding is, in order of preference:
`get_image_features` (CLIP, SigLIP, ...: the projected image embedding), `image_embeds`,
`pooler_output` (DINOv2/ViT: CLS token; ResNet: global average pool), else the mean of
`last_hidden_state` over tokens / spatial positions. A directory without a saved image
processor gets a square resize to `config.image_size` (default 224) + ImageNet mean/std.
"""

from __future__ import annotations

from . import resolve_path
from .base import (
    IMAGENET_MEAN,
    IMAGENET_STD,
    Adapter,
    ModelLoadError,
    download_blocked,
    first_tensor,
    hf_cache_dir,
    hf_repo_cached,
    hub_endpoint,
    missing_weights,
    offline,
    pool,
    resize_description,
    resize_transform,
)

_DESCRIBE_KEYS = (
    "image_processor_type",
    "do_resize",
    "size",
    "resample",
    "do_center_crop",
    "crop_size",
    "do_rescale",
    "rescale_factor",
    "do_normalize",
    "image_mean",
    "image_std",
    "do_convert_rgb",
)


def dtype_kwargs():
    """`from_pretrained`'s keyword for float32 weights in this version of transformers."""
    import torch
    import transformers

    major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    # transformers >= 4.56 renamed torch_dtype to dtype (v5 defaults to "auto": force fp32).
    return {"dtype": torch.float32} if (major, minor) >= (4, 56) else {"torch_dtype": torch.float32}


class HFAdapter(Adapter):
    def embed(self, batch):
        m = self.model
        if hasattr(m, "get_image_features"):
            out = m.get_image_features(pixel_values=batch)
            t = (
                out
                if hasattr(out, "dim")
                else (
                    getattr(out, "pooler_output", None)
                    if getattr(out, "pooler_output", None) is not None
                    else first_tensor(out)
                )
            )
            return pool(t)
        out = m(pixel_values=batch)
        for key in ("image_embeds", "pooler_output"):
            t = getattr(out, key, None)
            if t is not None:
                return t.reshape(t.shape[0], -1) if t.dim() == 4 else pool(t)
        t = getattr(out, "last_hidden_state", None)
        return pool(t if t is not None else out)


def _processor_fn(proc):
    def preprocess(img):
        return proc(images=img, return_tensors="pt")["pixel_values"][0]

    return preprocess


def _describe(proc) -> dict:
    d = proc.to_dict() if hasattr(proc, "to_dict") else {}
    out = {k: d[k] for k in _DESCRIBE_KEYS if k in d}
    out["source"] = "transformers AutoImageProcessor"
    return out


def load(name: str, weights=None, root=None) -> Adapter:
    if weights is not None:
        raise ModelLoadError(
            f"hf:{name}: --weights is not used for transformers models; "
            "save the model with save_pretrained and pass its directory as hf:DIR"
        )
    local = resolve_path(name, root)
    if local is not None and not local.is_dir():
        raise ModelLoadError(f"hf:{name}: {local} is a file; pass the directory written by save_pretrained")
    src = str(local) if local is not None else name
    local_only = local is not None or offline()
    where = str(local) if local is not None else f"the Hugging Face cache {hf_cache_dir()}"
    hint = (
        "pass a local model: hf:DIR (a directory written by save_pretrained), or another "
        "family with a weights file, e.g. --model timm:resnet18 --weights resnet18.pth"
    )
    if local is None:
        why = download_blocked(hub_endpoint())  # before transformers retries for minutes
        if why is not None and not hf_repo_cached(name):
            raise missing_weights(f"hf:{name}", where, None, hint, why)
        local_only = local_only or why is not None
    from transformers import AutoImageProcessor, AutoModel  # seconds: after the checks above

    try:
        model = AutoModel.from_pretrained(src, local_files_only=local_only, **dtype_kwargs())
    except OSError as e:
        if local is not None:
            raise ModelLoadError(
                f"hf:{name}: {local} holds no loadable model "
                f"(config.json + weights from save_pretrained): {e}"
            ) from None
        raise missing_weights(f"hf:{name}", where, e, hint) from None
    except (ValueError, KeyError) as e:
        raise ModelLoadError(f"hf:{name}: not a model AutoModel can load ({e})") from None
    try:
        proc = AutoImageProcessor.from_pretrained(src, local_files_only=local_only)
        preprocess, desc = _processor_fn(proc), _describe(proc)
    except (OSError, ValueError, KeyError):
        # No preprocessor_config.json (e.g. a model saved from a config): a plain default.
        size = getattr(getattr(model.config, "vision_config", model.config), "image_size", 224)
        size = size if isinstance(size, int) else 224
        preprocess = resize_transform(size, IMAGENET_MEAN, IMAGENET_STD)
        desc = resize_description(size, source="default (no image processor found)")
    return HFAdapter(model, preprocess, desc, name if local is None else local.name, "pretrained")
