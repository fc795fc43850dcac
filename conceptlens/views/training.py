"""Concept events and learning curves along a training run (issue 27): the Checkpoints page's
'Along training' section and its figures read these (tables `concept_events`,
`learning_curves`, written by the analyses of the same names)."""

from __future__ import annotations

import pandas as pd

from ..analysis.base import parse_sequence_name

# The events the timeline and table show by default (continuations are the rest).
CHANGE_KINDS = ("split", "merge", "birth", "death")
# The cluster that names an event: the one side it has a single cluster on.
MAIN_SIDE = {
    "split": "before",
    "death": "before",
    "continuation": "before",
    "merge": "after",
    "birth": "after",
}


def runs(db, dataset: str) -> list[str]:
    """The sequences of `dataset` with concept events or learning curves stored: training
    runs before depth sequences, each the longest first (most checkpoints compared, then
    most events), then by name."""
    score: dict[str, tuple] = {}
    if db.has("learning_curves"):
        q = db.query(
            """SELECT run, count(DISTINCT checkpoint_id) AS n FROM learning_curves
               WHERE dataset = $ds GROUP BY run""",
            {"ds": dataset},
        )
        score |= {str(r): (int(n), 0) for r, n in zip(q["run"], q["n"])}
    if db.has("concept_events"):
        q = db.query(
            """SELECT run, max(step) + 1 AS n, count(DISTINCT (step, event))
                      FILTER (WHERE kind <> 'continuation') AS e
               FROM concept_events WHERE dataset = $ds GROUP BY run""",
            {"ds": dataset},
        )
        for r, n, e in zip(q["run"], q["n"], q["e"]):
            old = score.get(str(r), (0, 0))
            score[str(r)] = (max(old[0], int(n)), int(e))
    # Training runs first, then depth sequences; each the longest first.
    return sorted(score, key=lambda r: (axis(r) != "epoch", -score[r][0], -score[r][1], r))


def axis(run: str) -> str:
    """`epoch` for a training run, `depth` for a depth sequence (from its name,
    `analysis.base.sequence_name`)."""
    return parse_sequence_name(run)[1]


def epochs(db, dataset: str, run: str) -> pd.DataFrame:
    """The checkpoints of the sequence `run` in order (as `analysis.base.sequences` makes
    them): checkpoint_id, epoch (its position: the epoch, or the depth of a depth
    sequence), layer, tick (how an axis names it: the epoch, or the layer's module name,
    `embedding` for the default one)."""
    base, ax, at = parse_sequence_name(run)
    cols = set(db.columns("checkpoints"))
    layer = "layer" if "layer" in cols else "NULL"
    args = {"ds": dataset, "run": base}
    if ax == "depth":
        if "depth" not in cols:
            return pd.DataFrame(columns=["checkpoint_id", "epoch", "layer", "tick"])
        when = "epoch IS NULL" if at is None else "epoch = $at"
        args |= {} if at is None else {"at": int(at)}
        q = f"""SELECT checkpoint_id, CAST(depth AS BIGINT) AS epoch, {layer} AS layer FROM checkpoints
                WHERE dataset = $ds AND run = $run AND depth IS NOT NULL AND {when}
                ORDER BY depth, checkpoint_id"""
    else:
        when = f"{layer} IS NULL" if at is None else f"{layer} = $layer"
        args |= {} if at is None else {"layer": at}
        q = f"""SELECT checkpoint_id, CAST(epoch AS BIGINT) AS epoch, {layer} AS layer FROM checkpoints
                WHERE dataset = $ds AND run = $run AND epoch IS NOT NULL AND {when}
                ORDER BY epoch, checkpoint_id"""
    out = db.query(q, args)
    if ax == "depth":
        out["tick"] = [str(v) if isinstance(v, str) else "embedding" for v in out["layer"]]
    else:
        out["tick"] = out["epoch"].astype(str)
    return out.reset_index(drop=True)


def event_rows(db, dataset: str, run: str) -> pd.DataFrame:
    """Every row of `concept_events` of the run (one per cluster taking part in an event)."""
    if not db.has("concept_events"):
        return pd.DataFrame()
    return db.query(
        """SELECT * FROM concept_events WHERE dataset = $ds AND run = $run
           ORDER BY step, event, side DESC, cluster""",
        {"ds": dataset, "run": run},
    )


def _ids(g: pd.DataFrame, side: str) -> list[int]:
    return [int(c) for c in g.loc[g["side"] == side, "cluster"]]


def _mean(g: pd.DataFrame, side: str, col: str) -> float:
    s = g[g["side"] == side]
    v = s[col].astype(float)
    w = s["size"].astype(float)
    ok = v.notna()
    return float((v[ok] * w[ok]).sum() / w[ok].sum()) if ok.any() else float("nan")


def events(db, dataset: str, run: str, kinds: tuple[str, ...] = CHANGE_KINDS) -> pd.DataFrame:
    """One row per event of the run whose kind is in `kinds`: step, event, epoch_from, epoch_to,
    checkpoint_from, checkpoint_to, kind, before and after (cluster ids), size_before and
    size_after (their images), images (on the event's significant links), main (the
    cluster naming the event: a split's or death's before cluster, a merge's or birth's
    after cluster), name (its caption, else its top label; None without either),
    purity_before and purity_after (size-weighted mean label purity of each side), p_value,
    captions_before and captions_after (the clusters' captions, in the order of their ids).
    Ordered by step, then kind, then images (largest first)."""
    rows = event_rows(db, dataset, run)
    cols = [
        "step", "event", "epoch_from", "epoch_to", "checkpoint_from", "checkpoint_to", "kind", "before",
        "after", "size_before", "size_after", "images", "main", "name", "purity_before", "purity_after",
        "p_value", "captions_before", "captions_after",
    ]  # fmt: skip
    if rows.empty:
        return pd.DataFrame(columns=cols)
    rows = rows[rows["kind"].isin(kinds)]
    out = []
    for (step, event), g in rows.groupby(["step", "event"], sort=True):
        first = g.iloc[0]
        kind = str(first["kind"])
        main_rows = g[g["side"] == MAIN_SIDE[kind]]
        m = main_rows.iloc[0]
        name = m["caption"] if isinstance(m["caption"], str) and m["caption"] else None
        if name is None and isinstance(m["top_label"], str):
            name = m["top_label"]
        out.append(
            {
                "step": int(step),
                "event": int(event),
                "epoch_from": int(first["epoch_from"]),
                "epoch_to": int(first["epoch_to"]),
                "checkpoint_from": first["checkpoint_from"],
                "checkpoint_to": first["checkpoint_to"],
                "kind": kind,
                "before": _ids(g, "before"),
                "after": _ids(g, "after"),
                "size_before": int(g.loc[g["side"] == "before", "size"].sum()),
                "size_after": int(g.loc[g["side"] == "after", "size"].sum()),
                "images": int(first["images"]),
                "main": int(m["cluster"]),
                "name": name,
                "purity_before": _mean(g, "before", "purity"),
                "purity_after": _mean(g, "after", "purity"),
                "p_value": first["p_value"],
                "captions_before": [c for c in g.loc[g["side"] == "before", "caption"]],
                "captions_after": [c for c in g.loc[g["side"] == "after", "caption"]],
            }
        )
    out = pd.DataFrame(out, columns=cols)
    order = {k: i for i, k in enumerate(("split", "merge", "birth", "death", "continuation"))}
    out = out.assign(_o=out["kind"].map(order), _n=-out["images"], _s=-out["size_before"] - out["size_after"])
    out = out.sort_values(["step", "_o", "_n", "_s", "main"], kind="stable")
    return out.drop(columns=["_o", "_n", "_s"]).reset_index(drop=True)


def event_counts(db, dataset: str, run: str) -> pd.DataFrame:
    """Events per step and kind: step, epoch_from, epoch_to, kind, events."""
    rows = event_rows(db, dataset, run)
    if rows.empty:
        return pd.DataFrame(columns=["step", "epoch_from", "epoch_to", "kind", "events"])
    g = rows.groupby(["step", "epoch_from", "epoch_to", "kind"])["event"].nunique()
    return g.rename("events").reset_index()


def event_images(db, dataset: str, run: str, step: int, event: int, limit: int = 26) -> pd.DataFrame:
    """The images of one event: those of its before clusters (checkpoint_from) that its
    after clusters hold (checkpoint_to); a birth's: its after cluster's, a death's: its
    before cluster's. Columns image_id, thumbnail, label_name, cluster_before,
    cluster_after (null on a side the event has no cluster), the first `limit` by image id."""
    return db.query(
        """
        WITH ev AS (SELECT * FROM concept_events
                    WHERE dataset = $ds AND run = $run AND step = $step AND event = $event),
             head AS (SELECT any_value(checkpoint_from) AS a, any_value(checkpoint_to) AS b,
                             any_value(k) AS k, any_value(kind) AS kind FROM ev),
             ca AS (SELECT c.image_id, c.cluster FROM clusters c, head
                    WHERE c.checkpoint_id = head.a AND c.k = head.k
                      AND c.cluster IN (SELECT cluster FROM ev WHERE side = 'before')),
             cb AS (SELECT c.image_id, c.cluster FROM clusters c, head
                    WHERE c.checkpoint_id = head.b AND c.k = head.k
                      AND c.cluster IN (SELECT cluster FROM ev WHERE side = 'after'))
        SELECT i.image_id, i.thumbnail, i.label_name, ca.cluster AS cluster_before,
               cb.cluster AS cluster_after
        FROM head, ca FULL OUTER JOIN cb USING (image_id)
        JOIN images i ON i.image_id = coalesce(ca.image_id, cb.image_id)
        WHERE (head.kind = 'birth' AND cb.cluster IS NOT NULL)
           OR (head.kind = 'death' AND ca.cluster IS NOT NULL)
           OR (ca.cluster IS NOT NULL AND cb.cluster IS NOT NULL)
        ORDER BY i.image_id LIMIT $limit""",
        {"ds": dataset, "run": run, "step": int(step), "event": int(event), "limit": int(limit)},
    )


def factors(db, dataset: str, run: str) -> list[str]:
    """The factors of the run's learning curves (`label` first)."""
    if not db.has("learning_curves"):
        return []
    q = db.query(
        "SELECT DISTINCT factor FROM learning_curves WHERE dataset = $ds AND run = $run",
        {"ds": dataset, "run": run},
    )
    names = sorted(q["factor"].astype(str))
    return sorted(names, key=lambda f: f != "label")


def curves(db, dataset: str, run: str, factor: str | None = None) -> pd.DataFrame:
    """The run's learning curves (of one factor, or of every factor's whole-factor row
    with factor=None), by factor, value and epoch."""
    if not db.has("learning_curves"):
        return pd.DataFrame()
    where = "factor = $f" if factor is not None else "value IS NULL"
    args = {"ds": dataset, "run": run, **({"f": factor} if factor is not None else {})}
    return db.query(
        f"""SELECT * EXCLUDE (dataset, run) FROM learning_curves
            WHERE dataset = $ds AND run = $run AND {where}
            ORDER BY factor, value NULLS FIRST, epoch, checkpoint_id""",
        args,
    )


def learned(db, dataset: str, run: str) -> pd.DataFrame:
    """One row per factor and value (value null: the factor as a whole): learned_at,
    lost_at, the AUC and its interval at learned_at (else at the last epoch), the best
    AUC and its epoch. By factor (label first), the factor's row first, then learned_at."""
    if not db.has("learning_curves"):
        return pd.DataFrame()
    t = db.query(
        "SELECT * FROM learning_curves WHERE dataset = $ds AND run = $run ORDER BY epoch, checkpoint_id",
        {"ds": dataset, "run": run},
    )
    out = []
    for (f, v), g in t.groupby(["factor", t["value"].fillna("\0")], sort=False):
        at = g["learned_at"].iloc[0]
        ref = g[g["epoch"] == at].iloc[0] if pd.notna(at) else g.iloc[-1]
        best = g.loc[g["auc"].astype(float).idxmax()] if g["auc"].notna().any() else ref
        out.append(
            {
                "factor": f,
                "value": None if v == "\0" else v,
                "learned_at": None if pd.isna(at) else int(at),
                "lost_at": None if pd.isna(g["lost_at"].iloc[0]) else int(g["lost_at"].iloc[0]),
                "epoch": int(ref["epoch"]),
                "auc": ref["auc"],
                "auc_lo": ref["auc_lo"],
                "auc_hi": ref["auc_hi"],
                "best_auc": best["auc"],
                "best_epoch": int(best["epoch"]),
                "cluster_purity": ref["cluster_purity"],
                "threshold": float(g["threshold"].iloc[0]),
            }
        )
    out = pd.DataFrame(out)
    if out.empty:
        return out
    out = out.assign(
        _f=out["factor"].ne("label"),
        _v=out["value"].notna(),
        _l=out["learned_at"].fillna(10**9),
    )
    out = out.sort_values(["_f", "factor", "_v", "_l", "value"], kind="stable")
    return out.drop(columns=["_f", "_v", "_l"]).reset_index(drop=True)
