"""The demo's CompMap tables: the shapes world's primitives and its classes' compositions.

Primitives are the values of the five factors drawn for every image (colour, shape,
size, pattern, background). A class of the shapes dataset is a colour and a shape
("red star", `shapes.label_of`), so its ground-truth composition is exactly those two;
size, pattern and background vary inside every class and are recorded per image
(`image_primitives`). Prompts are what the demo VL model was trained on: its captions
shortened by word dropout keep the article and a subset of the words in order
(`vl_train.drop_words`), e.g. "a red" or "a white background".

The digits dataset gets none: a digit class is not a composition of its measured
attributes (slant, stroke weight, width vary within every digit), so there is no
ground-truth composition for CompMap to compare against.
"""

from __future__ import annotations

import pyarrow as pa

from .. import schema
from ..workspace import Workspace
from . import shapes as sh

DATASET = "shapes"
GROUPS = {
    "color": tuple(sh.COLORS),
    "shape": sh.SHAPES,
    "size": tuple(sh.SIZES),
    "pattern": sh.PATTERNS,
    "background": tuple(sh.BACKGROUNDS),
}


def prompt(group: str, value: str) -> str:
    return f"a {value} background" if group == "background" else f"a {value}"


def primitives() -> list[dict]:
    rows = []
    for group, values in GROUPS.items():
        for v in values:
            rows.append(
                {
                    "primitive": f"{group}:{v}",
                    "group": group,
                    "value": v,
                    "prompt": prompt(group, v),
                    "position": len(rows),
                    "normalize": "softmax",
                }
            )
    return rows


def label_primitives() -> list[dict]:
    out = []
    for ci, color in enumerate(sh.COLORS):
        for si, shape in enumerate(sh.SHAPES):
            label, name = ci * len(sh.SHAPES) + si, f"{color} {shape}"
            out += [
                {"label": label, "label_name": name, "primitive": p, "value": 1.0}
                for p in (f"color:{color}", f"shape:{shape}")
            ]
    return out


def image_primitives(image_rows: list[dict]) -> list[dict]:
    """One row per image and factor, from the factor columns of images.parquet rows."""
    return [
        {"image_id": r["image_id"], "primitive": f"{g}:{r[g]}", "value": 1.0}
        for r in image_rows
        if r["dataset"] == DATASET
        for g in GROUPS
    ]


def write(ws: Workspace, image_rows: list[dict]) -> None:
    for name, rows in (
        ("primitives", primitives()),
        ("label_primitives", label_primitives()),
        ("image_primitives", image_primitives(image_rows)),
    ):
        ws.write(
            name,
            pa.Table.from_pylist(rows, schema=schema.arrow_schema(name, partition=False)),
            dataset=DATASET,
        )
