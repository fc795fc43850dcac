"""Vision models behind one interface: `load_adapter("family:name")` -> `Adapter`.

Families (one module each):

- `open_clip:ARCH@TAG`, `open_clip:ARCH` + `--weights FILE`, `open_clip:CONFIG.json[@TAG]`
- `hf:HUB_ID` or `hf:LOCAL_DIR` (transformers AutoModel + AutoImageProcessor)
- `timm:NAME` (pretrained), `timm:NAME@random`, `timm:NAME` + `--weights FILE`
- `torchvision:NAME[@WEIGHTS_ENUM|@random]`, `torchvision:NAME` + `--weights FILE`
- `torch:package.module:ClassName` (+ `--weights FILE`, see `plain.py`)
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path

from .base import Adapter, LayerError, LayerProbe, ModelLoadError, offline, pool  # noqa: F401

FAMILIES = {
    "open_clip": "openclip",
    "hf": "huggingface",
    "timm": "timm_models",
    "torchvision": "torchvision_models",
    "torch": "plain",
}


def parse_spec(spec: str) -> tuple[str, str]:
    """'family:name' -> (family, name); the name may itself contain ':'."""
    if not isinstance(spec, str) or ":" not in spec:
        raise ModelLoadError(
            f"model spec {spec!r} must look like family:name, with family one of "
            f"{', '.join(FAMILIES)} (e.g. open_clip:ViT-B-32@openai, timm:resnet50)"
        )
    family, name = spec.split(":", 1)
    if family not in FAMILIES:
        raise ModelLoadError(
            f"model spec {spec!r}: unknown family {family!r}; choose from {', '.join(FAMILIES)}"
        )
    if not name:
        raise ModelLoadError(f"model spec {spec!r}: empty model name after {family}:")
    return family, name


def resolve_path(p: str, root: str | os.PathLike | None = None) -> Path | None:
    """An existing file/dir: as given (absolute or relative to cwd), else relative to `root`."""
    cand = Path(p).expanduser()
    if cand.exists():
        return cand
    if root is not None and not cand.is_absolute() and (Path(root) / cand).exists():
        return Path(root) / cand
    return None


def load_adapter(
    spec: str,
    weights: str | os.PathLike | None = None,
    device: str = "cpu",
    root: str | os.PathLike | None = None,
) -> Adapter:
    """Build the adapter for `spec`; `root` (a workspace) also resolves relative paths."""
    family, name = parse_spec(spec)
    if weights is not None:
        w = resolve_path(str(weights), root)
        if w is None or not w.is_file():
            raise ModelLoadError(f"--weights {str(weights)!r}: file not found")
        weights = w
    mod = importlib.import_module(f"{__name__}.{FAMILIES[family]}")
    adapter = mod.load(name, weights=weights, root=root)
    adapter.family = family
    return adapter.to(device)
