"""SimCLR-style image augmentation: two random views of an image for the alignment baseline
(`conceptlens analyze baselines`, Wang and Isola 2020) and for the demo's contrastive
training regimes (`conceptlens.demo.encoders`), the same transform in both.

Random resized crop of at least `min_scale` of the area with a horizontal flip, colour
jitter (brightness, contrast, saturation each by a factor in [1 - color, 1 + color]) and
greyscale with probability `gray_p`; every draw comes from the generator passed in, so a
seed gives the same views on every machine.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def augment(
    x01: torch.Tensor,
    g: torch.Generator,
    flip: bool = True,
    min_scale: float = 0.5,
    color: float = 0.4,
    gray_p: float = 0.2,
) -> torch.Tensor:
    """SimCLR-style views of a [0, 1] batch: random resized crop (+flip), colour jitter, grey."""
    b = x01.shape[0]
    area = min_scale + (1 - min_scale) * torch.rand(b, generator=g)
    sc = area.sqrt()
    tx = (torch.rand(b, generator=g) * 2 - 1) * (1 - sc)
    ty = (torch.rand(b, generator=g) * 2 - 1) * (1 - sc)
    sx = sc * (torch.where(torch.rand(b, generator=g) < 0.5, -1.0, 1.0) if flip else 1.0)
    theta = torch.zeros(b, 2, 3)
    theta[:, 0, 0], theta[:, 0, 2], theta[:, 1, 1], theta[:, 1, 2] = sx, tx, sc, ty
    grid = F.affine_grid(theta, list(x01.shape), align_corners=False)
    x = F.grid_sample(x01, grid, mode="bilinear", padding_mode="border", align_corners=False)
    if color > 0:

        def fac():
            return (1 + (torch.rand(b, generator=g) * 2 - 1) * color).view(b, 1, 1, 1)

        bright, contrast, sat = fac(), fac(), fac()
        x = x * bright
        m = x.mean(dim=(1, 2, 3), keepdim=True)
        x = (x - m) * contrast + m
        grey = x.mean(dim=1, keepdim=True)
        x = (x - grey) * sat + grey
    if gray_p > 0:
        to_grey = (torch.rand(b, generator=g) < gray_p).view(b, 1, 1, 1)
        x = torch.where(to_grey, x.mean(dim=1, keepdim=True).expand_as(x), x)
    return x.clamp(0, 1)
