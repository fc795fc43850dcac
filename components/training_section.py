"""The Checkpoints page's 'Along training' section (issue 27): for one sequence of the
dataset, a training run (by epoch) or the layers of one network (a depth sequence, by
depth), the concept events between consecutive checkpoints (timeline, table, an event's
images) and the learning curves of the labels, factors and saved selections (figure,
learned-at table), with "epoch" or "layer" on the axis.

Every choice is in the URL: &run=SEQUENCE&kinds=changes|all&cap=N&event=STEP-EVENT&factor=F,
and &run_ds=DATASET when the page's dataset has no sequence (the sequences of one that has).
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from components import url_state as U
from components.aligned_section import aligned_section
from components.analysis_gate import available, command
from components.cluster_tables import DASH
from components.export_button import show_catalog_figure
from components.image_grid import image_grid
from components.metric_table import metric_table
from components.text import literal
from conceptlens.analysis.base import parse_sequence_name
from conceptlens.figures.specs.checkpoints import CAPS, KINDS
from conceptlens.figures.training import short_text
from conceptlens.views import clusters as C
from conceptlens.views import training as T

KIND_NAMES = {"changes": "splits, merges, births, deaths", "all": "and continuations"}


def _ids(ids) -> str:
    return ", ".join(str(int(c)) for c in ids) if len(ids) else DASH


def sequence_label(run: str) -> str:
    """How the sequence picker names a sequence."""
    base, axis, at = parse_sequence_name(run)
    if axis == "depth":
        return f"{base}: layers by depth" + ("" if at is None else f" (epoch {at})")
    return f"{base}: training, by epoch" + ("" if at is None else f" (layer {at})")


def _ticks(epochs: pd.DataFrame) -> dict:
    return dict(zip(epochs["epoch"], epochs["tick"]))


def event_table(events: pd.DataFrame, axis: str = "epoch", ticks: dict | None = None) -> pd.DataFrame:
    """`views.training.events` as the page shows it (cluster ids as text, the naming
    cluster's caption whole); on a depth sequence the layers it happened between."""
    if axis == "depth":
        t = ticks or {}
        where = {
            "layers": [
                f"{t.get(a, a)} → {t.get(b, b)}" for a, b in zip(events["epoch_from"], events["epoch_to"])
            ]
        }
    else:
        where = {"epochs": [f"{a} → {b}" for a, b in zip(events["epoch_from"], events["epoch_to"])]}
    return pd.DataFrame(
        {
            **where,
            "kind": events["kind"],
            "clusters before": [_ids(v) for v in events["before"]],
            "clusters after": [_ids(v) for v in events["after"]],
            "named by": [f"c{m}" for m in events["main"]],
            "caption (or top label)": events["name"],
            "images": events["images"],
            "size before": events["size_before"],
            "size after": events["size_after"],
            "purity before": events["purity_before"].astype(float),
            "purity after": events["purity_after"].astype(float),
            "largest p": events["p_value"].astype(float),
        }
    )


EVENT_FORMATS = {"purity before": "%.2f", "purity after": "%.2f", "largest p": "%.2g"}


def learned_table(learned: pd.DataFrame, axis: str = "epoch", ticks: dict | None = None) -> pd.DataFrame:
    """`views.training.learned` as the page shows it: the AUC and its interval as text; on a
    depth sequence the positions are named by layer (`ticks`: depth -> layer)."""
    t = ticks or {}
    unit = "layer" if axis == "depth" else "epoch"

    def at(v):
        if v is None or pd.isna(v):
            return None
        return str(t.get(int(v), int(v))) if axis == "depth" else int(v)

    def auc(r) -> str:
        if pd.isna(r.auc):
            return DASH
        return f"{r.auc:.3f} [{r.auc_lo:.3f}, {r.auc_hi:.3f}] at {unit} {at(r.epoch)}"

    return pd.DataFrame(
        {
            "factor": learned["factor"],
            "value": [DASH + " (whole factor)" if pd.isna(v) else v for v in learned["value"]],
            f"learned at {unit}": [at(v) for v in learned["learned_at"]],
            f"lost at {unit}": [at(v) for v in learned["lost_at"]],
            "AUC [95% CI]": [auc(r) for r in learned.itertuples(index=False)],
            "best AUC": learned["best_auc"].astype(float),
            f"at {unit}": [at(v) for v in learned["best_epoch"]],
            "best cluster's purity": learned["cluster_purity"].astype(float),
        }
    )


def training_section(ws, ds: str, provenance: dict) -> None:
    st.header("Along training and depth")
    st.caption(
        "One sequence at a time: a training run (`checkpoints.run`, its checkpoints ordered by "
        "epoch) or the layers of one network (checkpoints of one run at one epoch ordered by "
        "`checkpoints.depth`): how its clusters split, merge, appear and vanish between "
        "consecutive checkpoints, and when each label, factor value and saved selection becomes "
        "learnable (docs/analysis.md, 'Along training and depth')."
    )
    runs = ws.view(T.runs, dataset=ds)
    if not runs:
        # The page's dataset has no run to follow: one of the datasets that has, chosen here and
        # kept in the URL as &run_ds= (sorted as the catalogue's choices of the figures' `ds`).
        names = ws.view(C.datasets)["dataset"].astype(str)
        others = sorted(d for d in names if d != ds and ws.view(T.runs, dataset=d))
        have = [n for n in ("concept_events", "learning_curves") if available(ws, n, ds)]
        if have or others:  # computed, but for no run of this dataset
            st.info(
                f"No training run or depth sequence of {literal(ds)} has two or more checkpoints "
                "(`checkpoints.run`, `epoch`, `depth`) to follow"
                + (": the runs of another dataset are followed below." if others else "."),
                icon=":material/info:",
            )
        if not others:
            return
        ds = U.url_selectbox(
            "Dataset of the sequences",
            others,
            key="ckpts_run_ds",
            param="run_ds",
            container=st.columns([1, 2])[0],
        )
        provenance = {**provenance, "dataset": ds}
        runs = ws.view(T.runs, dataset=ds)
    c_run, c_kinds, c_cap = st.columns([2, 2, 1])
    run = U.url_selectbox(
        "Sequence", runs, key="ckpts_run", param="run", container=c_run, format_func=sequence_label
    )
    axis = T.axis(run)
    kinds = U.url_radio(
        "Events shown",
        list(KINDS),
        key="ckpts_kinds",
        param="kinds",
        format_func=lambda k: KIND_NAMES[k],
        horizontal=True,
        container=c_kinds,
    )
    cap = U.url_selectbox(
        "Drawn at most",
        list(CAPS),
        key="ckpts_cap",
        param="cap",
        format_func=lambda n: "all" if n == 0 else f"the {n} largest",
        container=c_cap,
        help="The timeline draws the largest events (by images); the table lists them all.",
    )
    epochs = ws.view(T.epochs, dataset=ds, run=run)
    ticks = _ticks(epochs)
    if axis == "depth":
        steps = [f"{literal(t)} ({literal(c)})" for c, t in zip(epochs["checkpoint_id"], epochs["tick"])]
    else:
        steps = [f"epoch {e} ({literal(c)})" for c, e in zip(epochs["checkpoint_id"], epochs["epoch"])]
    st.markdown(f"**{literal(run)}**: " + " → ".join(steps))

    aligned_section(ws, ds, run, provenance)  # components/aligned_section.py

    _events_part(ws, ds, run, kinds, cap, axis, ticks, provenance)
    _curves_part(ws, ds, run, axis, ticks, provenance)


def _events_part(ws, ds: str, run: str, kinds: str, cap, axis: str, ticks: dict, provenance: dict) -> None:
    """Concept events of the sequence: counts, the timeline, the table and an event's images."""
    st.subheader("Concept events")
    if available(ws, "concept_events", ds):
        counts = ws.view(T.event_counts, dataset=ds, run=run)
        per_kind = counts.groupby("kind")["events"].sum()
        cols = st.columns(5)
        for col, kind in zip(cols, ("split", "merge", "birth", "death", "continuation")):
            col.metric(f"{kind}s", int(per_kind.get(kind, 0)))
        events = ws.view(T.events, dataset=ds, run=run, kinds=KINDS[kinds])
        if counts.empty:
            st.info(
                f"No events stored for {literal(run)}: it has fewer than two clustered checkpoints "
                "at one k, or the analysis has not reached it. Compute it with:",
                icon=":material/pending:",
            )
            st.code(command(ws, "concept_events", ds), language="bash")
        elif events.empty:
            st.info("No split, merge, birth or death in this sequence: every cluster continues.")
        else:
            st.caption(
                "One row per event, between the two checkpoints it happened between; labelled "
                "with the caption (else the top label) of the cluster it is about and its id "
                "(c12 → 3: cluster 12 splits into 3; 2 → c5: two clusters merge into 5). Mark "
                "size: images on the event's links. Hover an event for every cluster's caption, "
                "its purity before and after, and its p-value."
            )
            show_catalog_figure(
                ws,
                "event_timeline",
                {"ds": ds, "run": run, "kinds": kinds, "cap": cap},
                provenance,
                key="ckpts_timeline_fig",
            )
            with st.expander(f"All {len(events)} events"):
                metric_table(
                    event_table(events, axis, ticks),
                    key="ckpts_events",
                    formats=EVENT_FORMATS,
                    placeholder=DASH,
                )
            keys = [f"{s}-{e}" for s, e in zip(events["step"], events["event"])]
            where = (
                (lambda a, b: f"{ticks.get(a, a)} → {ticks.get(b, b)}")
                if axis == "depth"
                else (lambda a, b: f"epoch {a} → {b}")
            )
            label = {
                k: f"{where(r.epoch_from, r.epoch_to)}: {r.kind} of c{r.main}"
                + (f" ({short_text(r.name, 40)})" if r.name else "")
                for k, r in zip(keys, events.itertuples(index=False))
            }
            picked = U.url_selectbox(
                "Images of an event", keys, key="ckpts_event", param="event", format_func=label.get
            )
            # An event's images come from the clusterings: a broken `clusters` is named here.
            if picked and available(ws, "clustering", ds, tables=("clusters",)):
                step, event = (int(v) for v in picked.split("-"))
                rows = ws.view(T.event_images, dataset=ds, run=run, step=step, event=event)
                st.caption(
                    "The images that take part (the first 26 by id): those of the clusters before that "
                    "the clusters after hold (a birth's: its cluster's; a death's: its cluster's)."
                )
                image_grid(ws, rows)


def _curves_part(ws, ds: str, run: str, axis: str, ticks: dict, provenance: dict) -> None:
    """Learning curves of the sequence: the figure and the table of when each was learned."""
    st.subheader("Learning curves")
    if available(ws, "learning_curves", ds):
        factors = ws.view(T.factors, dataset=ds, run=run)
        if not factors:
            st.info(f"No learning curves stored for {literal(run)}. Compute them with:")
            st.code(command(ws, "learning_curves", ds), language="bash")
            return
        factor = U.url_selectbox(
            "Curves of",
            ["all", *factors],
            key="ckpts_factor",
            param="factor",
            format_func=lambda f: "every factor (whole-factor AUC)" if f == "all" else f"the values of {f}",
            container=st.columns([1, 2])[0],
        )
        learned = ws.view(T.learned, dataset=ds, run=run)
        thr = float(learned["threshold"].iloc[0]) if len(learned) else float("nan")
        st.caption(
            "Held-out one-vs-rest AUC of a cosine 20-NN fitted on the train split, with its 95% "
            f"bootstrap interval (band). Filled marks: learned there, i.e. the interval's low end "
            f"is above {thr:.2f} (dotted line); 0.5 is chance. Saved selections (factor `saved "
            "selection`): the selection score's learnability of the set against the rest."
        )
        show_catalog_figure(
            ws,
            "learning_curves",
            {"ds": ds, "run": run, "factor": factor},
            provenance,
            key="ckpts_curves_fig",
        )
        shown = learned if factor == "all" else learned[learned["factor"] == factor]
        metric_table(
            learned_table(shown, axis, ticks),
            key="ckpts_learned",
            formats={"best AUC": "%.3f", "best cluster's purity": "%.2f"}
            | ({"learned at epoch": "%d"} if axis == "epoch" else {}),
            placeholder=DASH,
        )
