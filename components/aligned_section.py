"""Aligned projections of a training run (issue 27), inside the Checkpoints page's 'Along
training' section (components/training_section.py calls `aligned_section`): one frame at a
time on a slider, drawn with the WebGL projection view; a box or lasso drawn on a frame
selects images, which are ringed in every other frame and in the small multiples; the drift
of the images between frames, and those that moved most.

Every choice is in the URL: &aframe=EPOCH (the frame shown; its step for a sequence without
distinct epochs), &acolor=COLUMN, &aregion=box:...|lasso:... and &aat=EPOCH (the region and
the frame it was drawn on: frames share one frame of reference, so a region means the images
of that frame inside it).
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from components import projection as P
from components import url_state as U
from components.analysis_gate import available, command
from components.export_button import show_catalog_figure
from components.image_grid import image_grid
from components.metric_table import metric_table
from components.text import literal
from conceptlens.analysis.base import AXIS_NAMES
from conceptlens.views import aligned as A
from conceptlens.views import training as T
from conceptlens.views.clusters import parse_region, region_text

VIEW_KEY = "ckpts_aproj"
TOP_DRIFT = 24


def _on_select(at: int) -> None:
    # The frame's WebGL view sends a committed box or lasso (kept in the URL with the frame
    # it was drawn on) or a cleared one.
    ev = st.session_state.get(VIEW_KEY) or {}
    if ev.get("event") == "select":
        st.session_state["ckpts_aregion"] = region_text(ev["kind"], ev["x"], ev["y"])
        st.session_state["ckpts_aat"] = at
    elif ev.get("event") == "clear":
        st.session_state["ckpts_aregion"] = None
        st.session_state["ckpts_aat"] = None


def _region(raw: str) -> str:
    parse_region(raw)  # ValueError: the URL's value is dropped with a warning
    return raw


def drift_table(rows: pd.DataFrame) -> pd.DataFrame:
    """`views.aligned.top_drift` as the page shows it."""
    return pd.DataFrame(
        {"image": rows["image_id"], "label": rows["label_name"], "drift": rows["drift"].astype(float)}
    )


def aligned_section(ws, ds: str, run: str, provenance: dict) -> None:
    st.subheader("Aligned projections")
    if not available(ws, "aligned_projections", ds):
        return
    if run not in ws.view(A.runs, dataset=ds):
        st.info(
            f"No aligned projections of {literal(run)} yet. Compute them with:", icon=":material/pending:"
        )
        st.code(command(ws, "aligned_projections", ds), language="bash")
        return
    frames = ws.view(A.frames, dataset=ds, run=run)
    keys = A.frame_keys(frames)
    by_epoch = frames["epoch"].notna().all() and keys == [int(e) for e in frames["epoch"]]
    # A depth sequence's frames are its layers (its `epoch` column holds the depth).
    word = AXIS_NAMES[T.axis(run)]
    name = {k: (f"{word} {k}" if by_epoch else f"step {k}") for k in keys}
    method = str(frames["method"].iloc[0])
    st.caption(
        f"The images of the run ({int(frames['images'].iloc[0]):,}, a seeded sample at most), one "
        "2-D projection per checkpoint in one shared frame "
        + (
            "(umap-learn's AlignedUMAP: an image stays where it was unless its neighbours change)"
            if method == "aligned_umap"
            else "(each checkpoint's UMAP rotated onto the one before)"
        )
        + ". Draw a box or lasso on a frame: the same images are ringed in every frame and in the "
        "small multiples below."
    )
    c_frame, c_colour = st.columns([3, 1])
    colour = U.url_selectbox(
        "Colour frames by",
        ws.view(A.colours, dataset=ds),
        key="ckpts_acolor",
        param="acolor",
        container=c_colour,
    )
    at = (
        U.url_select_slider(
            "Frame", keys, key="ckpts_aframe", param="aframe", format_func=name.get, container=c_frame
        )
        if len(keys) > 1
        else keys[0]
    )
    step = A.frame_step(frames, at)
    region = U.url_value("ckpts_aregion", "aregion", _region, None, "Region")
    drawn_at = U.url_value("ckpts_aat", "aat", int, None, "Frame of the region", valid=lambda v: v in keys)
    if region is not None and drawn_at is None:
        region = None  # a region without its frame selects nothing
    ids: list[str] = []
    if region is not None:
        ids = ws.view(A.region_ids, dataset=ds, run=run, step=A.frame_step(frames, drawn_at), region=region)
    enc = P.points_of(ws, colour, view=A.points, dataset=ds, run=run, colour=colour, step=step)
    P.ring_ids(enc, ids)
    P.projection_view(
        enc,
        key=VIEW_KEY,
        data_key=f"{ws.fp}|{ds}|{run}|{step}|{colour}",
        view_key=f"{ws.fp}|{ds}|{run}",
        region=region if drawn_at == at else None,
        height=480,
        on_change=lambda: _on_select(at),
    )
    if ids:
        st.markdown(
            f"**{len(ids):,} images selected in {name[drawn_at]}**, ringed in every frame."
            + ("" if drawn_at == at else f" (The box or lasso is drawn on {name[drawn_at]} only.)")
        )
    elif region is not None:
        st.caption(f"The region drawn on {name[drawn_at]} holds no image.")
    show_catalog_figure(
        ws,
        "aligned_frames",
        {"ds": ds, "run": run, "acolor": colour, "aregion": region, "aat": drawn_at if region else None},
        provenance,
        key="ckpts_aligned_fig",
    )
    if len(frames) < 2:
        return
    st.markdown("**Drift**: how far the images moved from one frame to the next, in the shared frame.")
    show_catalog_figure(
        ws, "aligned_drift", {"ds": ds, "run": run, "acolor": colour}, provenance, key="ckpts_drift_fig"
    )
    since = step if step > 0 else None
    top = ws.view(A.top_drift, dataset=ds, run=run, step=since, limit=TOP_DRIFT)
    prev = name[keys[keys.index(at) - 1]] if since is not None else None
    st.markdown(
        f"**The {len(top)} images that moved most** "
        + (f"from {prev} to {name[at]}" if since is not None else "over the whole run (summed drift)")
    )
    top = top.assign(
        caption=[f"{lab} · {d:.2f}" for lab, d in zip(top["label_name"].fillna(""), top["drift"])]
    )
    image_grid(ws, top, caption_col="caption")
    with st.expander("As a table"):
        metric_table(drift_table(top), key="ckpts_drift_table", formats={"drift": "%.3f"})
