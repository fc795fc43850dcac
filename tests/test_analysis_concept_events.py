"""The `concept_events` analysis (conceptlens/analysis/concept_events.py): cluster labels, step purity
and p-values come from the rows that should be used, and a new clustering of the run makes its
events due. Each test is written against a data-flow bug (issue 29; tools/dataflow_mutants.py): a
filter not applied, the first element used for every one, two arguments swapped, a sort the wrong
way."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from conceptlens.analysis import runner
from conceptlens.metrics.scores import purity
from conceptlens.workspace import Workspace
from tests.conftest import copy_ws
from tests.helpers_comparisons import replace_partition

# ---- concept_events ----------------------------------------------------------------------------
EVENT_OPTS = {"event_share": 0.2, "event_images": 3, "event_alpha": 0.01}


def _assign(ids, clusters) -> pd.DataFrame:
    return pd.DataFrame({"image_id": list(ids), "cluster": np.asarray(clusters, np.int64)})


def test_cluster_labels_use_each_clusters_labelled_images_only():
    """Purity per cluster from the labels of its own images, unlabelled images left out.
    Catches the label filter dropped (NaN among the labels) and every cluster measured on
    the first cluster's images."""
    from conceptlens.analysis.concept_events import cluster_labels

    images = pd.DataFrame(
        {
            "image_id": [f"i{j}" for j in range(12)],
            "label": pd.array([0, 0, 0, 1, None, None, 1, 1, 2, 2, 0, None], dtype="Int64"),
            "label_name": ["a", "a", "a", "b", None, None, "b", "b", "c", "c", "a", None],
        }
    )
    assign = _assign(images["image_id"], [0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1])
    got = cluster_labels(assign, images)
    assert sorted(got) == [0, 1]
    for c, labels, top in ((0, [0, 0, 0, 1], "a"), (1, [1, 1, 2, 2, 0], "b")):
        p, _, share = purity(np.array(labels), 3)
        assert got[c][0] == pytest.approx(p)
        assert got[c][1] == top
        assert got[c][2] == pytest.approx(share)


def test_step_purity_counts_the_images_both_clusterings_share():
    """Images only one side clusters are left out of the step: a before cluster's purity is
    that of its shared images. Catches either side's shared-image filter dropped."""
    from conceptlens.analysis.concept_events import step_rows

    ids = [f"i{j:02d}" for j in range(40)]
    labels = np.array([0] * 20 + [1] * 20)
    images = pd.DataFrame({"image_id": ids, "label": labels, "label_name": np.where(labels == 0, "a", "b")})
    # Images 0..19 (label 0) and 30..39 (label 1) are clustered on both sides, 0 and 1;
    # images 20..29 (label 1) only on one side, in cluster 0.
    extra = _assign(ids, [0] * 30 + [1] * 10)
    shared = _assign(ids[:20] + ids[30:], [0] * 20 + [1] * 10)
    for before, after in ((extra, shared), (shared, extra)):
        rows = pd.DataFrame(step_rows(before, after, images, EVENT_OPTS))
        assert set(rows["kind"]) == {"continuation"}
        assert set(rows["n_shared"]) == {30}
        for side in ("before", "after"):
            r = rows[(rows["side"] == side) & (rows["cluster"] == 0)].iloc[0]
            assert r["purity"] == pytest.approx(1.0) and r["top_label_share"] == pytest.approx(1.0)
            assert r["size"] == 20


def test_each_event_carries_the_p_value_of_its_own_links():
    """Three continuations of clusters of 10, 20 and 30 images of 60: each event's p-value
    is its own link's hypergeometric tail, 1 / C(60, m). Catches the p-value taken over
    every significant link of the step (the same, largest, p for all)."""
    from conceptlens.analysis.concept_events import step_rows

    ids = [f"i{j:02d}" for j in range(60)]
    cl = np.repeat([0, 1, 2], [10, 20, 30])
    images = pd.DataFrame({"image_id": ids, "label": np.zeros(60, int), "label_name": "a"})
    rows = pd.DataFrame(step_rows(_assign(ids, cl), _assign(ids, cl), images, EVENT_OPTS))
    assert len(rows) == 6
    for c, m in ((0, 10), (1, 20), (2, 30)):
        p = rows.loc[rows["cluster"] == c, "p_value"]
        assert p.to_numpy() == pytest.approx([1 / math.comb(60, m)] * 2, rel=1e-6)


@pytest.fixture(scope="module")
def events_ws(factory_template, tmp_path_factory):
    """The factory's run ck2 -> ck1 (k = 4), plus images of another dataset with three more
    labels, and one cluster of ck1 whose caption is null."""
    root = copy_ws(factory_template, tmp_path_factory.mktemp("ev") / "ws")
    ws = Workspace(root)
    img = ws.read("images")
    df = img.to_pandas()
    other = df.head(6).assign(
        image_id=[f"other-{i}" for i in range(6)], dataset="other", label=[3, 4, 5, 3, 4, 5], label_name="zz"
    )
    ws.write("images", pa.Table.from_pandas(pd.concat([df, other]), schema=img.schema, preserve_index=False))
    replace_partition(
        ws,
        "cluster_captions",
        lambda d: d.assign(caption=[None, *d["caption"].iloc[1:]]),
        checkpoint_id="ck1",
        k=4,
    )
    runner.run(root, "concept_events", with_dependencies=False, progress_bars=False)
    return root


def test_events_purity_counts_the_datasets_own_classes_and_null_captions_stay_null(events_ws):
    """Every row's purity is that of its cluster's images among the dataset's 3 classes
    (another dataset's labels are not classes of this one); a null caption stays null (not
    the text 'None'). Catches the dataset filter and the caption filter dropped."""
    ws = Workspace(events_ws)
    t = ws.read("concept_events", dataset="toy", run="toy-run").to_pandas()
    img = ws.read("images").to_pandas().set_index("image_id")
    assert len(t) > 0
    for (cid, _side), g in t.groupby(
        [np.where(t["side"] == "before", t["checkpoint_from"], t["checkpoint_to"]), "side"]
    ):
        cl = ws.read("clusters", columns=["image_id", "cluster"], checkpoint_id=cid, k=4).to_pandas()
        for c, r in g.drop_duplicates("cluster").set_index("cluster").iterrows():
            lab = img.loc[cl.loc[cl["cluster"] == c, "image_id"], "label"].to_numpy(np.int64)
            assert r["purity"] == pytest.approx(purity(lab, 3)[0]), (cid, c)
    ck1 = t[(t["checkpoint_to"] == "ck1") & (t["side"] == "after")]
    assert ck1.loc[ck1["cluster"] == 0, "caption"].isna().all() and len(ck1[ck1["cluster"] == 0])
    assert ck1["caption"].notna().any()
    assert not set(t["caption"].dropna()) & {"None", "nan"}


def test_reclustering_a_later_checkpoint_of_the_run_makes_events_due(events_ws, tmp_path):
    """ck1, the second checkpoint of the run, re-clustered: the unit is due. Catches a
    fingerprint over the first checkpoint's files only (for every checkpoint)."""
    root = copy_ws(events_ws, tmp_path / "ws")
    assert runner.missing(root, ["concept_events"])["concept_events"] == []
    replace_partition(
        Workspace(root),
        "clusters",
        lambda d: d.assign(cluster=np.roll(d["cluster"].to_numpy(), 1)),
        checkpoint_id="ck1",
        k=4,
    )
    assert runner.missing(root, ["concept_events"])["concept_events"] != []
