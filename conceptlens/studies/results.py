"""A study's results, and their export into workspace tables.

laina2020 section 5.1: coherence (Eq. 1) or describability (Eq. 3) of a cluster is the share of
answers that picked the cluster's image, with a Clopper-Pearson 95% interval; inter-rater
reliability is Krippendorff's alpha (nominal; PyPI `krippendorff`) over the tasks answered by
two or more people. Catch tasks screen inattentive people: a participant whose catch failure
rate is above `max_catch_failure` is left out of every result (None: nobody is). Similarity
answers become `similarity_trials` rows (roads2021), weighted by the participant's mean catch
grade, for `conceptlens analyze similarity`, with the study's round.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from .. import schema
from ..metrics.scores import clopper_pearson
from ..workspace import Workspace
from .design import N_SELECT, StudyError
from .store import Store, Study


@dataclass
class Results:
    answers: pd.DataFrame  # study_answers rows
    participants: pd.DataFrame  # study_participants rows
    clusters: pd.DataFrame  # study_clusters rows (2AFC)
    summary: dict  # the study_summary row, and `excluded_by`: {rule: people excluded failing it}
    checks: pd.DataFrame | None = None  # per participant: the study's exclusion checks (`checks`)


# The study's exclusion rules (StudySpec fields) and what failing each means.
RULES = {
    "min_catch_pass": "passed too few catch tasks",
    "min_minutes": "finished too fast",
    "max_minutes": "took too long",
    "max_side_bias": "answered one side too often",
}


def checks(spec, participants: pd.DataFrame, rows: pd.DataFrame) -> pd.DataFrame:
    """Each participant's exclusion checks under the study's rules (`spec.rules`).

    Per participant: catch_pass (share of catch tasks not failed, grade > 0), minutes (from
    joining to finishing, or to the last answer when unfinished), left_share (2AFC: share of
    answers that picked the left image, catch tasks included), a `fail_RULE` column per rule set,
    failed_checks and excluded. Each failed catch task is one failed attention check once the
    catch rule fails (pass ratio below min_catch_pass); a failed time or side rule is one
    check. A participant is excluded after `spec.min_failed_checks` (at least 2, as Prolific
    requires) failed checks, never for one."""
    p = participants.set_index("participant_id")
    out = pd.DataFrame(index=p.index)
    catch = rows[rows["is_catch"]]
    n_catch = catch.groupby("participant_id").size().reindex(out.index).fillna(0)
    failed = (catch["grade"] == 0).groupby(catch["participant_id"]).sum().reindex(out.index).fillna(0)
    out["catch_pass"] = ((n_catch - failed) / n_catch).where(n_catch > 0)
    start = pd.to_datetime(p["started"], utc=True, format="ISO8601")
    end = pd.to_datetime(p["finished"].fillna(p["last_active"]), utc=True, format="ISO8601")
    out["minutes"] = (end - start).dt.total_seconds() / 60
    if spec.two_afc:
        side = rows.dropna(subset=["chosen_side"])
        left = (side["chosen_side"] == "left").groupby(side["participant_id"]).mean()
        out["left_share"] = left.reindex(out.index)
    else:
        out["left_share"] = np.nan
    done = p["finished"].notna()
    n_failed = pd.Series(0, index=out.index, dtype=np.int64)
    rules = spec.rules
    if "min_catch_pass" in rules:
        f = (out["catch_pass"] < rules["min_catch_pass"]).fillna(False)
        out["fail_min_catch_pass"] = f
        n_failed += np.where(f, failed.astype(np.int64), 0)
    if "min_minutes" in rules:
        out["fail_min_minutes"] = done & (out["minutes"] < rules["min_minutes"])
    if "max_minutes" in rules:
        out["fail_max_minutes"] = (out["minutes"] > rules["max_minutes"]).fillna(False)
    if "max_side_bias" in rules:
        b = out["left_share"]
        out["fail_max_side_bias"] = (np.maximum(b, 1 - b) > rules["max_side_bias"]).fillna(False)
    for r in ("min_minutes", "max_minutes", "max_side_bias"):
        if r in rules:
            n_failed += out[f"fail_{r}"].astype(np.int64)
    out["failed_checks"] = n_failed
    out["excluded"] = n_failed >= spec.min_failed_checks
    return out.reset_index()


def excluded_by(spec, table: pd.DataFrame) -> dict:
    """{rule: participants excluded who failed it} (one person may count under several rules)."""
    ex = table[table["excluded"]]
    return {r: int(ex[f"fail_{r}"].sum()) for r in spec.rules}


def answer_rows(study: Study, answers: pd.DataFrame) -> pd.DataFrame:
    """Store answers (`Store.answers`) as `study_answers` rows: what each person was shown."""
    spec = study.spec
    rows = []
    for a in answers.itertuples(index=False):
        p, layout = a.payload, a.layout
        row = {
            "study_id": study.study_id,
            "participant_id": a.participant_id,
            "task_id": a.task_id,
            "position": int(a.position),
            "kind": spec.kind,
            "checkpoint_id": spec.checkpoint_id if spec.two_afc else None,
            "k": int(spec.k) if spec.two_afc else None,
            "cluster": None if a.unit is None or pd.isna(a.unit) else int(a.unit),
            "is_catch": bool(a.is_catch),
            "description": p.get("description"),
            "query": p.get("query"),
            "positive": p.get("positive"),
            "negative": p.get("negative"),
            "positive_side": layout.get("positive_side"),
            "chosen_side": a.response if spec.two_afc else None,
            "chosen": list(a.chosen),
            "correct": a.correct,
            "grade": None if a.grade is None or pd.isna(a.grade) else float(a.grade),
            "rt_ms": None if a.rt_ms is None or pd.isna(a.rt_ms) else float(a.rt_ms),
            "answered": a.answered,
        }
        refs = p.get("references", [])
        row["references"] = [refs[i] for i in layout["order"]] if "order" in layout else list(refs)
        rows.append(row)
    cols = [f.name for f in schema.arrow_schema("study_answers")]
    df = pd.DataFrame(rows, columns=cols)
    df["is_catch"] = df["is_catch"].astype(bool)  # an empty frame's would be object: ~ would not negate
    return df


def participant_table(
    study: Study, participants: pd.DataFrame, rows: pd.DataFrame, max_catch_failure, by_rules=()
) -> pd.DataFrame:
    """`study_participants` rows: answers, catch failures (grade 0), exclusion (by the
    `max_catch_failure` threshold, or a participant id in `by_rules`: the study's checks)."""
    if max_catch_failure is not None and not 0 <= max_catch_failure <= 1:
        raise StudyError(f"max_catch_failure must be in [0, 1], got {max_catch_failure!r}")
    catch = rows[rows["is_catch"]]
    per = pd.DataFrame(
        {
            "answers": rows.groupby("participant_id").size(),
            "catch_answers": catch.groupby("participant_id").size(),
            "catch_failed": catch.assign(f=catch["grade"] == 0).groupby("participant_id")["f"].sum(),
            "mean_grade": catch.groupby("participant_id")["grade"].mean(),
        }
    )
    out = participants[["participant_id", "session", "started", "finished", "completion_code"]].join(
        per, on="participant_id"
    )
    for c in ("answers", "catch_answers", "catch_failed"):
        out[c] = out[c].fillna(0).astype(np.int64)
    out["catch_failure_rate"] = (out["catch_failed"] / out["catch_answers"]).where(out["catch_answers"] > 0)
    out["excluded"] = (
        (out["catch_failure_rate"] > max_catch_failure).fillna(False).astype(bool)
        if max_catch_failure is not None
        else False
    )
    out["excluded"] = out["excluded"] | out["participant_id"].isin(set(by_rules))
    out.insert(0, "study_id", study.study_id)
    return out[[f.name for f in schema.arrow_schema("study_participants")]].reset_index(drop=True)


def alpha_nominal(units, values) -> tuple[float | None, int]:
    """Krippendorff's alpha (nominal) of long-format answers (one per unit and coder) and the
    number of units with two or more answers; None when it is undefined (no such unit, or a
    single value throughout: no disagreement to expect)."""
    import krippendorff

    df = pd.DataFrame({"unit": list(units), "value": list(values)})
    counts = pd.crosstab(df["unit"], df["value"])
    pairable = int((counts.sum(axis=1) >= 2).sum())
    if pairable == 0 or counts.shape[1] < 2:
        return None, pairable
    return float(krippendorff.alpha(value_counts=counts.to_numpy(), level_of_measurement="nominal")), pairable


_PROXY = ("proxy", "proxy_lo", "proxy_hi", "purity")


def proxy(ws: Workspace | None, study: Study) -> pd.DataFrame:
    """The proxy annotator's value per cluster (cluster, proxy, proxy_lo, proxy_hi, purity)."""
    spec = study.spec
    out = pd.DataFrame({"cluster": pd.Series(dtype="int64")} | {c: pd.Series(dtype=float) for c in _PROXY})
    if ws is None or not spec.two_afc:
        return out
    part = {"checkpoint_id": spec.checkpoint_id, "k": int(spec.k)}
    if ws.has("cluster_metrics", **part):
        m = ws.read("cluster_metrics", **part).to_pandas()
        out = pd.DataFrame({"cluster": m["cluster"], "purity": m["purity"]})
        if spec.kind == "coherence":
            col = spec.measure
            out["proxy"], out["proxy_lo"], out["proxy_hi"] = m[col], m[f"{col}_lo"], m[f"{col}_hi"]
    if spec.kind == "describability" and ws.has("cluster_captions", **part):
        cap = ws.read("cluster_captions", **part).to_pandas()
        if "describability_2afc" in cap.columns:
            d = cap[["cluster", "describability_2afc"]].rename(columns={"describability_2afc": "proxy"})
            out = d.merge(out.drop(columns=["proxy"], errors="ignore"), on="cluster", how="left")
    for c in _PROXY:
        if c not in out.columns:
            out[c] = np.nan
    return out[["cluster", *_PROXY]]


def cluster_table(study: Study, counted: pd.DataFrame, proxies: pd.DataFrame) -> pd.DataFrame:
    """`study_clusters` rows from the counted (non-catch, included) answers of a 2AFC study."""
    cols = [f.name for f in schema.arrow_schema("study_clusters")]
    if not study.spec.two_afc or counted.empty:
        return pd.DataFrame(columns=cols)
    rows = []
    for c, g in counted.groupby("cluster"):
        n, right = len(g), int(g["correct"].astype(bool).sum())
        lo, hi = clopper_pearson(right, n)
        rows.append(
            {
                "cluster": int(c),
                "n": n,
                "n_correct": right,
                "accuracy": right / n,
                "lo": lo,
                "hi": hi,
                "description": g["description"].iloc[0],
            }
        )
    out = pd.DataFrame(rows).merge(proxies, on="cluster", how="left")
    out["study_id"], out["checkpoint_id"], out["k"] = (
        study.study_id,
        study.spec.checkpoint_id,
        int(study.spec.k),
    )
    out["measure"] = study.spec.measure
    return out[cols]


def results(store: Store, study_id: str, ws: Workspace | None = None, max_catch_failure=None) -> Results:
    """Everything the Studies page shows and `export` writes, from the store as it is now."""
    study = store.study(study_id)
    rows = answer_rows(study, store.answers(study_id))
    people = store.participants(study_id)
    checked = checks(study.spec, people, rows)
    ruled_out = checked.loc[checked["excluded"], "participant_id"]
    parts = participant_table(study, people, rows, max_catch_failure, ruled_out)
    kept = set(parts.loc[~parts["excluded"], "participant_id"])
    counted = rows[~rows["is_catch"] & rows["participant_id"].isin(kept)]
    clusters = cluster_table(study, counted, proxy(ws, study))
    if study.spec.two_afc:
        values = counted["correct"].astype(bool)
    else:
        values = counted["chosen"].map(lambda c: "|".join(c))
    alpha, alpha_units = alpha_nominal(counted["task_id"], values) if len(counted) else (None, 0)
    acc = lo = hi = None
    if study.spec.two_afc and len(counted):
        right = int(values.sum())
        acc = right / len(counted)
        lo, hi = clopper_pearson(right, len(counted))
    summary = {
        "study_id": study_id,
        "kind": study.spec.kind,
        "measure": study.spec.measure,
        "spec": study.spec.to_json(),
        "created": study.created,
        "participants": len(parts),
        "finished": int(parts["finished"].notna().sum()),
        "excluded": int(parts["excluded"].sum()),
        "max_catch_failure": None if max_catch_failure is None else float(max_catch_failure),
        "answers": len(counted),
        "accuracy": acc,
        "lo": lo,
        "hi": hi,
        "alpha": alpha,
        "alpha_units": alpha_units,
        "excluded_by": excluded_by(study.spec, checked),
    }
    return Results(rows, parts, clusters, summary, checked)


def similarity_trials(study: Study, res: Results) -> pd.DataFrame:
    """`similarity_trials` rows of a similarity study: the trials of people who finished and
    are not excluded, weighted by their mean catch grade (1 without catch trials)."""
    p = res.participants
    done = p[p["finished"].notna() & ~p["excluded"]].set_index("participant_id")
    r = res.answers[res.answers["participant_id"].isin(done.index)]
    weight = done["mean_grade"].fillna(1.0)
    return pd.DataFrame(
        {
            "trial_id": study.study_id + "." + r["task_id"] + "." + r["participant_id"],
            "agent_id": r["participant_id"],
            "query": r["query"],
            "references": r["references"],
            "chosen": r["chosen"],
            "n_select": N_SELECT,
            "kind": "8rank2",
            "weight": r["participant_id"].map(weight).astype(float),
            "rt_ms": r["rt_ms"],
            "split": "train",
            "is_catch": r["is_catch"].astype(bool),
            "round": int(study.spec.round),
        }
    ).reset_index(drop=True)


def _table(name: str, df: pd.DataFrame) -> pa.Table:
    sch = schema.arrow_schema(name, partition=False)
    return pa.Table.from_pandas(df[[f.name for f in sch]], schema=sch, preserve_index=False)


def _new_rows(ws: Workspace, table: str, df: pd.DataFrame, key: list[str], **partition) -> pd.DataFrame:
    """The rows of `df` an append-only partition does not hold yet (by key)."""
    if df.empty or not ws.has(table, **partition):
        return df
    have = ws.read(table, columns=key, **partition).to_pandas()
    seen = set(map(tuple, have[key].itertuples(index=False)))
    return df[[t not in seen for t in map(tuple, df[key].itertuples(index=False))]]


def export(store: Store, study_id: str, ws: Workspace, max_catch_failure=None) -> dict:
    """Write a study's results into `ws`: its new answers appended to `study_answers` (people's
    answers are never rewritten), `study_participants`, `study_clusters` and `study_summary`
    replaced, and for a similarity study the new trials of finished participants appended to
    `similarity_trials`. Running it again adds only what is new."""
    study = store.study(study_id)
    name = str(ws.meta().get("name", ""))
    if study.workspace != name:
        raise StudyError(
            f"study {study_id} was designed on workspace {study.workspace!r}; {ws.root} is {name!r}"
        )
    res = results(store, study_id, ws, max_catch_failure)
    done = {"answers": 0, "similarity_trials": 0}
    new = _new_rows(ws, "study_answers", res.answers, ["participant_id", "task_id"], study_id=study_id)
    if len(new):
        ws.append("study_answers", _table("study_answers", new), study_id=study_id)
        done["answers"] = len(new)
    ws.write("study_participants", _table("study_participants", res.participants), study_id=study_id)
    if len(res.clusters):
        ws.write("study_clusters", _table("study_clusters", res.clusters), study_id=study_id)
    ws.write("study_summary", _table("study_summary", pd.DataFrame([res.summary])), study_id=study_id)
    if study.spec.kind == "similarity":
        ds = study.spec.dataset
        trials = _new_rows(ws, "similarity_trials", similarity_trials(study, res), ["trial_id"], dataset=ds)
        if len(trials):
            ws.append("similarity_trials", _table("similarity_trials", trials), dataset=ds)
            done["similarity_trials"] = len(trials)
    return {**done, "summary": res.summary, "clusters": len(res.clusters)}
