"""open_clip image towers.

Names: `ARCH@TAG` (a built-in architecture with a pretrained tag, e.g. `ViT-B-32@openai`),
`ARCH` with `--weights FILE` (a local open_clip checkpoint), `PATH/TO/CONFIG.json[@TAG]`
(a custom architecture: the JSON holds `embed_dim`, `vision_cfg`, `text_cfg` like open_clip's
own `model_configs/`; it is registered with `open_clip.add_model_config` under its file stem),
and open_clip's own `hf-hub:ORG/REPO` / `local-dir:PATH` names. `ARCH` alone is random init.
The embedding is `encode_image` (not normalised).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from . import resolve_path
from .base import (
    Adapter,
    ModelLoadError,
    download_blocked,
    hf_cache_dir,
    hf_repo_cached,
    hub_endpoint,
    missing_weights,
)


def _split_tag(name: str) -> tuple[str, str | None]:
    if name.startswith(("hf-hub:", "local-dir:")):
        return name, None
    arch, sep, tag = name.rpartition("@")
    if sep and tag and "/" not in tag and os.sep not in tag:
        return arch, tag
    return name, None


def arch_from_config(path: Path) -> str:
    """Register a model config JSON with open_clip; return the architecture name (file stem)."""
    import open_clip

    try:
        cfg = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise ModelLoadError(f"open_clip config {str(path)!r}: cannot be read as JSON ({e})") from None
    missing = [k for k in ("embed_dim", "vision_cfg", "text_cfg") if k not in cfg]
    if missing:
        raise ModelLoadError(f"open_clip config {str(path)!r}: missing key(s) {missing}")
    open_clip.add_model_config(Path(path))
    return Path(path).stem


def create(name: str, weights=None, root=None, device: str = "cpu"):
    """(model, preprocess, arch, tag) for an open_clip name (shared with CoCa captioning)."""
    import open_clip

    arch, tag = _split_tag(name)
    if arch.endswith(".json"):
        p = resolve_path(arch, root)
        if p is None:
            raise ModelLoadError(
                f"open_clip config {arch!r} not found (relative paths are tried "
                f"from the current directory{' and the workspace' if root else ''})"
            )
        arch = arch_from_config(p)
    if weights is not None and tag is not None:
        raise ModelLoadError(
            f"open_clip:{name}: give either a pretrained tag (@{tag}) or --weights, not both"
        )
    pretrained = str(weights) if weights is not None else tag
    hint = "pass a local open_clip checkpoint with --weights PATH (spec open_clip:ARCH)"
    if tag:
        # Checked before open_clip downloads: offline, its URL fetch ignores HF_HUB_OFFLINE,
        # and with no network the hub client retries for minutes.
        cfg = open_clip.get_pretrained_cfg(arch, tag) or {}
        if cfg.get("hf_hub"):
            repo = cfg["hf_hub"].strip("/")
            why = None if hf_repo_cached(repo) else download_blocked(hub_endpoint())
            where = f"the Hugging Face cache {hf_cache_dir()} ({repo})"
        elif cfg.get("url"):
            cached = Path(os.path.expanduser("~/.cache/clip")) / os.path.basename(cfg["url"])
            why = None if cached.is_file() else download_blocked(cfg["url"])
            where = f"open_clip's URL cache {cached}"
        else:
            why = None
        if why is not None:
            raise missing_weights(f"open_clip:{name}", where, None, hint, why)
    if pretrained is None and arch.startswith(("hf-hub:", "local-dir:")):
        pretrained = None
    try:
        model, _, preprocess = open_clip.create_model_and_transforms(
            arch, pretrained=pretrained, device=device
        )
    except RuntimeError as e:
        msg = str(e)
        if "Failed to download" in msg:
            raise missing_weights(
                f"open_clip:{name}",
                f"the Hugging Face cache {hf_cache_dir()} and open_clip's URL cache "
                f"{os.path.expanduser('~/.cache/clip')}",
                e,
                hint,
            ) from None
        if "not a known tag" in msg:
            tags = open_clip.list_pretrained_tags_by_model(arch)
            raise ModelLoadError(
                f"open_clip:{name}: unknown pretrained tag {tag!r} for {arch}; "
                f"known tags: {', '.join(tags) or 'none'}"
            ) from None
        if "not found" in msg and "config" in msg.lower():
            raise ModelLoadError(
                f"open_clip:{name}: unknown architecture {arch!r}; give a config "
                f"JSON path or one of e.g. {', '.join(open_clip.list_models()[:8])}, ..."
            ) from None
        raise ModelLoadError(f"open_clip:{name}: cannot create the model ({msg.splitlines()[0]})") from None
    except OSError as e:  # hf-hub: names offline
        raise missing_weights(f"open_clip:{name}", f"the Hugging Face cache {hf_cache_dir()}", e) from None
    return model, preprocess, arch, tag


class OpenClipAdapter(Adapter):
    def embed(self, batch):
        return self.model.encode_image(batch)


def _describe(model) -> dict:
    cfg = dict(getattr(model.visual, "preprocess_cfg", {}) or {})
    out = {k: (list(v) if isinstance(v, tuple) else v) for k, v in cfg.items()}
    out["source"] = "open_clip"
    return out


def load(name: str, weights=None, root=None) -> Adapter:
    model, preprocess, arch, tag = create(name, weights, root)
    method = "custom" if weights is not None else ("pretrained" if tag or ":" in arch else "random")
    model_name = f"{arch}@{tag}" if tag else arch
    return OpenClipAdapter(model, preprocess, _describe(model), model_name, method)
