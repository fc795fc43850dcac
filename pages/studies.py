"""Studies: people answer the 2AFC coherence and describability tasks of laina2020 and the
8-rank-2 similarity trials of roads2021 from a link; here the owner designs a study, follows
it, reads its results next to the proxy annotator's and exports them into the workspace.

URL: ?kind=coherence|describability|similarity&ckpt=ID&k=K&neg=random|hard&src=SOURCE&ds=DATASET
&clusters=0,1&stimuli=N&sel=random|active&tasks=N&answers=N&per=N&catch=N&refs=N&seed=N&token=0|1&id=NAME
&sid=STUDY&excl=none|0|0.25|0.5&ntasks=N (a similarity study's next round: 0 = as this round)
"""

from urllib.parse import urlsplit

import pandas as pd
import streamlit as st

from components import data, url_state
from components.export_button import show_figure
from components.metric_table import metric_table
from components.text import literal
from components.url_state import url_multiselect, url_number, url_selectbox, url_text, url_toggle
from conceptlens.errors import ConceptLensError
from conceptlens.figures.studies import human_vs_proxy
from conceptlens.studies.cli import participant_link
from conceptlens.studies.design import CAPTION_SOURCES, KINDS, NEGATIVES, SELECTIONS, StudyError, StudySpec
from conceptlens.views import studies as V
from conceptlens.workspace import read_only

EXCLUDE = {"none": None, "0": 0.0, "0.25": 0.25, "0.5": 0.5}
EXCLUDE_NAMES = {
    "none": "nobody",
    "0": "anyone who failed a catch task",
    "0.25": "catch failure rate above 25%",
    "0.5": "catch failure rate above 50%",
}
DESIGN_TABLES = ("clusters", "cluster_metrics", "cluster_captions")

ws = data.open_page("studies")
st.title("Studies")
st.caption(
    "People judge your clusters the way laina2020 measured them: in a coherence task they see 10 "
    "images of a cluster and pick, of two more images, the one that belongs (the other is from "
    "another cluster: random, or the nearest one for hard negatives); in a describability task "
    "the cluster's description replaces the images. In a similarity task (roads2021) they pick, "
    "of 8 images, the two most similar to a query. A study is fixed when it is created (its "
    "seed draws every task); participants open its link, with no login, and each answer is "
    "stored the moment it is given."
)
try:
    store = V.store_label()
except StudyError as e:
    st.error(f"**The answers store cannot be opened:** {literal(e)}", icon=":material/error:")
    url_state.stop()
st.caption(
    f"Answers store: {literal(store)} (outside the workspace; set `CONCEPTLENS_ANSWERS_URL` to a "
    "postgresql:// URL for a deployed dashboard, docs/studies.md)."
)
base = urlsplit(st.context.url or "http://localhost:8501")
base_url = f"{base.scheme}://{base.netloc}"
ws_name = st.query_params.get("ws")

# ---- a new study --------------------------------------------------------------------------
st.header("New study")
c1, c2, c3, c4 = st.columns(4)
kind = url_selectbox("Kind", KINDS, key="st_kind", param="kind", format_func=V.KIND_NAMES.get, container=c1)
fields: dict = {"kind": kind}
ready = True
if kind != "similarity":
    problems = ws.problems(DESIGN_TABLES)
    runs = ws.view(V.clusterings) if not problems else None
    if problems:
        data.show_problems(ws, problems, "The clusters of this workspace have problems")
        ready = False
    elif runs.empty:
        st.info(
            "No clustering in this workspace yet: a coherence study tests the clusters of one. Make one with:"
        )
        st.code(f"conceptlens analyze clustering --workspace {ws.label}", language="bash")
        ready = False
    else:
        ckpt = url_selectbox(
            "Checkpoint", sorted(runs["checkpoint_id"].unique()), key="st_ckpt", param="ckpt", container=c2
        )
        k = url_selectbox(
            "k", list(runs.loc[runs["checkpoint_id"] == ckpt, "k"]), key="st_k", param="k", container=c3
        )
        fields |= {"checkpoint_id": ckpt, "k": int(k)}
        if kind == "coherence":
            fields["negatives"] = url_selectbox(
                "Negatives", NEGATIVES, key="st_neg", param="neg", container=c4
            )
        else:
            fields["caption_source"] = url_selectbox(
                "Description", list(CAPTION_SOURCES), key="st_src", param="src", container=c4,
                format_func=lambda s: f"{s}: {CAPTION_SOURCES[s]}",
            )  # fmt: skip
        options = ws.view(V.cluster_options, checkpoint=ckpt, k=int(k))
        label = {
            int(r.cluster): f"{int(r.cluster)} ({int(r.size)} images"
            + ("" if "caption" not in options or pd.isna(r.caption) else f": {r.caption}")
            + ")"
            for r in options.itertuples(index=False)
        }
        picked = url_multiselect(
            "Clusters (all: every cluster large enough)",
            list(label),
            key="st_clusters",
            param="clusters",
            format_func=lambda c: label.get(c, str(c)),
        )
        if not picked:
            st.info("Choose at least one cluster.")
            ready = False
        fields["clusters"] = None if len(picked) == len(label) else tuple(picked)
else:
    sets = ws.view(V.datasets)
    fields["dataset"] = url_selectbox("Dataset", list(sets["dataset"]), key="st_ds", param="ds", container=c2)
    n = url_number(
        "Stimuli (0: every image)", key="st_stimuli", param="stimuli", default=0, min_value=0, container=c3
    )
    fields["stimuli"] = n or None
    fields["selection"] = url_selectbox(
        "Trials", SELECTIONS, key="st_sel", param="sel", container=c4,
        format_func={"random": "random", "active": "active (information gain)"}.get,
    )  # fmt: skip

n1, n2, n3, n4, n5, n6 = st.columns(6)
two_afc = kind != "similarity"
fields["tasks"] = url_number(
    "Tasks per cluster" if two_afc else "Trials",
    key="st_tasks",
    param="tasks",
    default=20 if two_afc else 200,
    min_value=20 if two_afc else 1,
    container=n1,
)
fields["answers"] = url_number(
    "People per task", key="st_answers", param="answers", default=3, min_value=1, container=n2
)
fields["per_participant"] = url_number(
    "Tasks per person", key="st_per", param="per", default=20, min_value=1, container=n3,
    help="Catch tasks included. Describability: at most one task per cluster (laina2020).",
)  # fmt: skip
fields["catch"] = url_number(
    "Catch tasks per person", key="st_catch", param="catch", default=2, min_value=0, container=n4,
    help="An obviously correct pair (coherence: the query is one of the references; describability: "
    "an image against a blank one; similarity: the query itself, mirrored, among the references).",
)  # fmt: skip
if kind == "coherence":
    fields["refs"] = url_number(
        "Reference images", key="st_refs", param="refs", default=10, min_value=1, container=n5
    )
fields["seed"] = url_number("Seed", key="st_seed", param="seed", default=0, min_value=0, container=n6)
t1, t2, _ = st.columns([1, 1, 2])
study_name = url_text("Study id (optional)", key="st_id", param="id", container=t1, max_chars=64)
token = url_toggle("Access token in the link", key="st_token", param="token", container=t2)
spec = StudySpec(**fields)

cli = ["conceptlens study create", f"--workspace {ws.label}", f"--kind {kind}"]
flags = {
    "checkpoint": fields.get("checkpoint_id"),
    "k": fields.get("k"),
    "clusters": ",".join(map(str, fields["clusters"])) if fields.get("clusters") else None,
    "negatives": fields.get("negatives"),
    "captions": fields.get("caption_source"),
    "dataset": fields.get("dataset"),
    "stimuli": fields.get("stimuli"),
    "selection": None if fields.get("selection", "random") == "random" else fields["selection"],
    "tasks": spec.tasks,
    "answers": spec.answers,
    "per-participant": spec.per_participant,
    "catch": spec.catch,
    "refs": fields.get("refs"),
    "seed": spec.seed,
    "id": study_name or None,
}
cli += [f"--{f} {v}" for f, v in flags.items() if v is not None]
cli += ["--token"] if token else []
cli += [f"--url {base_url}"] + ([f"--ws {ws_name}"] if ws_name else [])


def create(root, spec: StudySpec, name: str | None, token: bool) -> None:
    # A callback: it runs before the rerun the click starts, so nothing can lose the click.
    try:
        st.session_state["st_made"] = V.create(root, spec, name, token)
        st.session_state["st_sid"] = st.session_state["st_made"]["study_id"]  # show the new study
        st.session_state.pop("st_create_error", None)
    except StudyError as e:
        st.session_state["st_create_error"] = str(e)


st.button(
    "Create study",
    key="st_create",
    type="primary",
    disabled=not ready,
    icon=":material/add:",
    on_click=create,
    args=(ws.root, spec, study_name or None, token),
)
if st.session_state.get("st_create_error"):
    st.error(
        f"**The study cannot be created:** {literal(st.session_state['st_create_error'])}",
        icon=":material/error:",
    )
made = st.session_state.get("st_made")
if made:
    st.success(
        f"Study **{literal(made['study_id'])}** created: {made['tasks']:,} tasks (+{made['catch']:,} "
        f"catch tasks) in {made['sessions']:,} sessions, {made['planned']:,} answers planned. "
        "Send people this link:",
        icon=":material/check_circle:",
    )
    st.code(participant_link(base_url, made["study_id"], made["token"], ws_name), language=None)
    for note in made["notes"]:
        st.caption(f"Note: {literal(note)}")
st.caption("The same study from the command line:")
st.code(" \\\n  ".join(cli), language="bash")

# ---- the studies in the store -------------------------------------------------------------
st.header("Studies in the answers store")
try:
    table = V.studies()
except StudyError as e:
    st.error(f"**The answers store cannot be read:** {literal(e)}", icon=":material/error:")
    url_state.stop()
if table.empty:
    st.info("No study yet: create one above.", icon=":material/pending:")
    url_state.stop()
metric_table(table, key="st_table")
if "st_next_sid" in st.session_state:  # a round just started: show it
    st.session_state["st_sid"] = st.session_state.pop("st_next_sid")
sid = url_selectbox("Study", list(table["study_id"]), key="st_sid", param="sid")
study = V.study(sid)
row = table.set_index("study_id").loc[sid]
status = V.status(sid)
m = st.columns(4)
for col, (name, value) in zip(
    m,
    [
        ("status", status),
        ("participants", f"{int(row['participants']):,} of {int(row['sessions']):,}"),
        ("finished", f"{int(row['finished']):,}"),
        ("answers", f"{int(row['answers']):,} of {int(row['planned']):,}"),
    ],
):
    col.metric(name, value)
st.progress(min(1.0, int(row["answers"]) / max(1, int(row["planned"]))))
st.caption(
    f"{literal(V.KIND_NAMES[study.spec.kind])}"
    + (f", {study.spec.negatives} negatives" if study.spec.kind == "coherence" else "")
    + f". Designed on workspace {literal(study.workspace)} on {literal(study.created[:19])}; "
    f"seed {study.spec.seed}, {study.spec.answers} people per task, {study.spec.per_participant} tasks "
    f"per person ({study.spec.catch} catch). Participant link"
    + (" (with its access token: only the creator saw it)" if study.token_sha256 else "")
    + ":"
)
st.code(participant_link(base_url, sid, "TOKEN" if study.token_sha256 else None, ws_name), language=None)
if status == "open":
    st.button(
        "Close the study", key="st_close", on_click=V.set_status, args=(sid, "closed"), icon=":material/lock:"
    )
else:
    st.button(
        "Reopen the study",
        key="st_open",
        on_click=V.set_status,
        args=(sid, "open"),
        icon=":material/lock_open:",
    )

st.subheader("Results")
excl = url_selectbox("Leave out", list(EXCLUDE), key="st_excl", param="excl", format_func=EXCLUDE_NAMES.get)
here = study.workspace == ws.meta().get("name")
res = V.study_results(ws.root if here else None, sid, EXCLUDE[excl])
s = res.summary
r1, r2, r3, r4 = st.columns(4)
r1.metric("answers counted", f"{s['answers']:,}", help="Catch tasks and excluded people left out.")
r2.metric("people left out", f"{s['excluded']:,}")
if s["accuracy"] is not None:
    r3.metric(
        study.spec.measure.replace("_", " "),
        f"{s['accuracy']:.3f}",
        help=f"95% CI [{s['lo']:.3f}, {s['hi']:.3f}]",
    )
r4.metric(
    "Krippendorff's alpha",
    "undefined" if s["alpha"] is None else f"{s['alpha']:.3f}",
    help=f"Nominal, over the {s['alpha_units']} tasks answered by two or more people.",
)
if not here:
    st.info(
        f"This study was designed on workspace {literal(study.workspace)}: the proxy annotator's values "
        "and the export need that workspace.",
        icon=":material/info:",
    )
if study.spec.two_afc:
    if res.clusters.empty:
        st.info("No answer to count yet.", icon=":material/pending:")
    else:
        show_figure(
            human_vs_proxy(res.clusters, study.spec.measure),
            f"study-{sid}-{excl}",
            {
                "workspace": ws.label,
                "fingerprint": ws.fp,
                "study": sid,
                "exclude": excl,
                "figure": "human_vs_proxy",
            },
            key="st_fig",
        )
        st.caption(
            "People: share of answers that picked the cluster's image, with its Clopper-Pearson 95% "
            "interval. Proxy annotator: `conceptlens analyze cluster_metrics` (coherence) or the VL "
            "model's 2AFC (describability) on the same clustering."
        )
        metric_table(
            res.clusters.drop(columns=["study_id", "checkpoint_id", "k"]),
            key="st_clusters_table",
            formats={c: "%.3f" for c in ("accuracy", "lo", "hi", "proxy", "proxy_lo", "proxy_hi", "purity")},
        )
st.markdown("**Participants** (catch tasks: failed = grade 0)")
metric_table(
    res.participants.drop(columns=["study_id"]),
    key="st_people",
    formats={"catch_failure_rate": "%.2f", "mean_grade": "%.2f"},
)


def export(root, study_id: str, exclude: float | None) -> None:
    try:
        st.session_state["st_exported"] = (study_id, V.export_study(root, study_id, exclude), None)
    except (StudyError, OSError) as e:
        st.session_state["st_exported"] = (study_id, None, str(e))


e1, e2 = st.columns(2)
e1.button(
    "Export to the workspace",
    key="st_export",
    icon=":material/save:",
    disabled=not here or read_only(),
    help="This deployment is read-only (CONCEPTLENS_READ_ONLY=1): export from the command line, "
    "`conceptlens study export`."
    if read_only()
    else None,
    on_click=export,
    args=(ws.root, sid, EXCLUDE[excl]),
)
done = st.session_state.get("st_exported")
if done and done[0] == sid:
    _, out, problem = done
    if problem:
        st.error(
            f"**Export failed:** {literal(problem)} — a read-only deployment exports from the command line:",
            icon=":material/error:",
        )
        st.code(f"conceptlens study export {sid} --workspace PATH", language="bash")
    else:
        st.success(
            f"{out['answers']:,} new answer(s) appended to study_answers"
            + (
                f", {out['similarity_trials']:,} trial(s) to similarity_trials"
                if study.spec.kind == "similarity"
                else ""
            )
            + "; study_participants and study_summary"
            + (" and study_clusters" if out["clusters"] else "")
            + " written.",
            icon=":material/check_circle:",
        )
e2.download_button(
    "Download the answers (CSV)",
    data=lambda: V.answers_csv(ws.root if here else None, sid, EXCLUDE[excl]),
    file_name=f"study-{sid}-answers.csv",
    mime="text/csv",
    on_click="ignore",
    icon=":material/download:",
)

# ---- the next round (similarity) ------------------------------------------------------------
if study.spec.kind == "similarity":
    now = study.spec
    st.subheader("Next round")
    st.caption(
        f"This is round {now.round} ({now.selection} trials"
        + (f", after study {literal(now.after)}" if now.after else "")
        + "). roads2021 (section 4.3) collects judgments in rounds: the next round exports this "
        "study's answers (leaving out the people chosen above), infers the psychological embedding "
        "again (`conceptlens analyze similarity`) and creates a study whose trials are chosen by "
        "expected information gain under it, a quarter of them confirmation trials."
    )
    ntasks = url_number(
        "Trials of the next round (0: as this round)", key="st_ntasks", param="ntasks", default=0, min_value=0
    )
    # The click only raises a flag (a callback: nothing can lose it); the work runs below,
    # where st.status can show its stages.
    st.button(
        "Start the next round",
        key="st_next",
        icon=":material/replay:",
        disabled=not here or read_only(),
        help="It writes into the workspace: from the command line on a read-only deployment."
        if read_only()
        else None,
        on_click=st.session_state.__setitem__,
        args=("st_next_go", sid),
    )
    if st.session_state.pop("st_next_go", None) == sid:
        with st.status(f"Starting round {now.round + 1}", expanded=True) as box:
            try:
                made = V.next_round(
                    ws.root, sid, ntasks, EXCLUDE[excl], bool(study.token_sha256), step=box.write
                )
            except (ConceptLensError, OSError, ValueError) as e:
                box.update(label="The next round could not be started", state="error")
                st.session_state["st_next_error"] = (sid, str(e))
            else:
                box.update(label=f"Round {now.round + 1} created", state="complete")
                st.session_state.pop("st_next_error", None)
                st.session_state["st_next_made"] = made
                st.session_state["st_next_sid"] = made["study_id"]
                st.rerun()
    failed = st.session_state.get("st_next_error")
    if failed and failed[0] == sid:
        st.error(f"**The next round could not be started:** {literal(failed[1])}", icon=":material/error:")
    made = st.session_state.get("st_next_made")
    if made and made["study_id"] == sid:
        st.success(
            f"Round {now.round} started after study {literal(made['after'])} "
            f"({made['exported']:,} trial(s) exported, the embedding inferred again). Send people this link:",
            icon=":material/check_circle:",
        )
        st.code(participant_link(base_url, sid, made["token"], ws_name), language=None)
        for note in made["notes"]:
            st.caption(f"Note: {literal(note)}")
    cmd = [f"conceptlens study next-round {sid}", f"--workspace {ws.label}"]
    cmd += [f"--tasks {ntasks}"] if ntasks else []
    cmd += [f"--max-catch-failure {EXCLUDE[excl]}"] if EXCLUDE[excl] is not None else []
    cmd += ["--token"] if study.token_sha256 else []
    cmd += [f"--url {base_url}"] + ([f"--ws {ws_name}"] if ws_name else [])
    st.caption("The same from the command line:")
    st.code(" \\\n  ".join(cmd), language="bash")
