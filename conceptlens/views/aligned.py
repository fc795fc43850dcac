"""Aligned projections along a sequence of checkpoints (issue 27; table `aligned_projections`,
written by the analysis of the same name): the Checkpoints page's aligned frames, the
images a region drawn on one frame holds, and the images that moved most."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .clusters import colour_options, in_region, parse_region, region_box

SMALL_MULTIPLES = 6  # frames drawn side by side at most (evenly along the sequence)


def runs(db, dataset: str) -> list[str]:
    """The runs of `dataset` with aligned projections: the longest first, then by name."""
    if not db.has("aligned_projections"):
        return []
    q = db.query(
        """SELECT run, count(DISTINCT checkpoint_id) AS n FROM aligned_projections
           WHERE dataset = $ds GROUP BY run ORDER BY n DESC, run""",
        {"ds": dataset},
    )
    return [str(r) for r in q["run"]]


def frames(db, dataset: str, run: str) -> pd.DataFrame:
    """The run's frames in order: step, checkpoint_id, epoch (nullable), images, method."""
    if not db.has("aligned_projections"):
        return pd.DataFrame(columns=["step", "checkpoint_id", "epoch", "images", "method"])
    return db.query(
        """SELECT step, checkpoint_id, any_value(epoch) AS epoch, count(*) AS images,
                  any_value(method) AS method
           FROM aligned_projections WHERE dataset = $ds AND run = $run
           GROUP BY step, checkpoint_id ORDER BY step""",
        {"ds": dataset, "run": run},
    )


def frame_keys(frames: pd.DataFrame) -> list[int]:
    """What names each frame in a link: its epoch when every frame has a distinct one,
    else its step (a sequence of layers, or two checkpoints at one epoch)."""
    ep = frames["epoch"]
    if len(frames) and ep.notna().all() and ep.nunique() == len(frames):
        return [int(e) for e in ep]
    return [int(s) for s in frames["step"]]


def frame_step(frames: pd.DataFrame, key: int) -> int | None:
    """The step of the frame `frame_keys` names `key` (None: no such frame)."""
    keys = frame_keys(frames)
    return int(frames["step"].iloc[keys.index(int(key))]) if int(key) in keys else None


def colours(db, dataset: str) -> list[str]:
    """What the frames can be coloured by: the label, the images' factors, the split (no
    cluster: a frame is of a checkpoint, its clusters would change from frame to frame)."""
    return [c for c in colour_options(db, dataset)["column"] if c != "cluster"]


def points(db, dataset: str, run: str, colour: str = "label_name", step: int | None = None) -> pd.DataFrame:
    """The points of one frame (`step`) or of every frame (None): step, epoch, checkpoint_id,
    image_id, x, y, drift, label_name, thumbnail and the `colour` column of `images`;
    by step, then image id."""
    cols = set(db.columns("images"))
    if colour not in cols:
        raise ValueError(f"colour must be a column of images, got {colour!r}")
    extra = "".join(f", i.{c}" for c in dict.fromkeys(["label_name", "thumbnail", colour]) if c in cols)
    return db.query(
        f"""SELECT a.step, a.epoch, a.checkpoint_id, a.image_id, a.x, a.y, a.drift {extra}
            FROM aligned_projections a JOIN images i USING (image_id)
            WHERE a.dataset = $ds AND a.run = $run {"AND a.step = $step" if step is not None else ""}
            ORDER BY a.step, a.image_id""",
        {"ds": dataset, "run": run, **({"step": int(step)} if step is not None else {})},
    )


def region_ids(db, dataset: str, run: str, step: int, region: str) -> list[str]:
    """The images of frame `step` inside `region` (`views.clusters.parse_region`), by id."""
    kind, pts = parse_region(region)
    rows = db.query(
        """SELECT image_id, x, y FROM aligned_projections
           WHERE dataset = $ds AND run = $run AND step = $step
             AND x BETWEEN $x0 AND $x1 AND y BETWEEN $y0 AND $y1 ORDER BY image_id""",
        {"ds": dataset, "run": run, "step": int(step), **region_box(pts)},
    )
    return [str(i) for i in in_region(rows, kind, pts)["image_id"]]


region_ids.large = True  # a region may hold every image


def drift_by(points: pd.DataFrame, colour: str) -> pd.DataFrame:
    """Mean and median drift per step (from the second frame) and value of `colour`:
    step, epoch, value (text; "all images" for every image), mean, median, images."""
    moved = points[points["step"] > 0]
    if moved.empty:
        return pd.DataFrame(columns=["step", "epoch", "value", "mean", "median", "images"])
    val = (
        moved[colour].astype("string").fillna("(none)")
        if colour in moved
        else pd.Series("", index=moved.index)
    )
    parts = [moved.assign(value="all images"), moved.assign(value=val)]
    both = pd.concat(parts, ignore_index=True)
    both["drift"] = both["drift"].astype(float)
    g = both.groupby(["step", "value"], sort=True)
    out = g.agg(
        epoch=("epoch", "first"), mean=("drift", "mean"), median=("drift", "median"), images=("drift", "size")
    ).reset_index()
    return out[["step", "epoch", "value", "mean", "median", "images"]]


def top_drift(db, dataset: str, run: str, step: int | None = None, limit: int = 24) -> pd.DataFrame:
    """The images that moved most: at `step` (its drift from the frame before), or over the
    whole run (None: the sum of every step's drift, the path length); image_id, drift,
    label_name, thumbnail; the largest first (ties by id)."""
    where = "AND a.step = $step" if step is not None else ""
    return db.query(
        f"""SELECT a.image_id, sum(a.drift) AS drift, any_value(i.label_name) AS label_name,
                   any_value(i.thumbnail) AS thumbnail
            FROM aligned_projections a JOIN images i USING (image_id)
            WHERE a.dataset = $ds AND a.run = $run AND a.drift IS NOT NULL {where}
            GROUP BY a.image_id ORDER BY drift DESC, a.image_id LIMIT $n""",
        {"ds": dataset, "run": run, "n": int(limit), **({"step": int(step)} if step is not None else {})},
    )


def evenly(n: int, most: int = 6) -> list[int]:
    """At most `most` of the positions 0..n-1, evenly spread, the first and last included."""
    if n <= most:
        return list(range(n))
    return sorted({int(round(v)) for v in np.linspace(0, n - 1, most)})
