"""Turn a Plotly figure into a file for a paper, with its provenance embedded."""

from __future__ import annotations

import io
import json
import os
import shutil

FORMATS = {"pdf": "application/pdf", "svg": "image/svg+xml", "png": "image/png", "html": "text/html"}
# Common paper widths in inches (single and double column of two-column venues).
SIZES = {
    "single column (3.5 in)": (3.5, 2.6),
    "double column (7 in)": (7.0, 4.0),
    "slide (10 in)": (10.0, 5.6),
}
DPI = 96  # Plotly's layout unit is the CSS pixel
PNG_SCALE = 3  # ~300 dpi for raster output


def _browser() -> None:
    # kaleido drives a Chromium; point it at the system one instead of downloading its own.
    if "BROWSER_PATH" not in os.environ:
        for cand in (
            "/usr/bin/chromium",
            shutil.which("chromium") or "",
            shutil.which("google-chrome") or "",
        ):
            if cand and os.path.exists(cand):
                os.environ["BROWSER_PATH"] = cand
                break


def figure_bytes(
    fig, fmt: str, size: tuple[float, float] = SIZES["double column (7 in)"], provenance: dict | None = None
) -> bytes:
    """Render `fig` as `fmt` at `size` inches; provenance goes into the file's metadata."""
    fmt = fmt.lower()
    if fmt not in FORMATS:
        raise ValueError(f"format {fmt!r} is not one of {', '.join(FORMATS)}")
    prov = json.dumps(provenance or {}, sort_keys=True, default=str)
    if fmt == "html":
        html = fig.to_html(include_plotlyjs="cdn", full_html=True)
        tag = f'<script type="application/json" id="conceptlens-provenance">{prov}</script>'
        return html.replace("</head>", tag + "</head>", 1).encode()
    _browser()
    w, h = int(size[0] * DPI), int(size[1] * DPI)
    data = fig.to_image(format=fmt, width=w, height=h, scale=PNG_SCALE if fmt == "png" else 1)
    if fmt == "svg":
        esc = prov.replace("&", "&amp;").replace("<", "&lt;")
        s = data.decode()
        i = s.index(">", s.index("<svg")) + 1
        return (s[:i] + f'<metadata id="conceptlens-provenance">{esc}</metadata>' + s[i:]).encode()
    if fmt == "png":
        from PIL import Image, PngImagePlugin

        im = Image.open(io.BytesIO(data))
        info = PngImagePlugin.PngInfo()
        info.add_text("conceptlens-provenance", prov)
        out = io.BytesIO()
        im.save(out, format="PNG", pnginfo=info, dpi=(DPI * PNG_SCALE, DPI * PNG_SCALE))
        return out.getvalue()
    return data  # pdf: kaleido writes the figure only
