"""Plain PyTorch modules: `torch:package.module:ClassName` (+ `--weights FILE`).

The class is imported by dotted path and instantiated; its forward output (or the output
of `--layer`) is the embedding, mean-pooled over spatial dims (4-D) or tokens (3-D).

Weights-file convention (what `torch.save` should write):

- a plain state dict (`model.state_dict()`), or
- a dict with the keys
    - `state_dict`: the state dict (required),
    - `init_kwargs`: dict passed to the constructor, `ClassName(**init_kwargs)` (optional),
    - `preprocess`: `{"size": int, "mean": [r, g, b], "std": [r, g, b]}` (optional).

Images are always converted to RGB, resized to `size` x `size` (square, bilinear) and
normalised with `mean`/`std`. Without `preprocess`: 224 px and ImageNet mean/std.
Without `--weights` the model keeps its random initialisation (method `random`).
The file is read with `torch.load(weights_only=True)`: tensors and plain containers only.
"""

from __future__ import annotations

import importlib

from .base import (
    IMAGENET_MEAN,
    IMAGENET_STD,
    Adapter,
    ModelLoadError,
    load_into,
    load_state_dict_file,
    resize_description,
    resize_transform,
    unwrap_state_dict,
)

DEFAULT_SIZE = 224


def import_class(name: str):
    mod_name, sep, cls_name = name.partition(":")
    if not sep or not mod_name or not cls_name:
        raise ModelLoadError(f"torch:{name}: expected torch:package.module:ClassName")
    try:
        mod = importlib.import_module(mod_name)
    except ImportError as e:
        raise ModelLoadError(
            f"torch:{name}: cannot import module {mod_name!r} ({e}); is it installed or on PYTHONPATH?"
        ) from None
    try:
        return getattr(mod, cls_name)
    except AttributeError:
        raise ModelLoadError(f"torch:{name}: module {mod_name!r} has no attribute {cls_name!r}") from None


def load(name: str, weights=None, root=None) -> Adapter:
    cls = import_class(name)
    blob = load_state_dict_file(weights) if weights is not None else {}
    structured = "state_dict" in blob and isinstance(blob["state_dict"], dict)
    init_kwargs = blob.get("init_kwargs") or {} if structured else {}
    pp = blob.get("preprocess") or {} if structured else {}
    if not isinstance(init_kwargs, dict):
        raise ModelLoadError(f"--weights {str(weights)!r}: 'init_kwargs' must be a dict")
    if not isinstance(pp, dict):
        raise ModelLoadError(
            f"--weights {str(weights)!r}: 'preprocess' must be a dict "
            "{'size': int, 'mean': [..], 'std': [..]}"
        )
    try:
        model = cls(**init_kwargs)
    except TypeError as e:
        raise ModelLoadError(
            f"torch:{name}: cannot construct {cls.__name__}(**{init_kwargs!r}) ({e}); "
            "store the constructor arguments as 'init_kwargs' in the weights file"
        ) from None
    if weights is not None:
        load_into(model, unwrap_state_dict(blob), weights)
    size = int(pp.get("size", DEFAULT_SIZE))
    mean = tuple(float(x) for x in pp.get("mean", IMAGENET_MEAN))
    std = tuple(float(x) for x in pp.get("std", IMAGENET_STD))
    if len(mean) != 3 or len(std) != 3:
        raise ModelLoadError(f"--weights {str(weights)!r}: preprocess mean/std need 3 values (RGB)")
    desc = resize_description(size, mean, std, source="weights file" if pp else "default")
    return Adapter(
        model,
        resize_transform(size, mean, std),
        desc,
        cls.__name__,
        "custom" if weights is not None else "random",
    )
