"""The findings the docs report on the demo, generated from its stored tables.

A number the docs give about the demo workspace is written between two markers,

    <!-- BEGIN GENERATED NAME: python -m conceptlens.demo.docs -->
    ...
    <!-- END GENERATED NAME -->

and the text between them is what `BLOCKS[NAME](workspace)` makes of the workspace's
stored tables (`predictor_correlations`, `transfer_correlations`, `checkpoint_metrics`,
`checkpoints`), read only. `python -m conceptlens.demo.docs [--workspace data/demo]
docs/demo.md docs/analysis.md` rewrites the blocks in place; `stale(text, workspace)` names
every block whose text differs from what the workspace gives (tests/test_docs_demo.py):
after the demo is rebuilt or an analysis changes, the docs cannot keep the old numbers.
Prose around a block interprets its numbers and is kept true by hand; the block itself
says the claims that are only a matter of the numbers (which intervals exclude 0).
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from ..analysis.common import Context
from ..analysis.comparisons import (
    clid_and_correlations,
    in_population,
    metrics_of,
    population_label,
    stored_population,
)
from ..workspace import Workspace

DEFAULT_WORKSPACE = "data/demo"
BEGIN = "<!-- BEGIN GENERATED {name}: python -m conceptlens.demo.docs -->"
END = "<!-- END GENERATED {name} -->"
_BLOCK = re.compile(
    r"<!-- BEGIN GENERATED (?P<name>[a-z0-9-]+): python -m conceptlens\.demo\.docs -->\n"
    r"(?P<body>.*?)"
    r"<!-- END GENERATED (?P=name) -->",
    re.S,
)

# How the docs name lu2022's predictors (the table's first column).
NAMES = {
    "cl": "CL",
    "cl_heldout": "CL held-out",
    "id": "ID",
    "clid": "CLID",
    "wclid": "W-CLID (in-sample)",
    "wclid_loo": "W-CLID, leave-one-out",
    "alignment": "alignment",
    "uniformity": "uniformity",
    "mcr2": "MCR2 Delta R",
    "rotation": "rotation",
    "source_entropy": "source entropy",
    "knn_acc": "kNN accuracy",
    "target_entropy": "target entropy",
}
LU2022 = ("cl", "cl_heldout", "id", "clid", "wclid", "wclid_loo")
# The demo's self-supervised methods (conceptlens/demo/models.py RUNS, real.py): the
# population lu2022 studies, without the supervised, untrained, PCA and VL checkpoints.
SELF_SUPERVISED = ("simclr", "simsiam", "autoencoder", "vae", "rotation")


# ---- reading -------------------------------------------------------------------------------------
def _table(ws: Workspace, name: str, dataset: str) -> pd.DataFrame:
    if not ws.has(name, dataset=dataset):
        raise ValueError(f"the workspace {ws.root} has no {name} of dataset {dataset!r}")
    return ws.read(name, dataset=dataset).to_pandas()


def correlations(ws: Workspace, dataset: str) -> pd.DataFrame:
    """The stored predictor_correlations of `dataset` at its smallest k, by predictor."""
    pc = _table(ws, "predictor_correlations", dataset)
    return pc[pc["k"] == pc["k"].min()].set_index("predictor")


def population(ws: Workspace, dataset: str) -> dict:
    """The population the stored correlations of `dataset` are over: `population`, `label`,
    `members` and `left_out` (its measured checkpoints), as the Checkpoints page says it."""
    name = stored_population(ws, dataset)
    if name is None:
        raise ValueError(f"the workspace {ws.root} has no predictor_correlations of dataset {dataset!r}")
    ck = ws.read("checkpoints").to_pandas()
    measured = {p["checkpoint_id"] for p in ws.partitions("checkpoint_metrics")}
    ck = ck[(ck["dataset"] == dataset) & ck["checkpoint_id"].isin(measured)].sort_values("checkpoint_id")
    inside = in_population(ck, name)
    members = list(ck.loc[inside, "checkpoint_id"])
    return {
        "population": name,
        "label": population_label(name, len(members), len(ck)),
        "members": members,
        "left_out": list(ck.loc[~inside, "checkpoint_id"]),
        "checkpoints": ck,
    }


# ---- formatting -----------------------------------------------------------------------------------
def num(v: float) -> str:
    """Two decimals, a dash for a missing value, never "-0.00"."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    text = f"{float(v):.2f}"
    return "0.00" if text == "-0.00" else text


def interval(row, coef: str = "pearson") -> str:
    """`0.40 [0.04, 0.67]`: a coefficient and its 95% interval."""
    return f"{num(row[coef])} [{num(row[f'{coef}_lo'])}, {num(row[f'{coef}_hi'])}]"


def excludes_zero(row, coef: str) -> bool:
    lo, hi = row[f"{coef}_lo"], row[f"{coef}_hi"]
    return bool(pd.notna(lo) and pd.notna(hi) and (lo > 0 or hi < 0))


def _names(preds) -> str:
    preds = list(preds)
    return ", ".join(NAMES[p] for p in preds) if preds else "none"


def _left_out(pop: dict) -> str:
    left = pop["left_out"]
    return f"left out: {', '.join(f'`{c}`' for c in left)}" if left else "none left out"


# ---- the blocks -----------------------------------------------------------------------------------
def lu2022_table(ws: Workspace) -> str:
    """docs/demo.md: lu2022 Table 1 on shapes and digits, its population, and which
    predictors' intervals exclude 0."""
    pops = {d: population(ws, d) for d in ("shapes", "digits")}
    corr = {d: correlations(ws, d) for d in pops}
    n = {d: int(corr[d]["n_checkpoints"].max()) for d in pops}
    lines = [
        "Over the population `conceptlens analyze comparisons --population` chose (stored "
        "with the tables): shapes "
        + ", digits ".join(
            f"{pops[d]['label']}, k = {int(corr[d]['k'].iloc[0])} (`--population {pops[d]['population']}`; "
            f"{_left_out(pops[d])})"
            for d in pops
        )
        + ".",
        "",
        f"| predictor | shapes ({n['shapes']}) Pearson r | shapes Kendall tau "
        f"| digits ({n['digits']}) Pearson r | digits Kendall tau |",
        "|---|---|---|---|---|",
    ]
    for p in LU2022:
        cells = [interval(corr[d].loc[p], c) for d in pops for c in ("pearson", "kendall")]
        lines.append(f"| {NAMES[p]} | " + " | ".join(cells) + " |")
    lines.append("")
    both = {
        d: [p for p in LU2022 if all(excludes_zero(corr[d].loc[p], c) for c in ("pearson", "kendall"))]
        for d in pops
    }
    lines.append(
        "Intervals that exclude 0 for both coefficients: on shapes "
        f"{_names(both['shapes'])}; on digits {_names(both['digits'])}."
    )
    lines.append(_id_extremes(ws, pops["shapes"], int(corr["shapes"]["k"].iloc[0])))
    return "\n".join(lines) + "\n"


def _id_extremes(ws: Workspace, pop: dict, k: int) -> str:
    """The lowest and highest ID of the population, with the kNN accuracy rank of each."""
    m = pd.concat(
        [
            ws.read("checkpoint_metrics", checkpoint_id=c, k=k).to_pandas().assign(checkpoint_id=c)
            for c in pop["members"]
        ],
        ignore_index=True,
    )
    m = m.assign(rank=m["knn_acc"].rank(ascending=False, method="min").astype(int))
    lo, hi = m.loc[m["id"].idxmin()], m.loc[m["id"].idxmax()]
    return (
        f"ID runs from {float(lo['id']):.1f} (`{lo['checkpoint_id']}`, kNN accuracy rank "
        f"{lo['rank']} of {len(m)}) to {float(hi['id']):.1f} (`{hi['checkpoint_id']}`, rank "
        f"{hi['rank']})."
    )


def lu2022_self_supervised(ws: Workspace) -> str:
    """docs/demo.md: the correlations on shapes' self-supervised checkpoints only, computed
    by the analysis' own function from the stored checkpoint metrics (not stored)."""
    pop = population(ws, "shapes")
    ck = pop["checkpoints"]
    ssl = sorted(
        ck.loc[ck["checkpoint_id"].isin(pop["members"]) & ck["method"].isin(SELF_SUPERVISED), "checkpoint_id"]
    )
    k = int(correlations(ws, "shapes")["k"].iloc[0])
    metrics = metrics_of(Context(ws, progress=False), "shapes", ssl)
    _, corr, _ = clid_and_correlations(metrics[metrics["k"] == k], seed=0)
    rows = {r["predictor"]: pd.Series(r, dtype=object).fillna(math.nan) for r in corr}
    shown = ", ".join(
        f"{NAMES[p]} {'r = ' if p == 'cl' else ''}{interval(rows[p])}"
        for p in ("cl", "id", "clid", "wclid", "wclid_loo")
    )
    n = int(rows["cl"]["n_checkpoints"])
    return (
        f"On the {n} self-supervised checkpoints of the population only ({', '.join(SELF_SUPERVISED)}; "
        f"the population lu2022 studies; computed from the stored checkpoint metrics with "
        f"the analysis' own functions, seed 0, k = {k}; Pearson r, 95% Fisher intervals): {shown}.\n"
    )


def lu2022_fashion(ws: Workspace) -> str:
    """docs/demo.md: lu2022's predictors against kNN accuracy on fashion."""
    pop = population(ws, "fashion")
    corr = correlations(ws, "fashion")
    preds = ("cl", "cl_heldout", "id", "clid", "wclid_loo")
    shown = ", ".join(f"{NAMES[p]} {interval(corr.loc[p])}" for p in preds)
    excl = [
        p for p in preds if excludes_zero(corr.loc[p], "pearson") or excludes_zero(corr.loc[p], "kendall")
    ]
    verdict = (
        "every interval includes 0 (Kendall's tau likewise)"
        if not excl
        else f"intervals that exclude 0 (Pearson or Kendall): {_names(excl)}"
    )
    return (
        f"Over fashion's {pop['label']} (`--population {pop['population']}`; "
        f"{_left_out(pop)}), k = {int(corr['k'].iloc[0])}, Pearson r with 95% Fisher intervals: "
        f"{shown}: {verdict}. MCR2 rate reduction ({interval(corr.loc['mcr2'])}) and the source "
        f"label's probe entropy ({interval(corr.loc['source_entropy'])}).\n"
    )


def lu2022_baselines(ws: Workspace) -> str:
    """docs/analysis.md: every predictor against kNN accuracy on shapes, and against the
    transfer accuracy to digits, largest |r| first."""
    pop = population(ws, "shapes")
    corr = correlations(ws, "shapes")
    k = int(corr["k"].iloc[0])
    order = corr.reindex(corr["pearson"].abs().sort_values(ascending=False, kind="stable").index)
    inside = "; ".join(f"{NAMES[p]} {interval(r)}" for p, r in order.iterrows() if pd.notna(r["pearson"]))
    tr = _table(ws, "transfer_correlations", "shapes")
    tr = tr[(tr["k"] == k) & (tr["target_dataset"] == "digits")].set_index("predictor")
    tr = tr.reindex(tr["pearson"].abs().sort_values(ascending=False, kind="stable").index)
    transfer = "; ".join(f"{NAMES[p]} {interval(r)}" for p, r in tr.iterrows() if pd.notna(r["pearson"]))
    return (
        f"**On the demo** (shapes: {pop['label']}, `--population {pop['population']}`, k = {k}; "
        f"Pearson r [95% interval] with kNN accuracy, largest |r| first): {inside}. Transfer "
        f"shapes -> digits: {transfer}.\n"
    )


BLOCKS: dict[str, Callable[[Workspace], str]] = {
    "lu2022-table": lu2022_table,
    "lu2022-self-supervised": lu2022_self_supervised,
    "lu2022-fashion": lu2022_fashion,
    "lu2022-baselines": lu2022_baselines,
}


# ---- the docs ------------------------------------------------------------------------------------
def blocks(text: str) -> dict[str, str]:
    """name -> the text between its markers, in `text`; ValueError for an unknown or
    repeated name."""
    out: dict[str, str] = {}
    for m in _BLOCK.finditer(text):
        name = m.group("name")
        if name not in BLOCKS:
            raise ValueError(f"generated block {name!r} is not one of {', '.join(BLOCKS)}")
        if name in out:
            raise ValueError(f"generated block {name!r} appears twice")
        out[name] = m.group("body")
    return out


def render(text: str, root=DEFAULT_WORKSPACE) -> str:
    """`text` with every generated block made again from the workspace at `root`."""
    ws = Workspace(root)
    made = {name: BLOCKS[name](ws) for name in blocks(text)}
    return _BLOCK.sub(
        lambda m: f"{BEGIN.format(name=m['name'])}\n{made[m['name']]}{END.format(name=m['name'])}", text
    )


def stale(text: str, root=DEFAULT_WORKSPACE) -> list[str]:
    """One line per generated block of `text` that differs from what the workspace at `root`
    gives, naming the block and the first word that differs (empty: up to date)."""
    ws = Workspace(root)
    out = []
    for name, body in blocks(text).items():
        want = BLOCKS[name](ws)
        if body != want:
            have_w, want_w = body.split(), want.split()
            i = next(
                (i for i, (a, b) in enumerate(zip(have_w, want_w)) if a != b), min(len(have_w), len(want_w))
            )
            got = have_w[i] if i < len(have_w) else "(end)"
            wanted = want_w[i] if i < len(want_w) else "(end)"
            out.append(f"{name}: the docs say {got!r} where the workspace gives {wanted!r} (word {i + 1})")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("docs", nargs="+", help="markdown files whose generated blocks to rewrite")
    ap.add_argument("--workspace", default=DEFAULT_WORKSPACE, help="the demo workspace (read only)")
    args = ap.parse_args(argv)
    for path in map(Path, args.docs):
        text = path.read_text()
        new = render(text, args.workspace)
        if new != text:
            path.write_text(new)
            print(f"{path}: {len(blocks(text))} generated block(s) rewritten")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
