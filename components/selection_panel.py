"""*Score this selection* (issue 26): the concept scores of any group of one dataset's images on
a checkpoint, with their intervals and nulls, its label and factor histograms, saving it by
name (the owner only) and reopening a saved one, and its scores on every checkpoint of the
dataset.

The panel is the same on every page that has a projection (Clusters, Checkpoints, Similarity):
each page passes its own selection, the checkpoint to score on and, for describability, a k.

Where the group comes from (`?ssrc=`): the page's own selection (a box or lasso drawn on its
UMAP, a cluster, the clusters the filters keep: already in the page's URL), a label (`&slabel=`),
a factor value (`&sfactor=COLUMN&sfvalue=VALUE`), a caption filter (the images with a caption
containing a text, ignoring case: `&scap=TEXT`, of one captioner `&scapby=CAPTIONER` or of
any), a cluster of any checkpoint of the dataset
(`&sfck=CHECKPOINT&sfk=K&sfc=CLUSTER`), a CSV of image ids (kept in the link as `&ids=`,
compressed, when it holds at most 200 ids: conceptlens.selections.encode_ids; a larger one
is saved by name to be linked) or a saved selection (`&saved=NAME`, the latest save of that
name). `&nnull=N`: random sets per null; `&across=1`: the scores on every checkpoint. The panel
scores nothing until it is turned on (`&score=1`).

Scores are cached by (the tables the scores read, checkpoint, a digest of the ids, options),
so saving a selection (which writes only the selections table) does not score it again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import numpy as np
import pandas as pd
import streamlit as st

from components import study
from components import url_state as U
from components.cache import cached
from components.cluster_tables import DASH, missing
from components.export_button import show_catalog_figure, show_figure, view_provenance
from components.text import literal
from conceptlens import permissions as P
from conceptlens import selections as SEL
from conceptlens import text
from conceptlens.errors import ConceptLensError
from conceptlens.figures.selection import across_figure, score_name
from conceptlens.figures.specs.clusters import DEFAULT_NULL, NULL_SIZES
from conceptlens.metrics import score_names
from conceptlens.views import clusters as VC
from conceptlens.views import selection as VS

SOURCES = {
    "page": "the images selected above",
    "label": "a label",
    "factor": "a factor value",
    "caption": "a caption filter",
    "cluster": "a cluster of a checkpoint",
    "list": "a list of image ids (CSV)",
    "saved": "a saved selection",
}
SEED = 0
# The scores the plain-text summary names, in its order.
SUMMARY = (
    "learnability",
    "coherence_random",
    "coherence_hard",
    "describability_top1",
    "purity_label",
    "intrinsic_dim",
)


def ordinal(p: float) -> str:
    """99 -> '99th', 1 -> '1st', 12 -> '12th'."""
    n = int(round(p))
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


class Selected:
    """A selection's image ids as an argument of a cached function: keyed by a digest of the
    ids in their order (`cache_key`), not id by id (a selection may hold every image of a
    dataset, and its key is derived on every rerun)."""

    def __init__(self, ids):
        self.ids = tuple(ids)

    def cache_key(self) -> str:
        return hashlib.sha1("\n".join(self.ids).encode()).hexdigest()


def region_origin(region: str, where: str) -> str:
    """In words, a box or lasso drawn on a page's projection: 'lasso on WHERE'."""
    return f"{region.split(':', 1)[0]} on {where}"


def page_origin(sel: str, region: str | None, cluster, n_clusters: int, checkpoint: str, k: int) -> str:
    """In words, where the Clusters page's own selection comes from (a saved selection's origin)."""
    if sel == "region" and region:
        return region_origin(region, f"the Clusters UMAP of checkpoint {checkpoint} (k={k})")
    if sel == "cluster":
        return f"cluster {cluster} of checkpoint {checkpoint} (k={k})"
    return f"the {n_clusters} clusters the filters keep of checkpoint {checkpoint} (k={k})"


# ---- scoring, cached ----------------------------------------------------------------------------
# Keyed by the tables the scores read (features, images, checkpoints; captions when
# described), so saving a selection, which writes none of them, does not score it again.
@cached(max_entries=64)
def _scored(db, checkpoint: str, ids: Selected, n_null: int, seed: int, describe_k: int | None) -> dict:
    """views.selection.score; `describe_k`: also describability against the clusters'
    captions at that k (None: not asked)."""
    more = {"describe": True, "k": describe_k} if describe_k is not None else {}
    return VS.score(db, checkpoint, image_ids=list(ids.ids), n_null=n_null, seed=seed, **more)


@cached(max_entries=16)
def _across(db, dataset: str, ids: Selected, n_null: int, seed: int):
    """(table, {checkpoint: why it was left out}) of views.selection.across."""
    t = VS.across(db, dataset, image_ids=list(ids.ids), n_null=n_null, seed=seed)
    return t, dict(t.attrs.get("skipped", {}))


# ---- what is shown ------------------------------------------------------------------------------
def summary_lines(out: dict) -> list[str]:
    """'learnability 0.91 [0.88, 0.94]: 99th percentile of random sets, 40th of same-label sets'."""
    by = {r["score"]: r for r in out["scores"]}
    lines = []
    for s in [s for s in SUMMARY if s in by] + [
        s for s in by if s not in SUMMARY and s.startswith(score_names.PURITY)
    ]:
        r = by[s]
        if missing(r["value"]):
            lines.append(f"{score_name(s)}: not measured")
            continue
        text = f"{score_name(s)} {r['value']:.2f}"
        if not missing(r.get("lo")) and np.isfinite(r["lo"]):
            text += f" [{r['lo']:.2f}, {r['hi']:.2f}]"
        pct = []
        if not missing(r.get("pct_random")):
            pct.append(f"{ordinal(r['pct_random'])} percentile of random sets")
        if not missing(r.get("pct_same_labels")):
            pct.append(f"{ordinal(r['pct_same_labels'])} of same-label sets")
        lines.append(text + (": " + ", ".join(pct) if pct else ""))
    return lines


def score_table(out: dict) -> pd.DataFrame:
    """Each score: value, 95% interval, percentiles among the two nulls, the nulls' medians and
    how many sets each null drew."""
    t = pd.DataFrame(out["scores"])
    show = pd.DataFrame(
        {
            "score": [score_name(s) for s in t["score"]],
            "value": t["value"],
            "95% interval": [
                None if missing(a) or not np.isfinite(a) else f"[{a:.3f}, {b:.3f}]"
                for a, b in zip(t["lo"], t["hi"])
            ],
        }
    )
    nulls = [
        (w, name)
        for w, name in (("random", "random sets"), ("same_labels", "same-label sets"))
        if f"pct_{w}" in t
    ]
    for w, name in nulls:
        show[f"pct. among {name}"] = t[f"pct_{w}"]
    for w, name in nulls:
        show[f"median of {name}"] = t.get(f"null_{w}_median")
    if nulls:
        show["sets per null"] = t.get(f"null_{nulls[0][0]}_n")
    return show


def histogram_table(pairs) -> pd.DataFrame:
    return pd.DataFrame([(str(v), int(n)) for v, n in pairs], columns=["value", "images"])


def across_table(t: pd.DataFrame) -> pd.DataFrame:
    """One row per checkpoint: each score's value, interval and percentile among random sets."""
    if t.empty or "score" not in t or "value" not in t:
        return t
    ok = t[t["score"].notna()]
    keys = [c for c in ("checkpoint_id", "method", "run", "epoch") if c in t]
    out = t[keys].drop_duplicates("checkpoint_id").set_index("checkpoint_id")
    for s in [s for s in SUMMARY if s in set(ok["score"])]:
        r = ok[ok["score"] == s].set_index("checkpoint_id")
        name = score_name(s)
        out[name] = r["value"]
        if "lo" in r:
            out[f"{name} 95%"] = pd.Series(
                [
                    None if missing(a) or not np.isfinite(a) else f"[{a:.2f}, {b:.2f}]"
                    for a, b in zip(r["lo"], r["hi"])
                ],
                index=r.index,
                dtype=object,
            )
        if "pct_random" in r:
            out[f"{name} pct. (random)"] = r["pct_random"]
    return out.reset_index()


# ---- the panel ----------------------------------------------------------------------------------
def _ids_param(raw: str) -> tuple[str, ...]:
    return tuple(SEL.decode_ids(raw))


def _encode(ids) -> str | None:
    return SEL.encode_ids(ids)


def _on_upload() -> None:
    f = st.session_state.get("selp_csv")
    st.session_state["selp_upload_error"] = None
    if f is None:
        return
    try:
        ids = SEL.read_ids(f.getvalue(), f"CSV {f.name}")
    except SEL.SelectionError as e:
        st.session_state["selp_upload_error"] = str(e)
        return
    st.session_state["selp_ids"] = tuple(dict.fromkeys(ids))
    st.session_state["selp_ids_origin"] = f"csv upload ({f.name})"


# The URL parameters of each source: those of the sources not chosen are removed.
PARAMS = {
    "page": (),
    "label": ("slabel",),
    "factor": ("sfactor", "sfvalue"),
    "caption": ("scap", "scapby"),
    "cluster": ("sfck", "sfk", "sfc"),
    "list": ("ids",),
    "saved": ("saved",),
}


def _choose(ws, dataset, checkpoint, k, src, page_ids, page_origin_text):
    """(ids, origin) of the chosen source, or (None, why) when nothing is chosen yet."""
    for other, params in PARAMS.items():
        if other != src:
            for p in params:
                U.set_param(p, None)
    if src == "page":
        ids = list(page_ids() or [])
        if not ids:
            return None, f"nothing is selected above ({page_origin_text})."
        return ids, page_origin_text
    if src == "caption":
        return _by_caption(ws, dataset)
    if src in ("label", "factor"):
        ch = ws.view(SEL.choices, dataset=dataset)
        if src == "label":
            col = "label"
            if "label" not in set(ch["column"]):
                return None, f"dataset {literal(dataset)} has no labels."
        else:
            factors = [c for c in dict.fromkeys(ch["column"]) if c != "label"]
            if not factors:
                return None, f"dataset {literal(dataset)} has no factor columns."
            col = U.url_selectbox("Factor", factors, key="selp_factor", param="sfactor")
        sub = ch[ch["column"] == col]
        names = dict(zip(sub["value"], sub["name"]))
        counts = dict(zip(sub["value"], sub["images"]))

        def fmt(v):
            extra = f" — {names[v]}" if names.get(v, v) != v else ""
            return f"{v}{extra} ({counts[v]} images)"

        value = U.url_selectbox(
            "Label" if src == "label" else "Value",
            list(sub["value"]),
            key=f"selp_{src}_value",
            param="slabel" if src == "label" else "sfvalue",
            format_func=fmt,
        )
        ids = ws.view(SEL.ids_where, dataset=dataset, column=col, value=value)
        origin = f"label={value}" if src == "label" else f"factor {col}={value}"
        return list(ids), origin
    if src == "cluster":
        c1, c2, c3 = st.columns([2, 1, 1])
        cks = list(ws.view(VC.checkpoints, dataset=dataset)["checkpoint_id"])
        if not cks:
            return None, f"no checkpoint of {literal(dataset)} has clusters."
        ck = U.url_selectbox("Clusters of checkpoint", cks, key="selp_ck", param="sfck", container=c1)
        ks = [int(x) for x in ws.view(VC.ks, checkpoint=ck)["k"]]
        kk = U.url_selectbox("k", ks, key="selp_k", param="sfk", container=c2)
        sizes = ws.view(VC.cluster_table, dataset=dataset, checkpoint=ck, k=kk, captions=False)
        cl = [int(c) for c in sizes["cluster"]]
        size_of = dict(zip(cl, sizes["size"]))
        c = U.url_selectbox(
            "Cluster",
            cl,
            key="selp_cluster",
            param="sfc",
            container=c3,
            format_func=lambda x: f"{x} ({size_of.get(x, 0)} images)",
        )
        ids = ws.view(VC.selection_images, checkpoint=ck, k=kk, clusters=(c,))["image_id"]
        return list(ids), f"cluster {c} of checkpoint {ck} (k={kk})"
    if src == "list":
        ids = U.url_value("selp_ids", "ids", _ids_param, None, "Image ids", encode=_encode)
        st.file_uploader(
            "CSV of image ids (an `image_id` column, or the first column)",
            type=["csv", "txt"],
            key="selp_csv",
            on_change=_on_upload,
        )
        if st.session_state.get("selp_upload_error"):
            st.error(literal(st.session_state["selp_upload_error"]), icon=":material/error:")
        if not ids:
            return None, "upload a CSV of image ids."
        if SEL.encode_ids(ids) is None:
            st.caption(
                f"{len(ids):,} ids: more than the {SEL.URL_MAX_IDS} a link carries; save the selection "
                "by name to link to it."
            )
        return list(ids), st.session_state.get("selp_ids_origin") or "image ids from a link"
    # saved
    saved = ws.view(SEL.saved, dataset=dataset)
    if saved.empty:
        return None, f"no selection of {literal(dataset)} is saved yet."
    info = {r.name: r for r in saved.itertuples()}
    name = U.url_selectbox(
        "Saved selection",
        list(saved["name"]),
        key="selp_saved",
        param="saved",
        format_func=lambda n: f"{n} ({info[n].n_images} images)",
        # Always in the link: the first (newest) name changes with every save.
        omit_default=False,
    )
    row = ws.view(SEL.load, dataset=dataset, name=name)
    if row is None:
        return None, f"selection {literal(name)} is not saved."
    r = info[name]
    saves = f", saved {r.saves} times" if r.saves > 1 else ""
    st.caption(
        f"Saved {r.created:%Y-%m-%d %H:%M} UTC{saves} · {r.n_images} images · from: {literal(r.origin)}"
    )
    return list(row["image_ids"]), row["origin"]


ANY_CAPTIONER = "(any)"


def _by_caption(ws, dataset):
    """(ids, origin) of the caption filter: the images whose caption contains a text."""
    sources = ws.view(VS.caption_sources, dataset=dataset)
    if sources.empty:
        return None, f"no image of {literal(dataset)} has a caption (conceptlens caption)."
    n_of = dict(zip(sources["captioner"], sources["images"]))
    c1, c2 = st.columns([2, 1])
    text = U.url_text(
        "Caption contains",
        key="selp_caption",
        param="scap",
        container=c1,
        max_chars=U.MAX_TEXT,
        placeholder="a word or phrase (ignoring case)",
    ).strip()
    by = U.url_selectbox(
        "Captions of",
        [ANY_CAPTIONER, *sources["captioner"]],
        key="selp_captioner",
        param="scapby",
        container=c2,
        format_func=lambda c: "any captioner" if c == ANY_CAPTIONER else f"{c} ({n_of[c]:,} images)",
    )
    if not text:
        return None, "type a text the captions should contain."
    captioner = None if by == ANY_CAPTIONER else by
    ids = ws.view(VS.captioned_ids, dataset=dataset, text=text, captioner=captioner)
    who = "any captioner" if captioner is None else f"captioner {captioner}"
    if not ids:
        return None, f"no caption ({literal(who)}) of {literal(dataset)} contains {literal(text)}."
    return ids, f"captions ({who}) containing {text!r}"


def _save(ws, dataset, checkpoint, ids, origin) -> None:
    name = (st.session_state.get("selp_name") or "").strip()
    try:
        SEL.save_as(
            st.session_state.get(study.OWNER),
            study.bind_address(),
            ws.root,
            name=name,
            dataset=dataset,
            image_ids=ids,
            origin=origin,
            checkpoint=checkpoint,
        )
    except (ConceptLensError, ValueError, OSError) as e:
        st.session_state["selp_save_msg"] = ("error", str(e))
        return
    st.session_state["selp_save_msg"] = ("ok", f"Saved as {name}: {len(ids)} images.")
    # Reopen it as a saved selection: its link is then `?ssrc=saved&saved=NAME`.
    st.session_state["selp_src"] = "saved"
    st.session_state["selp_saved"] = name


def selection_panel(
    ws,
    dataset: str,
    checkpoint: str,
    k: int | None,
    page_ids: Callable[[], list | None],
    page_origin_text: str,
):
    """The panel; `page_ids()` gives the page's own selection's ids (called only when chosen;
    empty or None: nothing selected, `page_origin_text` says where to select). `k`: the
    clustering whose captions describability is retrieved among (None: describability is
    not offered, e.g. a checkpoint without clusters)."""
    st.header("Score this selection")
    st.caption(
        "Is this group a concept the checkpoint learned? Its learnability (held-out kNN AUC), "
        "coherence by 2AFC with the proxy annotator, purity against labels and factors and "
        "intrinsic dimension, each with its 95% interval and its percentile among random sets "
        "of the same size and among sets drawn within the same labels (docs/analysis.md)."
    )
    # Off until asked for (then on for the session and in the link): scoring costs seconds, and
    # most visits of the page do not need it.
    if not U.url_toggle("Score a selection", key="selp_on", param="score"):
        for params in PARAMS.values():
            for p in params + ("ssrc", "nnull", "across", "describe"):
                U.set_param(p, None)
        st.caption(
            "Turn on to score the selection above, a label, a factor value, a caption filter, a "
            "cluster, a CSV of ids or a saved selection."
        )
        return
    try:  # the checkpoint's population and neighbour search, before the first selection
        VS.prepare(ws.db(), checkpoint, seed=SEED)
    except (ConceptLensError, ValueError):
        pass  # said when a selection is scored
    src = U.url_radio(
        "Selection", list(SOURCES), key="selp_src", param="ssrc", format_func=SOURCES.get, horizontal=True
    )
    ids, origin = _choose(ws, dataset, checkpoint, k, src, page_ids, page_origin_text)
    n_null = U.url_selectbox(
        "Random sets per null",
        list(NULL_SIZES),
        key="selp_nnull",
        param="nnull",
        default_index=NULL_SIZES.index(DEFAULT_NULL),
        help="More sets: steadier percentiles, slower scores (a few seconds at 200).",
    )
    # Captioning embeds sentences: with what a deployed dashboard installs (requirements.txt)
    # it cannot run, so the toggle is not offered and a link's `describe=1` is left unused.
    no_captions = text.unavailable() if k is not None else None
    if no_captions:
        st.caption(f"Caption it (describability) is not available here: it {no_captions}.")
    describe = (
        k is not None
        and not no_captions
        and U.url_toggle(
            "Caption it (describability)",
            key="selp_describe",
            param="describe",
            help="Its class-level caption (laina2020 Eq. 4) from the images' captions and the caption's "
            f"Top-1 retrieval among the captions of this checkpoint's clusters at k={k}, with its null "
            "(loads the sentence model on first use).",
        )
    )
    if ids is None:
        st.info(f"Nothing to score: {origin}", icon=":material/info:")
        return
    allowed = set(ws.view(SEL.dataset_images, dataset=dataset)["image_id"])
    try:
        ids = SEL.check_ids(ids, allowed)
    except SEL.SelectionError as e:
        st.error(literal(e), icon=":material/error:")
        return
    selected = Selected(ids)
    try:
        with st.spinner(f"Scoring {len(ids):,} images on {checkpoint} against {n_null} random sets…"):
            out = _scored(ws.db(), checkpoint, selected, n_null, SEED, int(k) if describe else None)
    except (ConceptLensError, ValueError) as e:
        # A selection the scores cannot take (nearly every image, images without features) is
        # no failure of the page: said as information.
        st.info(
            f"This selection cannot be scored on {literal(checkpoint)}: {literal(e)}", icon=":material/info:"
        )
        return
    _show_scores(out, origin, checkpoint, describe)
    _save_form(ws, dataset, checkpoint, ids, origin)
    _across_section(ws, dataset, checkpoint, src, selected, n_null, len(ids), origin)


def _show_scores(out: dict, origin: str, checkpoint: str, describe: bool) -> None:
    """The selection's scores: the summary, its class-level caption, the table of scores and
    the histograms of its labels and factors."""
    st.markdown(
        f"**{out['size']:,} images** from {literal(origin)}, scored on checkpoint **{literal(checkpoint)}** "
        f"(learnability on {out['evaluated_members']:,} of them and {out['probe']:,} other images"
        + (f" of an evaluation sample of {out['evaluation_sample']:,}" if "evaluation_sample" in out else "")
        + f"; seed {SEED})"
    )
    st.markdown("\n".join(f"- {literal(line)}" for line in summary_lines(out)))
    d = out.get("describability") or {}
    if d.get("available"):
        st.markdown(f"**Class-level caption:**\n\n> {literal(d['caption'])}")
        st.caption(
            f"laina2020 Eq. 4 score {d['eq4_score']:.3f}, chosen among {d['captioned_images']} "
            f"{literal(d['captioner'])} captions of its images; Top-1 against "
            f"{d['competing_captions']} cluster captions."
        )
    elif d and describe:
        st.caption(f"Describability unavailable: {literal(d.get('reason', ''))}")
    st.dataframe(
        score_table(out),
        key="selp_scores",
        hide_index=True,
        placeholder=DASH,
        column_config={
            "value": st.column_config.NumberColumn(format="%.3f"),
            "pct. among random sets": st.column_config.NumberColumn(format="%.0f"),
            "pct. among same-label sets": st.column_config.NumberColumn(format="%.0f"),
            "median of random sets": st.column_config.NumberColumn(format="%.3f"),
            "median of same-label sets": st.column_config.NumberColumn(format="%.3f"),
        },
    )
    hists = {"labels": out["label_histogram"], **out["factor_histograms"]}
    st.markdown("**Labels and factors of the selection**")
    tabs = st.tabs([literal(n) for n in hists])
    for tab, (n, pairs) in zip(tabs, hists.items()):
        with tab:
            st.dataframe(histogram_table(pairs), hide_index=True, key=f"selp_hist_{n}")


def _save_form(ws, dataset: str, checkpoint: str, ids, origin: str) -> None:
    """Save as (the owner only): the permission table's answer decides what is drawn;
    `SEL.save_as` asks it again when the form is sent."""
    refused = P.refusal(P.Action.SELECTION_SAVE, study.role(), study.mode(ws.root))
    msg = st.session_state.pop("selp_save_msg", None)
    if msg:
        (st.success if msg[0] == "ok" else st.error)(literal(msg[1]))
    if refused and refused[0] is P.Reason.READ_ONLY:
        st.caption("This deployment is read-only: selections are saved with `conceptlens selection save`.")
    elif refused and refused[0] is P.Reason.REMOTE:
        st.caption(
            "This workspace is read from a URL: selections are saved with `conceptlens selection save` "
            "into a copy on disk."
        )
    elif refused is None:
        with st.form("selp_save_form", border=False):
            c1, c2 = st.columns([3, 1], vertical_alignment="bottom")
            c1.text_input(
                "Save as", key="selp_name", max_chars=SEL.MAX_NAME, placeholder="a name for this selection"
            )
            c2.form_submit_button(
                "Save selection",
                icon=":material/bookmark_add:",
                on_click=_save,
                args=(ws, dataset, checkpoint, ids, origin),
            )
    else:
        st.caption(
            "Saving selections is the owner's: sign in on the Studies page to save this one."
            if refused[0] is P.Reason.ROLE
            else "Saving selections is the owner's, and this server has none: no owner secret is set."
        )


def _across_section(ws, dataset, checkpoint, src, selected, n_null, n_images: int, origin) -> None:
    """The selection's scores on every checkpoint of the dataset (on request)."""
    if U.url_toggle(f"Scores on every checkpoint of {literal(dataset)}", key="selp_across", param="across"):
        saved_name = st.session_state.get("selp_saved") if src == "saved" else None
        with st.spinner("Scoring the selection on every checkpoint of the dataset…"):
            if saved_name:  # the catalogue's selection_across draws the same table
                t = ws.view(VS.across_saved, dataset=dataset, name=saved_name, n_null=n_null)
                skipped = dict(t.attrs.get("skipped", {}))
            else:
                t, skipped = _across(ws.db(), dataset, selected, n_null, SEED)
        shown = across_table(t)
        st.dataframe(
            shown,
            key="selp_across_table",
            hide_index=True,
            placeholder=DASH,
            column_config={
                c: st.column_config.NumberColumn(format="%.0f" if "pct" in c else "%.3f")
                for c in shown.columns
                if c not in ("checkpoint_id", "method", "run", "epoch", "size") and not c.endswith("95%")
            },
        )
        for c, why in skipped.items():
            st.caption(f"Left out {literal(c)}: {literal(why)}")
        if not t.empty and saved_name:
            show_catalog_figure(
                ws,
                "selection_across",
                {"ds": dataset, "saved": saved_name, "nnull": n_null},
                view_provenance(dataset=dataset, checkpoint=checkpoint, selection=origin, images=n_images),
                key="selp_across_fig",
            )
        elif not t.empty:  # an unsaved selection: exported with its ids' origin (save it to name it)
            show_figure(
                across_figure(t),
                f"selection-across-{dataset}",
                view_provenance(dataset=dataset, checkpoint=checkpoint, selection=origin, images=n_images),
                key="selp_across_fig",
                title=f"Scores of a selection of {dataset} on every checkpoint",
            )
        st.caption(
            "Which checkpoint learned this group best, and when during training: each score on each "
            f"checkpoint of {literal(dataset)}, its 95% interval and its percentile among random sets."
        )
