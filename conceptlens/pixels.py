"""Images as models and thumbnails see them: RGB, with transparency composited onto a
background colour (white by default).

A plain `convert("RGB")` drops the alpha channel, so an icon drawn on a transparent canvas
(whose transparent pixels are usually stored as black) becomes a black square. Every reader
that turns a stored image into RGB pixels for a thumbnail or a model goes through `to_rgb`,
with the background recorded at import (`workspace.json` provenance
`imports.DATASET.thumbnails.background`, read back by `dataset_background`), so thumbnails
and model input agree.
"""

from __future__ import annotations

from PIL import Image, ImageColor

DEFAULT_BACKGROUND = "white"
_TRANSPARENT_MODES = ("RGBA", "LA", "PA", "RGBa", "La")


def parse_background(value, where: str = "--background") -> tuple[int, int, int]:
    """A colour name or hex code (`white`, `#808080`) -> (r, g, b); a clear error otherwise."""
    try:
        rgb = ImageColor.getrgb(str(value))
    except ValueError:
        raise ValueError(
            f"{where}: {value!r} is not a colour; give a name (white, black, gray) or a hex code (#ffffff)"
        ) from None
    return tuple(int(c) for c in rgb[:3])


def background_hex(value, where: str = "--background") -> str:
    """A colour as the workspace records it: `#rrggbb` (one spelling per colour)."""
    r, g, b = parse_background(value, where)
    return f"#{r:02x}{g:02x}{b:02x}"


def has_transparency(im) -> bool:
    return im.mode in _TRANSPARENT_MODES or "transparency" in im.info


def to_rgb(im, background=DEFAULT_BACKGROUND):
    """`im` as an RGB image; transparent pixels composited onto `background`."""
    if not has_transparency(im):
        return im.convert("RGB")
    rgba = im.convert("RGBA")
    canvas = Image.new("RGBA", rgba.size, parse_background(background) + (255,))
    canvas.alpha_composite(rgba)
    return canvas.convert("RGB")


def dataset_background(ws, dataset: str) -> str:
    """The background a dataset's thumbnails were composited onto at import (white when the
    import predates the option or the dataset was not imported by `conceptlens import`)."""
    prov = ws.meta().get("provenance", {}).get("imports", {}).get(dataset, {})
    return str((prov.get("thumbnails") or {}).get("background") or DEFAULT_BACKGROUND)
