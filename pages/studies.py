"""Studies: people answer the 2AFC coherence and describability tasks of laina2020 and the
8-rank-2 similarity trials of roads2021 from a link; here the owner designs a study, follows
it, reads its results next to the proxy annotator's and exports them into the workspace.

URL: ?kind=coherence|describability|similarity&ckpt=ID&k=K&neg=random|hard&src=SOURCE&ds=DATASET
&clusters=0,1&stimuli=N&sel=random|active&tasks=N&answers=N&per=N&catch=N&refs=N&seed=N&token=0|1&id=NAME
&sid=STUDY&excl=none|0|0.25|0.5&ntasks=N (a similarity study's next round: 0 = as this round)
&done_url=URL&done_code=CODE&out_code=CODE&once=0|1&pass=PERCENT&minmin=N&maxmin=N&bias=PERCENT
(crowd-sourcing and exclusion rules); &width=PERCENT&conf=PERCENT&obs=proxy|psychometric (planning)

The page is the owner's: without the owner (components/study.py: the owner secret, or a local
server) it shows the sign-in and nothing of the store. Every read and write of the store goes
through `conceptlens.studies.service.Owner`, which checks the owner again on each call.
"""

from urllib.parse import urlsplit

import pandas as pd
import streamlit as st

from components import data, url_state
from components.export_button import show_figure
from components.metric_table import metric_table
from components.study import count, owner, refused, shown_clusters, sign_in
from components.text import literal
from components.url_state import url_multiselect, url_number, url_selectbox, url_text, url_toggle
from conceptlens.errors import ConceptLensError
from conceptlens.figures.studies import human_vs_proxy
from conceptlens.permissions import Action
from conceptlens.studies import plan as P
from conceptlens.studies.cli import participant_link
from conceptlens.studies.design import CAPTION_SOURCES, KINDS, NEGATIVES, SELECTIONS, StudyError, StudySpec
from conceptlens.studies.results import RULES
from conceptlens.views import studies as V

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
if not sign_in():
    url_state.stop()
own = owner()
# What the permission table refuses this session here (a read-only deployment, say): the button
# is drawn disabled with the reason; the service asks the same table again on every call.
no_create, no_close, no_reopen = (
    refused(a) for a in (Action.STUDY_CREATE, Action.STUDY_CLOSE, Action.STUDY_REOPEN)
)
no_export, no_next = (refused(a, ws.root) for a in (Action.STUDY_EXPORT, Action.STUDY_NEXT_ROUND))
try:
    store = own.store_label()
except ConceptLensError as e:
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
c1, c2, c3, c4 = st.columns([2, 1, 1, 1])
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
study_name = url_text(
    "Study id (optional)", key="st_id", param="id", container=t1, max_chars=64,
    help="Empty: drawn, with 64 bits of randomness. A chosen id can be guessed: add an access token.",
)  # fmt: skip
token = url_toggle("Access token in the link", key="st_token", param="token", container=t2)

with st.expander("Crowd-sourcing and exclusion rules (Prolific, MTurk)"):
    st.caption(
        "The link takes the platform's ids (Prolific: PROLIFIC_PID, STUDY_ID, SESSION_ID; MTurk: "
        "workerId, hitId, assignmentId) and stores them with the answers; one platform id takes "
        "the study once. A finisher gets the completion code (and the link back to the platform); "
        "one excluded by the rules gets the code for excluded people. A person is excluded only "
        "after two failed checks (Prolific's rule): each failed catch task counts once the catch "
        "rule fails; a failed time or side rule counts one."
    )
    p1, p2, p3 = st.columns([2, 1, 1])
    fields["completion_url"] = (
        url_text(
            "Completion URL (https://...)", key="st_done_url", param="done_url", container=p1, max_chars=500
        )
        or None
    )
    fields["completion_code"] = (
        url_text("Completion code (empty: one per person)", key="st_done_code", param="done_code",
                 container=p2, max_chars=64) or None
    )  # fmt: skip
    fields["excluded_code"] = (
        url_text("Code for excluded people", key="st_out_code", param="out_code", container=p3, max_chars=64)
        or None
    )
    fields["once_per_workspace"] = url_toggle(
        "A platform id takes one study of this workspace", key="st_once", param="once"
    )
    x1, x2, x3, x4 = st.columns(4)
    catch_pass = url_number(
        "Catch tasks passed, at least (%; 0: no rule)", key="st_pass", param="pass", default=0,
        min_value=0, max_value=100, container=x1,
    )  # fmt: skip
    min_min = url_number("Minutes, at least (0: no rule)", key="st_minmin", param="minmin", default=0,
                         min_value=0, container=x2)  # fmt: skip
    max_min = url_number("Minutes, at most (0: no rule)", key="st_maxmin", param="maxmin", default=0,
                         min_value=0, container=x3)  # fmt: skip
    bias = url_number(
        "One side's share of answers, at most (%; 0: no rule)", key="st_bias", param="bias", default=0,
        min_value=0, max_value=100, container=x4, disabled=not two_afc,
    )  # fmt: skip
    fields["min_catch_pass"] = catch_pass / 100 if catch_pass else None
    fields["min_minutes"] = min_min or None
    fields["max_minutes"] = max_min or None
    fields["max_side_bias"] = bias / 100 if bias and two_afc else None

if two_afc and ready:
    with st.expander("Plan: how many people each task needs", expanded=False):
        st.caption(
            "Simulated observers answer each cluster's tasks: as the machine annotator did (its "
            "coherence with the chosen negatives), or by a psychometric function of the cluster's "
            "purity (0.5 + 0.48 · logistic((purity − 0.5) / 0.1)). The plan is the fewest people per "
            "task whose Clopper-Pearson interval, at the simulated accuracy, is at most the chosen width "
            "for every cluster tested (docs/studies.md)."
        )
        w1, w2, w3 = st.columns([1, 1, 2])
        width = url_number(
            "Interval width (%)", key="st_width", param="width", default=20, min_value=1, max_value=99,
            container=w1,
        )  # fmt: skip
        conf = url_number(
            "Confidence (%)",
            key="st_conf",
            param="conf",
            default=95,
            min_value=50,
            max_value=99,
            container=w2,
        )
        sources = ["proxy", "psychometric"] if kind == "coherence" else ["psychometric"]
        source = url_selectbox(
            "Observers", sources, key="st_obs", param="obs", container=w3,
            format_func={"proxy": "the machine annotator", "psychometric": "purity, psychometric"}.get,
        )  # fmt: skip
        tested = (
            options if not fields.get("clusters") else options[options["cluster"].isin(fields["clusters"])]
        )
        planned = P.plan(
            P.observers(tested, source, f"coherence_{fields.get('negatives', 'random')}"),
            tasks=fields["tasks"], width=width / 100, confidence=conf / 100,
            per_participant=fields["per_participant"], catch=fields["catch"],
        )  # fmt: skip
        a = planned.attrs["people_per_task"]
        if a is None:
            st.info("No simulated accuracy for these clusters: run `conceptlens analyze cluster_metrics`.")
        else:
            st.markdown(
                f"**{count(a, 'person', 'people')} per task** "
                f"({count(planned.attrs['participants'], 'participant')} of {fields['per_participant']} "
                "tasks) give every tested cluster an interval at most "
                f"{width}% wide at {conf}% confidence; this design has {fields['answers']} per task."
            )
            metric_table(planned, key="st_plan_table", formats={"p": "%.3f"})

try:
    spec = StudySpec(**fields).check()
    spec_error = None
except StudyError as e:
    spec, spec_error = None, str(e)

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
    "tasks": fields["tasks"],
    "answers": fields["answers"],
    "per-participant": fields["per_participant"],
    "catch": fields["catch"],
    "refs": fields.get("refs"),
    "seed": fields["seed"],
    "id": study_name or None,
}
cli += [f"--{f} {v}" for f, v in flags.items() if v is not None]
cli += ["--token"] if token else []
cli += [f"--url {base_url}"] + ([f"--ws {ws_name}"] if ws_name else [])


def create(root, spec: StudySpec, name: str | None, token: bool) -> None:
    # A callback: it runs before the rerun the click starts, so nothing can lose the click.
    try:
        if spec is None:
            raise StudyError(spec_error)
        st.session_state["st_made"] = owner().create(root, spec, name, token)
        st.session_state["st_sid"] = st.session_state["st_made"]["study_id"]  # show the new study
        st.session_state.pop("st_create_error", None)
    except ConceptLensError as e:  # the design's problems, or the table's refusal
        st.session_state["st_create_error"] = str(e)


st.button(
    "Create study",
    key="st_create",
    type="primary",
    disabled=not ready or bool(no_create),
    help=no_create,
    icon=":material/add:",
    on_click=create,
    args=(ws.root, spec, study_name or None, token),
)
if spec_error and ready:
    st.error(f"**The study cannot be created:** {literal(spec_error)}", icon=":material/error:")
elif st.session_state.get("st_create_error"):
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
    table = own.studies()
except ConceptLensError as e:
    st.error(f"**The answers store cannot be read:** {literal(e)}", icon=":material/error:")
    url_state.stop()
exported = ws.view(V.exported_studies) if not ws.problems(("study_summary",)) else None
if exported is not None and not exported.empty:
    st.caption(
        f"This workspace holds {len(exported):,} exported stud{'y' if len(exported) == 1 else 'ies'} "
        "(study_summary, written by `conceptlens study export`):"
    )
    metric_table(
        exported, key="st_exported_table", formats={c: "%.3f" for c in ("accuracy", "lo", "hi", "alpha")}
    )
if table.empty:
    st.info(
        "The answers store holds no study yet: create one above."
        + (
            " The exported studies above are the workspace's copies of their results."
            if exported is not None and not exported.empty
            else ""
        ),
        icon=":material/pending:",
    )
    url_state.stop()
metric_table(table, key="st_table")
if "st_next_sid" in st.session_state:  # a round just started: show it
    st.session_state["st_sid"] = st.session_state.pop("st_next_sid")
sid = url_selectbox("Study", list(table["study_id"]), key="st_sid", param="sid")
study = own.study(sid)
row = table.set_index("study_id").loc[sid]
status = own.status(sid)
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
    f"seed {study.spec.seed}, {count(study.spec.answers, 'person', 'people')} per task, "
    f"{count(study.spec.per_participant, 'task')} per person ({study.spec.catch} catch). Participant link"
    + (" (with its access token: only the creator saw it)" if study.token_sha256 else "")
    + ":"
)
st.code(participant_link(base_url, sid, "TOKEN" if study.token_sha256 else None, ws_name), language=None)


def set_status(study_id: str, value: str) -> None:
    try:
        owner().set_status(study_id, value)
        st.session_state.pop("st_status_error", None)
    except ConceptLensError as e:  # the service refused (read-only, not the owner)
        st.session_state["st_status_error"] = str(e)


if st.session_state.get("st_status_error"):
    st.error(f"**The study's status was not changed:** {literal(st.session_state['st_status_error'])}")
if status == "open":
    st.button(
        "Close the study", key="st_close", on_click=set_status, args=(sid, "closed"),
        icon=":material/lock:", disabled=bool(no_close), help=no_close,
    )  # fmt: skip
else:
    st.button(
        "Reopen the study", key="st_open", on_click=set_status, args=(sid, "open"),
        icon=":material/lock_open:", disabled=bool(no_reopen), help=no_reopen,
    )  # fmt: skip

st.subheader("Results")
excl = url_selectbox("Leave out", list(EXCLUDE), key="st_excl", param="excl", format_func=EXCLUDE_NAMES.get)
here = study.workspace == ws.meta().get("name")
res = own.results(ws.root if here else None, sid, EXCLUDE[excl])
s = res.summary
r1, r2, r3, r4 = st.columns(4)
r1.metric("answers counted", f"{s['answers']:,}", help="Catch tasks and excluded people left out.")
r2.metric(
    "people left out",
    f"{s['excluded']:,}",
    help="By the study's rules: "
    + (", ".join(f"{n:,} {RULES[r]}" for r, n in s["excluded_by"].items()) or "none set"),
)
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
            shown_clusters(res.clusters),
            key="st_clusters_table",
            formats={c: "%.3f" for c in ("accuracy", "lo", "hi", "proxy", "proxy_lo", "proxy_hi", "purity")},
        )
if study.spec.rules:
    st.markdown(
        "**Excluded by the study's rules** (after "
        f"{study.spec.min_failed_checks} failed checks; a person may fail several rules): "
        + "; ".join(f"{RULES[r]}: {n:,}" for r, n in s["excluded_by"].items())
    )
st.markdown("**Participants** (catch tasks: failed = grade 0)")
metric_table(
    res.participants.drop(columns=["study_id"]).merge(
        res.checks, on="participant_id", how="left", suffixes=("", "_rules")
    ),
    key="st_people",
    formats={
        "catch_failure_rate": "%.2f",
        "mean_grade": "%.2f",
        "catch_pass": "%.2f",
        "minutes": "%.1f",
        "left_share": "%.2f",
    },
)


def export(root, study_id: str, exclude: float | None) -> None:
    try:
        st.session_state["st_exported"] = (study_id, owner().export(root, study_id, exclude), None)
    except (ConceptLensError, OSError) as e:
        st.session_state["st_exported"] = (study_id, None, str(e))


e1, e2 = st.columns(2)
e1.button(
    "Export to the workspace",
    key="st_export",
    icon=":material/save:",
    disabled=not here or bool(no_export),
    help=no_export,
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
    data=lambda: own.answers_csv(ws.root if here else None, sid, EXCLUDE[excl]),
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
        disabled=not here or bool(no_next),
        help=no_next,
        on_click=st.session_state.__setitem__,
        args=("st_next_go", sid),
    )
    if st.session_state.pop("st_next_go", None) == sid:
        with st.status(f"Starting round {now.round + 1}", expanded=True) as box:
            try:
                made = own.next_round(
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
