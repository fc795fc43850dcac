"""The 1,797 handwritten digit scans shipped with scikit-learn, with measured attributes."""

from __future__ import annotations

import numpy as np
from PIL import Image

NAMES = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


def load() -> tuple[np.ndarray, np.ndarray]:
    """Return (images 8x8 in [0, 16], labels) from scikit-learn's bundled copy (no download)."""
    from sklearn.datasets import load_digits

    d = load_digits()
    return d.images.astype(np.float64), d.target.astype(np.int64)


def attributes(img: np.ndarray) -> dict:
    """Measured attributes of one 8x8 scan (ink in [0, 16])."""
    ink = img / 16.0
    mass = float(ink.sum())
    rows, cols = np.mgrid[0:8, 0:8].astype(np.float64)
    x, y_up = cols, -rows  # y points up, so a positive slant leans right
    mx, my = (ink * x).sum() / mass, (ink * y_up).sum() / mass
    mu11 = (ink * (x - mx) * (y_up - my)).sum() / mass
    mu02 = (ink * (y_up - my) ** 2).sum() / mass
    on = img > 4
    rr, cc = np.nonzero(on)
    return {
        "slant": float(mu11 / mu02) if mu02 > 0 else 0.0,
        "stroke_mass": mass / 64.0,
        "ink_width": int(cc.max() - cc.min() + 1) if len(cc) else 0,
        "ink_height": int(rr.max() - rr.min() + 1) if len(rr) else 0,
        "centroid_x": float(mx),
        "centroid_y": float(-my),
    }


def describe(label: int, attrs: dict, mass_q: tuple[float, float], slant_t: float) -> str:
    """A caption from the label and measured attributes, e.g. 'a thin right-slanted seven'."""
    m = attrs["stroke_mass"]
    weight = "thin" if m < mass_q[0] else "bold" if m > mass_q[1] else "regular"
    s = attrs["slant"]
    slant = "right-slanted" if s > slant_t else "left-slanted" if s < -slant_t else "upright"
    shape = "wide" if attrs["ink_width"] >= 7 else "narrow" if attrs["ink_width"] <= 4 else ""
    words = " ".join(w for w in (weight, shape, slant) if w)
    return f"a {words} handwritten {NAMES[label]}"


def thumbnail(img: np.ndarray, side: int = 32) -> np.ndarray:
    """Dark ink on white, upscaled for display."""
    g = np.clip(255 - img / 16.0 * 255, 0, 255).astype(np.uint8)
    return np.asarray(Image.fromarray(g).resize((side, side), Image.BILINEAR))
