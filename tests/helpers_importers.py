"""Tiny folders of generated images (PIL) and workspaces for the importer tests; `feat_ws` is a fixture
(a test module names it: `feat_ws = helpers_importers.feat_ws`)."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest
from PIL import Image

from conceptlens.importers import images as imp
from conceptlens.importers.imagefolder import scan as scan_folder
from conceptlens.workspace import Workspace

RGB = {"red": (220, 40, 40), "green": (40, 200, 60), "blue": (40, 60, 220)}


def draw(path, rgb, seed, size=(20, 16)):
    """A small noisy image of one colour: distinct pixels for distinct seeds."""
    rng = np.random.default_rng(seed)
    arr = np.clip(np.array(rgb) + rng.normal(0, 25, (size[1], size[0], 3)), 0, 255).astype(np.uint8)
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(arr).save(path)
    return path


def folder(root, per_class=2, classes=("red", "green", "blue")):
    """root/class/NNN.png, every image different."""
    for c, name in enumerate(classes):
        for i in range(per_class):
            draw(root / name / f"{i:03d}.png", RGB[name], seed=100 * c + i)
    return root


def workspace(tmp_path, name="ws") -> Workspace:
    return Workspace.create(tmp_path / name, name)


def images_table(ws: Workspace):
    return pq.read_table(ws.table_path("images")).to_pandas()


def run(ws, dataset, listing, **kw):
    return imp.import_images(ws, dataset, listing, workers=1, progress=False, **kw)


@pytest.fixture
def feat_ws(tmp_path):
    """A workspace with datasets `d` (6 images) and `e` (2 images)."""
    ws = workspace(tmp_path)
    run(ws, "d", scan_folder(folder(tmp_path / "d")))
    run(ws, "e", scan_folder(folder(tmp_path / "e", per_class=1, classes=("red", "blue"))))
    return ws


def dataset_image_ids(ws, dataset):
    t = images_table(ws)
    return t.loc[t["dataset"] == dataset, "image_id"].tolist()


def write_vectors(tmp_path, ids, seed=0, name="v"):
    X = np.random.default_rng(seed).normal(size=(len(ids), 3)).astype(np.float32)
    np.save(tmp_path / f"{name}.npy", X)
    (tmp_path / f"{name}.txt").write_text("\n".join(ids))
    return tmp_path / f"{name}.npy", tmp_path / f"{name}.txt", X
