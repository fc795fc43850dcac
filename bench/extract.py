"""Throughput of `conceptlens.extract.extract` on this machine (not a test; just prints).

    HF_HUB_OFFLINE=1 .venv/bin/python bench/extract.py [--n 256] [--batch-size 64]

(a) a small conv encoder like the demo's (4 conv layers, 64x64 input), and
(b) a ResNet-50-sized model (torchvision resnet50, random init) at 224 px,
on synthetic shapes images in a temporary workspace, through the real extract path
(image decoding, preprocessing, DataLoader, inference, partial + final Parquet writes).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.nn as nn

os.environ.setdefault("HF_HUB_OFFLINE", "1")


class SmallConv(nn.Module):
    """4 conv layers + global pool + projection, on 64x64 RGB."""

    def __init__(self, dim: int = 128):
        super().__init__()
        chans = [3, 32, 64, 128, 256]
        layers = []
        for cin, cout in zip(chans, chans[1:]):
            layers += [nn.Conv2d(cin, cout, 3, stride=2, padding=1), nn.BatchNorm2d(cout), nn.ReLU()]
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(chans[-1], dim)

    def forward(self, x):
        return self.head(self.features(x).mean(dim=(2, 3)))


def make_workspace(root: Path, n: int) -> None:
    from conceptlens import schema
    from conceptlens.demo.build import build_shapes, images_table
    from conceptlens.workspace import Workspace

    ws = Workspace.create(root, name="bench")
    rows, _ = build_shapes(ws, seed=0, n=n, progress=False)
    ws.write("images", images_table(rows))
    ws.write("checkpoints", schema.empty("checkpoints"))


def run(root: Path, label: str, spec: str, n: int, weights=None, batch_size=64) -> None:
    from conceptlens.extract import extract
    from conceptlens.models import load_adapter

    load_adapter(spec, weights=weights)  # warm the imports: they are paid once per process
    t = time.perf_counter()
    load_adapter(spec, weights=weights)
    load = time.perf_counter() - t
    t = time.perf_counter()
    cid = extract(root, "shapes", spec, weights=weights, batch_size=batch_size, progress=False)
    dt = time.perf_counter() - t
    print(
        f"{label:<42} {n / (dt - load):7.1f} images/s  ({n} images in {dt:.1f} s incl. "
        f"{load:.1f} s model load; {n / dt:.1f} images/s overall; checkpoint {cid})"
    )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--batch-size", type=int, default=64)
    args = ap.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ws"
        make_workspace(root, args.n)
        w = root / "small_conv.pt"
        torch.save(
            {
                "state_dict": SmallConv().state_dict(),
                "init_kwargs": {"dim": 128},
                "preprocess": {"size": 64, "mean": [0.5] * 3, "std": [0.5] * 3},
            },
            w,
        )
        # The plain-torch family imports the class by dotted path; this script is __main__.
        run(
            root,
            "(a) small conv encoder, 64 px",
            "torch:__main__:SmallConv",
            args.n,
            weights=w,
            batch_size=args.batch_size,
        )
        run(
            root,
            "(b) torchvision resnet50 (random), 224 px",
            "torchvision:resnet50@random",
            args.n,
            batch_size=args.batch_size,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
