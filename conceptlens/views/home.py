"""The Home page: the workspace's datasets, checkpoints, images and analyses."""

from __future__ import annotations

import pandas as pd

from .. import schema
from ..analyses import by_name, command_for, needs, steps
from ..errors import ConceptLensError

CORE_IMAGE_COLUMNS = tuple(c.name for c in schema.TABLES_BY_NAME["images"].columns)


def datasets(db) -> pd.DataFrame:
    """One row per dataset: images, distinct labels, train and test images, checkpoints."""
    return db.query("""
        SELECT i.dataset, i.images, i.labels, i.train, i.test,
               coalesce(c.n, 0) AS checkpoints
        FROM (SELECT dataset, count(*) AS images, count(DISTINCT label) AS labels,
                     count(*) FILTER (WHERE split = 'train') AS train,
                     count(*) FILTER (WHERE split = 'test') AS test
              FROM images GROUP BY dataset) i
        LEFT JOIN (SELECT dataset, count(*) AS n FROM checkpoints GROUP BY dataset) c
               USING (dataset)
        ORDER BY i.dataset""")


def checkpoints(db) -> pd.DataFrame:
    return db.query("""
        SELECT checkpoint_id, dataset, model, method, epoch, feature_dim, source
        FROM checkpoints ORDER BY dataset, checkpoint_id""")


def factors(db, dataset: str) -> pd.DataFrame:
    """Columns of `images` beyond the documented ones (a dataset's factors and attributes)
    that hold a value for `dataset`: `column`, `images` (how many have one)."""
    if not [c for c in db.columns("images") if c not in CORE_IMAGE_COLUMNS]:
        return pd.DataFrame({"column": pd.Series(dtype=str), "images": pd.Series(dtype="int64")})
    # COLUMNS() picks the columns inside DuckDB: no column name is ever spliced into SQL.
    counts = db.query(
        """
        UNPIVOT (SELECT count(COLUMNS(lambda c: NOT list_contains($core, c)))
                 FROM images WHERE dataset = $ds)
        ON COLUMNS(*) INTO NAME "column" VALUE images""",
        {"core": list(CORE_IMAGE_COLUMNS), "ds": dataset},
    )
    return counts[counts["images"] > 0].reset_index(drop=True)


def sample_images(db, dataset: str, n: int = 40, seed: str = "home") -> pd.DataFrame:
    """A fixed pseudo-random sample: the same images on every rerun and for every user."""
    return db.query(
        """
        SELECT image_id, label_name, thumbnail FROM images
        WHERE dataset = $ds ORDER BY hash(image_id || $seed), image_id LIMIT $n""",
        {"ds": dataset, "seed": seed, "n": int(n)},
    )


def analyses(db, workspace: str, dataset: str = "DATASET", broken: tuple[str, ...] = ()) -> pd.DataFrame:
    """Every step of `conceptlens.analyses` (the pipeline's inputs, then the analyses) with
    its `status` and what to run:

    - `present`; `broken` (one of its tables is in `broken`: the caller validated them);
    - `missing`: `command` computes it;
    - `waiting`: an analysis with nothing to compute until the analyses it runs after
      (`after`) are computed: `command` (one per line) runs them, then it;
    - `no_input`: an analysis with nothing to compute in this workspace, even after those
      it runs after: it `needs` these inputs, which `command` adds (`doc` says how where no
      command does);
    - `needed`: an input missing that a `no_input` analysis `needs` (said there);
    - `skipped`: an analysis some of whose units were skipped for a missing input (a model
      that cannot be loaded, captions absent) and are not done: `skipped` counts them,
      `reason` is the latest one's reason, and `command` tries them again (present or not,
      it is not ticked as done).

    Whether an analysis has anything to compute is the registry's answer (its units on this
    workspace), asked only for analyses not present and only of a local workspace."""
    status = {}
    for s in steps():
        if set(s.reads) & set(broken):
            status[s.name] = "broken"
        elif not all(db.has(t) for t in s.tables):
            status[s.name] = "missing"
        elif s.present_sql and not bool(db.query(s.present_sql)["present"].iloc[0]):
            status[s.name] = "missing"
        else:
            status[s.name] = "present"
    pending = _pending(db, [s.name for s in steps() if s.analysis and status[s.name] == "missing"])
    skips = _skipped(db)
    step = by_name()

    def cmd(name: str) -> str | None:
        return command_for(step[name], workspace, dataset)

    def first(name: str) -> list[str]:
        """The analyses to compute before `name`, dependencies first: those with units to
        compute, and those missing that will have some once theirs are computed."""
        out: list[str] = []
        for d in step[name].depends:
            before = first(d)
            todo = pending.get(d) or (before and status[d] != "present")
            for n in before + ([d] if todo else []):
                if n not in out:
                    out.append(n)
        return out

    rows = []
    for s in steps():
        state, commands, after, inputs, doc = status[s.name], [cmd(s.name)], [], [], s.doc
        reasons = skips.get(s.name, {})
        if reasons and state != "broken":
            state = "skipped"
        elif state == "missing" and s.name in pending and not pending[s.name]:
            after = first(s.name)
            if after:
                state, commands = "waiting", [cmd(n) for n in after] + commands
            else:
                declared = needs(s.name)
                inputs = [i for i in declared if status[i.name] != "present"] or list(declared)
                state = "no_input"
                commands = [cmd(i.name) for i in inputs if i.command]
                doc = ", ".join(dict.fromkeys(i.doc for i in inputs if i.doc))
        rows.append(
            {
                "name": s.name,
                "title": s.title,
                "status": state,
                "tables": list(s.reads),
                "command": "\n".join(c for c in commands if c),
                "after": [step[n].title for n in after],
                "needs": [i.title for i in inputs],
                "doc": doc,
                "skipped": len(reasons),
                "reason": next(reversed(reasons.values()), ""),
            }
        )
    needed = {t for r in rows for t in r["needs"]}
    for r in rows:
        if r["status"] == "missing" and r["title"] in needed:
            r["status"] = "needed"
    return pd.DataFrame(
        rows,
        columns=[
            "name",
            "title",
            "status",
            "tables",
            "command",
            "after",
            "needs",
            "doc",
            "skipped",
            "reason",
        ],
    )


def _pending(db, names: list[str]) -> dict[str, list[str]]:
    """Units not computed yet of the analyses `names` and those they run after (the
    registry's `missing`); empty for a remote workspace, or when it cannot tell."""
    if not names or db.remote:
        return {}
    from ..analysis import runner  # local: the analyses load on use

    try:
        return runner.missing(db.root, names)
    except (ConceptLensError, OSError, ValueError):
        return {}


def skipped_units(db, analysis: str) -> pd.DataFrame:
    """The units of `analysis` skipped for a missing input and not done since: `unit`, `reason`."""
    rows = _skipped(db).get(analysis, {})
    return pd.DataFrame({"unit": list(rows), "reason": list(rows.values())}, columns=["unit", "reason"])


def _skipped(db) -> dict[str, dict[str, str]]:
    """analysis -> unit -> reason of the units skipped and not done since (the runner's
    `skipped`, from the `analysis_runs` log); empty for a remote workspace or without a log."""
    if db.remote or not db.has("analysis_runs"):
        return {}
    from ..analysis import runner  # local: the analyses load on use

    try:
        return runner.skipped(db.root)
    except (ConceptLensError, OSError, ValueError):
        return {}
