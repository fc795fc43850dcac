"""A procedurally rendered world of single objects with known factors.

In the spirit of dSprites and 3dshapes: every image shows one object whose
shape, colour, size, position, orientation, surface pattern and background
colour are drawn independently, so every factor is known exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SHAPES = ("circle", "square", "triangle", "star", "cross")
COLORS = {
    "red": (220, 40, 40),
    "green": (40, 170, 60),
    "blue": (40, 80, 225),
    "yellow": (235, 205, 30),
    "magenta": (200, 50, 200),
    "cyan": (40, 200, 215),
}
BACKGROUNDS = {
    "white": (245, 245, 245),
    "gray": (128, 128, 128),
    "black": (15, 15, 15),
    "sand": (210, 190, 150),
}
SIZES = {"small": 0.15, "medium": 0.21, "large": 0.28}  # radius, fraction of image side
PATTERNS = ("plain", "striped", "dotted", "checkered")
# Pattern pixels are the object colour scaled by this (a darker shade of it).
PATTERN_SHADE = 0.5
SUPERSAMPLE = 4


@dataclass(frozen=True)
class Factors:
    shape: str
    color: str
    size: str
    pos_x: float  # object centre, fraction of width from the left
    pos_y: float  # object centre, fraction of height from the top
    orientation: float  # degrees
    pattern: str
    background: str


def sample_factors(rng: np.random.Generator) -> Factors:
    size = str(rng.choice(list(SIZES)))
    r = SIZES[size]
    lo, hi = r + 0.02, 1 - r - 0.02
    return Factors(
        shape=str(rng.choice(SHAPES)),
        color=str(rng.choice(list(COLORS))),
        size=size,
        pos_x=float(rng.uniform(lo, hi)),
        pos_y=float(rng.uniform(lo, hi)),
        orientation=float(rng.uniform(0, 360)),
        pattern=str(rng.choice(PATTERNS)),
        background=str(rng.choice(list(BACKGROUNDS))),
    )


def _shape_mask(shape: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Inside-test in the object's own unit coordinates (radius 1)."""
    if shape == "circle":
        return x * x + y * y <= 1.0
    if shape == "square":
        return np.maximum(np.abs(x), np.abs(y)) <= 0.8
    if shape == "triangle":
        # Equilateral triangle inscribed in the unit circle, apex up (image y points down).
        return (y <= 0.5) & (y >= np.sqrt(3.0) * np.abs(x) - 1.0)
    if shape == "star":
        rho = np.hypot(x, y)
        theta = np.mod(np.arctan2(x, -y), 2 * np.pi / 5) / (2 * np.pi / 5)  # 0..1 within an arm
        tri = np.abs(theta - 0.5) * 2  # 1 at the tips, 0 between them
        return rho <= 0.42 + (1.0 - 0.42) * tri**1.6
    if shape == "cross":
        return ((np.abs(x) <= 0.3) & (np.abs(y) <= 0.9)) | ((np.abs(y) <= 0.3) & (np.abs(x) <= 0.9))
    raise ValueError(f"unknown shape {shape!r}")


def _pattern_mask(pattern: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """True where the surface pattern darkens the object (object's unit coordinates)."""
    if pattern == "plain":
        return np.zeros_like(x, dtype=bool)
    if pattern == "striped":
        return np.mod(x * 2.5, 1.0) < 0.5
    if pattern == "dotted":
        u, v = np.mod(x * 2.0, 1.0) - 0.5, np.mod(y * 2.0, 1.0) - 0.5
        return u * u + v * v < 0.09
    if pattern == "checkered":
        return (np.floor(x * 2.5) + np.floor(y * 2.5)) % 2 == 0
    raise ValueError(f"unknown pattern {pattern!r}")


def render(f: Factors, size: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """Return (RGB uint8 image, object coverage in [0, 1]) of side `size`."""
    n = size * SUPERSAMPLE
    c = (np.arange(n) + 0.5) / n
    gx, gy = np.meshgrid(c, c)
    r = SIZES[f.size]
    a = np.deg2rad(f.orientation)
    dx, dy = (gx - f.pos_x) / r, (gy - f.pos_y) / r
    x = np.cos(a) * dx + np.sin(a) * dy
    y = -np.sin(a) * dx + np.cos(a) * dy
    inside = _shape_mask(f.shape, x, y)
    dark = _pattern_mask(f.pattern, x, y) & inside
    obj = np.asarray(COLORS[f.color], np.float64)
    img = np.empty((n, n, 3))
    img[:] = np.asarray(BACKGROUNDS[f.background], np.float64)
    img[inside] = obj
    img[dark] = obj * PATTERN_SHADE
    img = img.reshape(size, SUPERSAMPLE, size, SUPERSAMPLE, 3).mean(axis=(1, 3))
    cover = inside.reshape(size, SUPERSAMPLE, size, SUPERSAMPLE).mean(axis=(1, 3))
    return np.clip(np.rint(img), 0, 255).astype(np.uint8), cover


def position_words(f: Factors) -> str:
    col = "left" if f.pos_x < 0.4 else "right" if f.pos_x > 0.6 else "center"
    row = "top" if f.pos_y < 0.4 else "bottom" if f.pos_y > 0.6 else "middle"
    if (row, col) == ("middle", "center"):
        return "in the center"
    if col == "center":
        return f"at the {row}"
    if row == "middle":
        return f"on the {col}"
    return f"at the {row} {col}"


def caption(f: Factors) -> str:
    return f"a {f.size} {f.color} {f.pattern} {f.shape} on a {f.background} background, {position_words(f)}"


def label_of(f: Factors) -> tuple[int, str]:
    """The composite class: colour x shape."""
    ci, si = list(COLORS).index(f.color), SHAPES.index(f.shape)
    return ci * len(SHAPES) + si, f"{f.color} {f.shape}"


N_LABELS = len(COLORS) * len(SHAPES)
