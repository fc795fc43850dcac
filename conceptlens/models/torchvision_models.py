"""torchvision models: `torchvision:NAME` (its DEFAULT weights), `torchvision:NAME@ENUM`
(e.g. `resnet50@IMAGENET1K_V1`), `torchvision:NAME@random`, or `torchvision:NAME` +
`--weights FILE` (a state dict of the same architecture).

The last `nn.Linear` of the model (the classifier: `fc`, `heads.head`, `classifier.N`) is
replaced by `nn.Identity`, so the forward output is the penultimate feature; its keys in a
weights file are ignored. Preprocessing: the weights' own `transforms()` when pretrained,
else a 224 px square resize + ImageNet mean/std.
"""

from __future__ import annotations

from pathlib import Path

from .base import (
    Adapter,
    ModelLoadError,
    download_blocked,
    load_into,
    load_state_dict_file,
    missing_weights,
    resize_description,
    resize_transform,
    torch_hub_dir,
    unwrap_state_dict,
)


def _drop_classifier(model) -> str | None:
    import torch.nn as nn

    last = None
    for n, m in model.named_modules():
        if isinstance(m, nn.Linear):
            last = n
    if last is None:
        return None
    parent_name, _, child = last.rpartition(".")
    parent = model.get_submodule(parent_name) if parent_name else model
    setattr(parent, child, nn.Identity())
    return last


def load(name: str, weights=None, root=None) -> Adapter:
    from torchvision import models

    arch, sep, tag = name.partition("@")
    if arch not in models.list_models():
        raise ModelLoadError(
            f"torchvision:{name}: unknown model {arch!r}; e.g. {', '.join(models.list_models()[:10])}, ..."
        )
    if weights is not None and sep and tag != "random":
        raise ModelLoadError(f"torchvision:{name}: give either @{tag} or --weights, not both")
    wenum = None
    if weights is None and tag != "random":
        try:
            wenum = models.get_model_weights(arch)[tag or "DEFAULT"]
        except KeyError:
            names = [w.name for w in models.get_model_weights(arch)]
            raise ModelLoadError(
                f"torchvision:{name}: unknown weights {tag!r}; choose from "
                f"{', '.join(names + ['DEFAULT', 'random'])}"
            ) from None
    if wenum is not None:
        # torchvision downloads by URL, which ignores HF_HUB_OFFLINE (and retries with no
        # network): check the cache ourselves.
        cached = Path(torch_hub_dir()) / wenum.url.rsplit("/", 1)[-1]
        why = None if cached.is_file() else download_blocked(wenum.url)
        if why is not None:
            raise missing_weights(
                f"torchvision:{name}",
                f"the torch hub cache {cached}",
                None,
                "pass a state dict with --weights PATH, or use @random",
                why,
            )
    try:
        model = models.get_model(arch, weights=wenum)
    except Exception as e:  # download errors (URLError, OSError, RuntimeError ...)
        if wenum is None:
            raise ModelLoadError(f"torchvision:{name}: cannot create the model ({e})") from None
        raise missing_weights(
            f"torchvision:{name}",
            f"the torch hub cache {torch_hub_dir()} (file {wenum.url.rsplit('/', 1)[-1]})",
            e,
            "pass a state dict with --weights PATH, or use @random",
        ) from None
    clf = _drop_classifier(model)
    if weights is not None:
        state = unwrap_state_dict(load_state_dict_file(weights))
        if clf:
            state = {k: v for k, v in state.items() if not k.startswith(f"{clf}.")}
        load_into(model, state, weights)
    if wenum is not None:
        preprocess = wenum.transforms()
        desc = {
            k: getattr(preprocess, k)
            for k in ("resize_size", "crop_size", "mean", "std")
            if hasattr(preprocess, k)
        }
        desc["interpolation"] = str(getattr(preprocess, "interpolation", "")).rsplit(".", 1)[-1].lower()
        desc["source"] = f"torchvision {wenum}"
    else:
        preprocess, desc = resize_transform(224), resize_description(224)
    method = "custom" if weights is not None else ("pretrained" if wenum is not None else "random")
    return Adapter(model, preprocess, desc, arch, method)
