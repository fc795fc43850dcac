"""torchvision models: `torchvision:NAME` (its DEFAULT weights), `torchvision:NAME@ENUM`
(e.g. `resnet50@IMAGENET1K_V1`), `torchvision:NAME@random`, or `torchvision:NAME` +
`--weights FILE` (a state dict of the same architecture).

The last `nn.Linear` of the model (the classifier: `fc`, `heads.head`, `classifier.N`) is
replaced by `nn.Identity`, so the forward output is the penultimate feature; the Linear is
kept as the adapter's `head` when its weights are known (a weights file may lack it, or
hold one for other classes). A weights file whose tensors are named differently loads when
they match the model's by order and shape (`base.load_into`). Preprocessing: the weights'
own `transforms()`; for random init or a weights file, those of the architecture's DEFAULT
weights (e.g. resize 232, centre crop 224, ImageNet mean/std for mobilenet_v2).
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


def _classifier(model) -> str | None:
    """The name of the model's last `nn.Linear` (its classifier), or None."""
    import torch.nn as nn

    last = None
    for n, m in model.named_modules():
        if isinstance(m, nn.Linear):
            last = n
    return last


def _drop(model, name: str):
    """Replace submodule `name` by `nn.Identity`; return the module taken off."""
    import torch.nn as nn

    parent_name, _, child = name.rpartition(".")
    parent = model.get_submodule(parent_name) if parent_name else model
    taken = getattr(parent, child)
    setattr(parent, child, nn.Identity())
    return taken


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
    clf = _classifier(model)
    head_known = weights is None  # the enum's weights, or random init
    if weights is not None:
        state = unwrap_state_dict(load_state_dict_file(weights))
        head_known = load_into(model, state, weights, head=clf)
    head = _drop(model, clf) if clf else None
    # The transform of the weights, else of the architecture's DEFAULT weights (random init,
    # a weights file): the ImageNet recipe it was made for. Building it downloads nothing.
    tf_weights = wenum if wenum is not None else models.get_model_weights(arch).__members__.get("DEFAULT")
    if tf_weights is not None:
        preprocess = tf_weights.transforms()
        desc = {
            k: getattr(preprocess, k)
            for k in ("resize_size", "crop_size", "mean", "std")
            if hasattr(preprocess, k)
        }
        desc["interpolation"] = str(getattr(preprocess, "interpolation", "")).rsplit(".", 1)[-1].lower()
        desc["source"] = f"torchvision {tf_weights}"
    else:
        preprocess, desc = resize_transform(224), resize_description(224)
    method = "custom" if weights is not None else ("pretrained" if wenum is not None else "random")
    return Adapter(model, preprocess, desc, arch, method, head=head if head_known else None)
