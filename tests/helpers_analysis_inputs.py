"""Inputs shared by the analysis tests: the factory workspace with a second dataset (`two_datasets`, a
fixture: a test module names it, `two_datasets = helpers_analysis_inputs.two_datasets`) and
similarity trials appended or made unknown to the checkpoints."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pytest

from conceptlens import schema
from conceptlens.workspace import Workspace
from tests.conftest import copy_ws

# ---- convergence -------------------------------------------------------------------------------
CONV_OPTS = {"rounds": 2, "convergence_members": 2, "max_epochs": 2}


def append_trial_rows(ws: Workspace, rows: list[dict]) -> None:
    ws.append(
        "similarity_trials",
        pa.Table.from_pylist(rows, schema=schema.arrow_schema("similarity_trials", partition=False)),
        dataset="toy",
    )


def stranger_trials(ws: Workspace) -> pd.DataFrame:
    """The factory's trials plus catch trials and trials showing an image the embedding
    lacks (train and test); returns every trial."""
    from conceptlens.embedding.psych import read_embedding

    t = ws.read("similarity_trials", dataset="toy").to_pandas().drop(columns="dataset")
    embedded, _ = read_embedding(ws, "toy")
    stranger = next(i for i in ws.read("images")["image_id"].to_pylist() if i not in set(embedded))
    t = t.astype(object).where(t.notna(), None)
    base = t[(t["split"] == "train")].head(6).to_dict("records")
    new = [
        {**r, "trial_id": f"u{j}", "is_catch": True, "chosen": list(r["references"][-2:])}
        for j, r in enumerate(base[:4])
    ]
    # First in trial-id order, with their own weight and n_select: dropping them shifts the rest.
    new += [
        {
            **r,
            "trial_id": f"a{j}",
            "query": stranger,
            "weight": 0.5,
            "n_select": 1,
            "chosen": list(r["chosen"][:1]),
        }
        for j, r in enumerate(base[4:6])
    ]
    new += [{**r, "trial_id": f"w{j}", "query": stranger, "split": "test"} for j, r in enumerate(base[:2])]
    append_trial_rows(ws, new)
    return ws.read("similarity_trials", dataset="toy").to_pandas()


# ---- which units: the filters by dataset, checkpoint and VL model --------------------------------
@pytest.fixture(scope="module")
def two_datasets(factory_template, tmp_path_factory):
    """The factory workspace plus: images of dataset `other`; checkpoint ck7 of `toy` without
    features or metrics; ck8 of `other` with (ck0's) features and metrics, trials and an
    embedding; ck9 of `other` with nothing; VL model vl-other of `other`, without
    primitives; concept labels of `toy` only."""
    root = copy_ws(factory_template, tmp_path_factory.mktemp("two") / "ws")
    ws = Workspace(root)
    img = ws.read("images")
    df = img.to_pandas()
    other = df.head(24).assign(image_id=[f"other-{i}" for i in range(24)], dataset="other")
    ws.write("images", pa.Table.from_pandas(pd.concat([df, other]), schema=img.schema, preserve_index=False))
    ck = ws.read("checkpoints")
    c = ck.to_pandas()
    new = pd.concat(
        [
            c.head(1).assign(checkpoint_id=i, dataset=d, run=None)
            for i, d in (("ck7", "toy"), ("ck8", "other"), ("ck9", "other"))
        ]
    )
    ws.write("checkpoints", pa.Table.from_pandas(pd.concat([c, new]), schema=ck.schema, preserve_index=False))
    ren = {f"toy-{i:04d}": f"other-{i}" for i in range(24)}
    f = ws.read("features", checkpoint_id="ck0").drop_columns(["checkpoint_id"]).to_pandas()
    f = f[f["image_id"].isin(ren)].assign(image_id=lambda d: d["image_id"].map(ren))
    ws.write("features", pa.Table.from_pandas(f, preserve_index=False), checkpoint_id="ck8")
    for table, part in (("checkpoint_metrics", {"k": 4}),):
        t = ws.read(table, checkpoint_id="ck0", **part).drop_columns(["checkpoint_id", *part])
        ws.write(table, t, checkpoint_id="ck8", **part)
    t = ws.read("similarity_trials", dataset="toy").to_pandas().drop(columns="dataset")
    t = t.assign(query=t["query"].map(ren), references=t["references"].map(lambda r: [ren[i] for i in r]))
    t = t.assign(chosen=t["chosen"].map(lambda r: [ren[i] for i in r]))
    t = t.astype(object).where(t.notna(), None)
    ws.append(
        "similarity_trials",
        pa.Table.from_pylist(
            t.to_dict("records"), schema=schema.arrow_schema("similarity_trials", partition=False)
        ),
        dataset="other",
    )
    e = ws.read("psych_embedding", dataset="toy").drop_columns(["dataset"]).to_pandas()
    e = e.assign(image_id=e["image_id"].map(ren))
    ws.write(
        "psych_embedding",
        pa.Table.from_pandas(
            e, schema=schema.arrow_schema("psych_embedding", partition=False), preserve_index=False
        ),
        dataset="other",
    )
    vl = ws.read("vl_models")
    v = vl.to_pandas()
    v = pd.concat([v, v.assign(vl_model_id="vl-other", dataset="other")])
    ws.write("vl_models", pa.Table.from_pandas(v, schema=vl.schema, preserve_index=False))
    return root
