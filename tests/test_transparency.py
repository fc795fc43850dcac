"""Transparent images (icons on a transparent canvas) are composited onto a background, the
same one for the thumbnail and the model input, and import warns about flat or identical
images (issue 28, item 1)."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest
from PIL import Image, ImageDraw

import conceptlens.extract as ex
from conceptlens.cli import main
from conceptlens.db import WorkspaceDB
from conceptlens.pixels import to_rgb
from conceptlens.validate import format_problems, validate
from conceptlens.workspace import Workspace
from tests.tiny_models import TinyConv, save_torch_weights

TINY = "torch:tests.tiny_models:TinyConv"
FG = {"a": (200, 30, 30), "b": (30, 30, 200)}


def icon(path, shape: str, fill, size=48):
    """An icon drawn on a fully transparent canvas (transparent pixels stored as black, as
    most icon exporters do): alpha is 0 or 255 only."""
    im = Image.new("RGBA", (size, size), (0, 0, 0, 0))
    d = ImageDraw.Draw(im)
    box = (size // 4, size // 4, 3 * size // 4, 3 * size // 4)
    (d.ellipse if shape == "a" else d.rectangle)(box, fill=fill + (255,))
    im.save(path)
    return path


def on_white(path, out):
    """The same icon composited by hand: alpha * colour + (1 - alpha) * white."""
    a = np.asarray(Image.open(path), np.float64)
    alpha = a[..., 3:] / 255.0
    rgb = alpha * a[..., :3] + (1 - alpha) * 255.0
    Image.fromarray(rgb.round().astype(np.uint8), "RGB").save(out)
    return out


@pytest.fixture
def icons(tmp_path):
    src = tmp_path / "icons"
    for cls in ("a", "b"):
        (src / cls).mkdir(parents=True)
        for i in range(3):
            icon(src / cls / f"{cls}{i}.png", cls, tuple(c + 10 * i for c in FG[cls]))
    ws = tmp_path / "ws"
    assert main(["init", "--workspace", str(ws)]) == 0
    return ws, src


def _imported(ws, src, *extra):
    assert (
        main(
            [
                "import",
                "images",
                "--workspace",
                str(ws),
                str(src),
                "--dataset",
                "icons",
                "--workers",
                "1",
                "--quiet",
                *extra,
            ]
        )
        == 0
    )
    return pq.read_table(ws / "images.parquet").to_pylist()


def test_transparent_icon_thumbnail_is_on_white_not_black(icons):
    ws, src = icons
    rows = _imported(ws, src)
    assert len(rows) == 6
    for r in rows:
        th = np.asarray(Image.open(ws / r["thumbnail"]).convert("RGB"), np.float64)
        # JPEG blurs colour near the icon's edge: the corner is white give or take its artefacts
        assert th[:4, :4].mean() > 245 and th[:4, :4].min() > 200, f"{r['thumbnail']}: corner {th[0, 0]}"
        assert th.mean() > 150  # mostly white background, not a black square
    assert Workspace(ws).meta()["provenance"]["imports"]["icons"]["thumbnails"]["background"] == "#ffffff"
    assert not validate(ws), format_problems(validate(ws))


def test_model_input_of_a_transparent_icon_is_the_icon_on_white(icons, tmp_path):
    """The features of a transparent icon equal those of the same icon composited onto white
    by hand and saved without alpha (another dataset of the same workspace)."""
    ws, src = icons
    _imported(ws, src)
    white = tmp_path / "white"
    for cls in ("a", "b"):
        (white / cls).mkdir(parents=True)
        for p in sorted((src / cls).glob("*.png")):
            on_white(p, white / cls / p.name)
    assert (
        main(
            [
                "import",
                "images",
                "--workspace",
                str(ws),
                str(white),
                "--dataset",
                "flat",
                "--workers",
                "1",
                "--quiet",
            ]
        )
        == 0
    )
    w = save_torch_weights(
        tmp_path / "enc.pt", TinyConv(width=4, dim=6), {"width": 4, "dim": 6}, {"size": 32}
    )
    a = ex.extract(ws, "icons", TINY, weights=w, checkpoint_id="t", progress=False)
    b = ex.extract(ws, "flat", TINY, weights=w, checkpoint_id="w", progress=False)
    db = WorkspaceDB(ws)
    ids_a, xa = db.features(a)
    ids_b, xb = db.features(b)
    assert [i.split("-", 1)[1] for i in ids_a] == [i.split("-", 1)[1] for i in ids_b]
    np.testing.assert_allclose(xa, xb, atol=1e-5)
    assert len({tuple(np.round(r, 5)) for r in xa}) == 6  # six distinct icons, six distinct rows
    row = {r["checkpoint_id"]: r for r in pq.read_table(ws / "checkpoints.parquet").to_pylist()}["t"]
    assert json.loads(row["preprocessing"])["background"] == "#ffffff"


def test_the_model_input_pixels_are_not_black(icons, tmp_path):
    ws, src = icons
    path = src / "a" / "a0.png"
    images = ex._Images([path], [0], lambda im: np.asarray(im), "white")
    _, pixels = images[0]
    assert pixels[0, 0].tolist() == [255, 255, 255]
    assert pixels[24, 24].tolist() == list(FG["a"])


def test_background_option_is_recorded_at_import_and_used_by_extract(icons, tmp_path):
    ws, src = icons
    rows = _imported(ws, src, "--background", "#808080")
    th = np.asarray(Image.open(ws / rows[0]["thumbnail"]).convert("RGB"), np.float64)
    assert abs(th[0, 0] - 128).max() <= 3
    w = save_torch_weights(
        tmp_path / "enc.pt", TinyConv(width=4, dim=6), {"width": 4, "dim": 6}, {"size": 32}
    )
    ex.extract(ws, "icons", TINY, weights=w, checkpoint_id="t", progress=False)
    row = pq.read_table(ws / "checkpoints.parquet").to_pylist()[0]
    assert json.loads(row["preprocessing"])["background"] == "#808080"
    assert ex.model_background(Workspace(ws), "icons", row) == "#808080"


def test_bad_background_names_the_option(icons, capsys):
    ws, src = icons
    assert (
        main(
            [
                "import",
                "images",
                "--workspace",
                str(ws),
                str(src),
                "--dataset",
                "icons",
                "--quiet",
                "--background",
                "nope",
            ]
        )
        != 0
    )
    assert "--background" in capsys.readouterr().err


@pytest.mark.parametrize("mode", ["LA", "P"])
def test_grey_alpha_and_palette_transparency_are_composited(mode):
    im = Image.new("RGBA", (8, 8), (0, 0, 0, 0))
    im.paste((10, 10, 10, 255), (2, 2, 6, 6))
    if mode == "LA":
        im = im.convert("LA")
    else:
        im = im.convert("RGB").quantize(4)
        im.info["transparency"] = im.getpixel((0, 0))
    out = np.asarray(to_rgb(im))
    assert out[0, 0].tolist() == [255, 255, 255]
    assert out[3, 3].tolist() == [10, 10, 10]


def test_import_warns_when_many_images_are_flat_or_identical(tmp_path, capsys):
    src = tmp_path / "src" / "c"
    src.mkdir(parents=True)
    for i in range(3):
        Image.new("RGBA", (32, 32), (0, 0, 0, 0)).save(src / f"blank{i}.png")  # flat even on white
    for i in range(3):
        icon(src / f"icon{i}.png", "a", (40 * i, 100, 100))
    ws = tmp_path / "ws"
    assert main(["init", "--workspace", str(ws)]) == 0
    capsys.readouterr()
    assert (
        main(
            [
                "import",
                "images",
                str(ws),
                str(tmp_path / "src"),
                "--dataset",
                "d",
                "--workers",
                "1",
                "--quiet",
            ]
        )
        == 0
    )
    err = capsys.readouterr().err
    assert "warning: 3 of 6 image(s) are a single flat colour" in err
    assert "blank0.png" in err
    assert "3 of 6 image(s) have the same pixels as another image" in err


def test_no_warning_for_distinct_images(icons, capsys):
    ws, src = icons
    capsys.readouterr()
    _imported(ws, src)
    assert "warning" not in capsys.readouterr().err
