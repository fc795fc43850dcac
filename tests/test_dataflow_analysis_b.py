"""Data flow of seven analyses (issue 29): comparisons, compmap, concept_events, concepts,
convergence, learning_curves, similarity. Each test is written against a data-flow bug the
analysis' own tests let through (tools/dataflow_mutants.py): a filter not applied, the
first element used for every one, two arguments swapped, a sort the wrong way. Values are
checked against what a direct computation gives on the rows that should be used.

Tiny inputs only: direct calls on hand-built frames, or tests/factory.py's 48-image
workspace (copied with hard links), so the file runs in seconds."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from conceptlens import rng as R
from conceptlens import schema
from conceptlens.analysis import runner
from conceptlens.analysis.base import EVERYTHING, Scope
from conceptlens.analysis.common import Context
from conceptlens.metrics.scores import purity
from conceptlens.workspace import Workspace
from tests.conftest import copy_ws
from tests.test_dataflow_comparisons import replace_partition

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


# ---- learning_curves ---------------------------------------------------------------------------
CURVE_OPTS = {"curve_boot": 20}


@pytest.fixture(scope="module")
def curves_ws(tmp_path_factory):
    """factor_workspace (120 images, label = shape x colour) as one run of three checkpoints,
    clustered at k = 4 by shape and colour parity; a factor `site` missing on a third of the
    images; two saved selections: `sel-a` saved twice (the later save other images) and
    `sel-b`, which holds an image no checkpoint has features for."""
    from tests.factory import factor_workspace

    ws = factor_workspace(tmp_path_factory.mktemp("curves") / "ws", n=120)
    ck = ws.read("checkpoints").to_pandas().assign(run="toy-run")
    ws.write("checkpoints", pa.Table.from_pandas(ck, preserve_index=False))
    img = ws.read("images").to_pandas()
    site = np.array(["north", "south", None], dtype=object)[np.arange(len(img)) % 3]
    ws.write("images", pa.Table.from_pandas(img.assign(site=site), preserve_index=False))
    ids = img["image_id"].tolist()
    cl = (img["label"].to_numpy() % 4).astype(np.int64)
    for c in ck["checkpoint_id"]:
        ws.write(
            "clusters",
            pa.table(
                {"image_id": ids, "cluster": cl, "distance": np.zeros(len(ids))},
                schema=schema.arrow_schema("clusters", partition=False),
            ),
            checkpoint_id=c,
            k=4,
        )
    saves = [
        ("sel-a", ids[:30], "2026-01-01"),
        ("sel-b", ids[40:70] + ["img-9999"], "2026-01-02"),
        ("sel-a", ids[60:100], "2026-01-03"),  # the latest save of sel-a
    ]
    ws.append(
        "selections",
        pa.Table.from_pylist(
            [
                {
                    "name": n,
                    "image_ids": s,
                    "n_images": len(s),
                    "origin": "test",
                    "checkpoint_id": None,
                    "created": pd.Timestamp(t, tz="UTC"),
                }
                for n, s, t in saves
            ],
            schema=schema.arrow_schema("selections", partition=False),
        ),
        dataset="toy",
    )
    runner.run(ws.root, "learning_curves", CURVE_OPTS, with_dependencies=False, progress_bars=False)
    return ws


def _curves(ws) -> pd.DataFrame:
    return ws.read("learning_curves", dataset="toy", run="toy-run").to_pandas()


def test_each_saved_selection_is_scored_on_its_latest_save(curves_ws):
    """Every checkpoint has a row per saved selection; `sel-a`'s AUC is the learnability of
    its latest save's images (Scorer on those rows, computed here), `sel-b` is scored
    without the image the checkpoint lacks. Catches the older save used, only the first
    selection scored, a selection image missing from the checkpoint failing the run."""
    from conceptlens.analysis.learning_curves import SELECTION
    from conceptlens.metrics import selection as S

    t = _curves(curves_ws)
    sel = t[t["factor"] == SELECTION]
    assert sorted(zip(sel["checkpoint_id"], sel["value"])) == sorted(
        (c, n) for c in ("toy-ckpt0", "toy-ckpt1", "toy-ckpt2") for n in ("sel-a", "sel-b")
    )
    ctx = Context(curves_ws, progress=False)
    ids, Xn = ctx.normalized("toy-ckpt1")
    codes = ctx.image_meta(ids)["label"].astype("Int64").fillna(-1).to_numpy(np.int64)
    row_of = {i: n for n, i in enumerate(ids)}
    latest = [row_of[i] for i in curves_ws.read("images")["image_id"].to_pylist()[60:100]]
    out = S.Scorer(S.Population(Xn, codes), latest, n_null=0, nulls=(), seed=0).run(bootstrap=20)
    learn = next(r for r in out["scores"] if r["score"] == "learnability")
    got = sel[(sel["checkpoint_id"] == "toy-ckpt1") & (sel["value"] == "sel-a")].iloc[0]
    assert got["auc"] == pytest.approx(min(1.0, max(0.0, learn["value"])))
    assert got["n_positive"] == out["evaluated_members"]
    # sel-a's best cluster, by hand: the cluster of largest F1 against its 40 images.
    clusters = curves_ws.read("clusters", checkpoint_id="toy-ckpt1", k=4).to_pandas().set_index("image_id")
    members = set(curves_ws.read("images")["image_id"].to_pylist()[60:100])
    f1 = {}
    for c, g in clusters.groupby("cluster"):
        inter = len(members & set(g.index))
        f1[c] = (2 * inter / (len(g) + len(members)), inter / len(g), inter / len(members))
    best = max(sorted(f1), key=lambda c: f1[c][0])
    assert (got["best_cluster"], got["cluster_purity"], got["cluster_recall"]) == pytest.approx(
        (best, f1[best][1], f1[best][2])
    )


def test_a_factor_value_is_matched_to_the_cluster_of_largest_f1(curves_ws):
    """Each factor value's best cluster, purity (precision) and recall, by hand; the factor
    with missing values gets rows for its known values only. Catches the clusters and the
    value indicator swapped, and missing values taken for a class. (A real bug found here:
    a factor with missing values, on clustered checkpoints, stopped the analysis with
    "boolean value of NA is ambiguous" where the value's images were marked.)"""
    t = _curves(curves_ws)
    img = curves_ws.read("images").to_pandas().set_index("image_id")
    clusters = curves_ws.read("clusters", checkpoint_id="toy-ckpt0", k=4).to_pandas()
    clusters = clusters.assign(shape=img.loc[clusters["image_id"], "shape"].to_numpy())
    rows = t[(t["checkpoint_id"] == "toy-ckpt0") & (t["factor"] == "shape") & t["value"].notna()]
    assert len(rows) == 3
    for _, r in rows.iterrows():
        has = clusters["shape"] == r["value"]
        inter = clusters[has].groupby("cluster").size().reindex(range(4), fill_value=0)
        size = clusters.groupby("cluster").size()
        f1 = 2 * inter / (size + has.sum())
        best = int(f1.idxmax())
        assert r["best_cluster"] == best
        assert r["cluster_purity"] == pytest.approx(inter[best] / size[best])
        assert r["cluster_recall"] == pytest.approx(inter[best] / has.sum())
    site = t[(t["checkpoint_id"] == "toy-ckpt0") & (t["factor"] == "site")]
    assert sorted(site["value"].dropna()) == ["north", "south"]
    whole = site[site["value"].isna()].iloc[0]
    assert whole["n_test"] == int(((img["split"] == "test") & img["site"].notna()).sum())


def test_new_features_of_a_later_checkpoint_make_the_curves_due(curves_ws, tmp_path):
    """The fingerprint covers every checkpoint's features, not the first one's again."""
    import shutil

    root = shutil.copytree(curves_ws.root, tmp_path / "ws")
    assert runner.missing(root, ["learning_curves"])["learning_curves"] == []
    replace_partition(Workspace(root), "features", lambda d: d.iloc[::-1], checkpoint_id="toy-ckpt2")
    assert runner.missing(root, ["learning_curves"])["learning_curves"] != []


# ---- convergence -------------------------------------------------------------------------------
CONV_OPTS = {"rounds": 2, "convergence_members": 2, "max_epochs": 2}


def _append_trials(ws: Workspace, rows: list[dict]) -> None:
    ws.append(
        "similarity_trials",
        pa.Table.from_pylist(rows, schema=schema.arrow_schema("similarity_trials", partition=False)),
        dataset="toy",
    )


def _spy_convergence(monkeypatch, root):
    """Run convergence recording what each fit and each coarse loss is given."""
    from conceptlens.embedding import active, psych

    fits, losses = [], []
    real_fit, real_loss = psych.fit_embedding, active.coarse_grained_loss

    def fit(share, n, dim, **kw):
        fits.append((share, kw["seed"], kw["member"]))
        return real_fit(share, n, dim, **kw)

    def loss(ens, stim, sel, beta):
        losses.append((np.array(stim), np.array(sel)))
        return real_loss(ens, stim, sel, beta)

    monkeypatch.setattr(psych, "fit_embedding", fit)
    monkeypatch.setattr(active, "coarse_grained_loss", loss)
    runner.run(root, "convergence", CONV_OPTS, with_dependencies=False, progress_bars=False)
    return fits, losses


def _stranger_trials(ws: Workspace) -> pd.DataFrame:
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
    _append_trials(ws, new)
    return ws.read("similarity_trials", dataset="toy").to_pandas()


def test_convergence_fits_known_non_catch_train_trials_in_order_and_scores_the_test_ones(
    factory_template, tmp_path, monkeypatch
):
    """Each share is the first trials, in trial-id order, of the non-catch `train` trials
    whose images are all embedded; the coarse loss is measured on the `test` ones; each
    member of a share has its own seed. Catches catch trials or trials of unknown images
    fitted or measured (any of the filters and their aligned weights dropped), the shares
    taken in reverse collection order, and every member fitted with the first's seed."""
    from conceptlens.analysis.common import encode
    from conceptlens.embedding.psych import read_embedding

    root = copy_ws(factory_template, tmp_path / "ws")
    ws = Workspace(root)
    t = _stranger_trials(ws)
    fits, losses = _spy_convergence(monkeypatch, root)
    index = {s: k for k, s in enumerate(read_embedding(ws, "toy")[0])}
    ok = ~t["is_catch"]
    train = t[ok & (t["split"] == "train")].sort_values("trial_id")
    stim, sel = encode(train, index)
    train, stim, sel = train[stim[:, 0] >= 0], stim[stim[:, 0] >= 0], sel[stim[:, 0] >= 0]
    assert len(fits) == 4
    assert len({f[1] for f in fits}) == 4  # four members, four seeds
    ends = [round(len(stim) / 2), len(stim)]
    # each member's seed derived from (--seed 0, "convergence.member_fit", [the unit, r, m])
    unit = {"dataset": "toy"}
    for (share, seed, member), (r, m) in zip(fits, [(0, 0), (0, 1), (1, 0), (1, 1)]):
        assert (seed, member) == (R.int_seed(0, "convergence.member_fit", [unit, r, m]), m)
        np.testing.assert_array_equal(share.stimulus_set, stim[: ends[r]])
        np.testing.assert_array_equal(share.n_select, sel[: ends[r]])
        np.testing.assert_array_equal(share.weight, train["weight"].to_numpy(float)[: ends[r]])
    test = t[ok & (t["split"] == "test")].sort_values("trial_id")
    cstim, csel = encode(test, index)
    for s, c in losses:
        np.testing.assert_array_equal(s, cstim[cstim[:, 0] >= 0])
        np.testing.assert_array_equal(c, csel[cstim[:, 0] >= 0])


def test_without_test_trials_the_coarse_set_is_held_out_of_every_share(
    factory_template, tmp_path, monkeypatch
):
    """No `test` trial: a seeded tenth of the train trials is the coarse set, and no share
    fits any of them. Catches the held-out tenth left in the train trials."""
    root = copy_ws(factory_template, tmp_path / "ws")
    ws = Workspace(root)
    t = ws.read("similarity_trials", dataset="toy").drop_columns(["dataset"]).to_pandas()
    import shutil

    shutil.rmtree(ws.partition_dir("similarity_trials", dataset="toy"))  # append-only: start again
    _append_trials(ws, t.assign(split="train").astype(object).where(t.notna(), None).to_dict("records"))
    fits, losses = _spy_convergence(monkeypatch, root)
    coarse = {tuple(r) for r in losses[0][0]}
    assert 0 < len(coarse) < len(t)
    last = fits[-1][0].stimulus_set
    assert len(last) + len(losses[0][0]) == len(t)
    assert not coarse & {tuple(r) for r in last}


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


def _units(root, name, checkpoint=None, **opts) -> list[dict]:
    from conceptlens.analysis import by_name

    ctx = Context(Workspace(root), progress=False)
    return [u.partition for u in by_name()[name].units(ctx, opts, Scope(checkpoint=checkpoint))]


def test_units_are_those_of_the_datasets_with_inputs(two_datasets):
    """One unit per dataset (VL model) that has the analysis' inputs; with a checkpoint
    given (`--checkpoint`), the units of its dataset only. Catches each of these filters
    dropped: another dataset's unit run, or a dataset without inputs given a unit."""
    assert _units(two_datasets, "comparisons") == [{"dataset": "other"}, {"dataset": "toy"}]
    assert _units(two_datasets, "comparisons", checkpoint="ck0") == [{"dataset": "toy"}]
    assert _units(two_datasets, "comparisons", checkpoint="ck8") == [{"dataset": "other"}]
    assert _units(two_datasets, "comparisons", checkpoint="ck7") == []  # not measured
    assert _units(two_datasets, "comparisons", checkpoint="ck9") == []
    for name in ("similarity", "convergence"):
        assert _units(two_datasets, name) == [{"dataset": "other"}, {"dataset": "toy"}]
        assert _units(two_datasets, name, checkpoint="ck1") == [{"dataset": "toy"}]
        assert _units(two_datasets, name, checkpoint="ck9") == [{"dataset": "other"}]
    assert _units(two_datasets, "compmap") == [{"vl_model": "vl-toy"}]  # `other` has no primitives
    assert _units(two_datasets, "compmap", vl=["vl-toy"]) == [{"vl_model": "vl-toy"}]
    assert _units(two_datasets, "compmap", checkpoint="ck9") == []
    assert [u["checkpoint_id"] for u in _units(two_datasets, "concepts")] == ["ck0", "ck1", "ck2"]


def test_a_datasets_checkpoints_are_its_own(two_datasets):
    """comparisons compares every checkpoint of the dataset; similarity scores those with
    features; neither takes another dataset's."""
    from conceptlens.analysis import comparisons, compmap, similarity

    ctx = Context(Workspace(two_datasets), progress=False)
    assert comparisons._checkpoints_of(ctx, "toy") == ["ck0", "ck1", "ck2", "ck7"]
    assert similarity._checkpoints_of(ctx, "toy") == ["ck0", "ck1", "ck2"]
    assert similarity._checkpoints_of(ctx, "other") == ["ck8"]
    assert list(compmap._vl_rows(ctx, {"vl": ["vl-other"]}, EVERYTHING)["vl_model_id"]) == ["vl-other"]
    assert list(compmap._vl_rows(ctx, {}, Scope(checkpoint="ck8"))["vl_model_id"]) == ["vl-other"]
    assert list(compmap._vl_rows(ctx, {}, EVERYTHING)["vl_model_id"]) == ["vl-other", "vl-toy"]


# ---- comparisons: CLID over the comparable checkpoints -------------------------------------------
def test_clid_leaves_out_and_names_only_the_checkpoints_of_other_images():
    """Four checkpoints at one k, one (c) embedded other images, no baseline predictor
    columns given: the note names c alone, c's scores are null, the others' CLID is
    z(CL) + z(ID) over the three comparable ones. Catches the note listing every
    checkpoint and a missing predictor column added for the first predictor only."""
    from conceptlens.analysis.comparisons import clid_and_correlations

    m = pd.DataFrame(
        {
            "checkpoint_id": ["a", "b", "c", "d"],
            "k": 4,
            "image_set": ["s", "s", "t", "s"],
            "n_images": [48, 48, 40, 48],
            "cl": [0.2, 0.5, 0.9, 0.4],
            "id": [3.0, 5.0, 1.0, 9.0],
            "knn_acc": [0.6, 0.7, 0.1, 0.9],
        }
    )
    for c in schema.PREDICTORS:
        if c not in m:
            m[c] = np.linspace(0.1, 0.4, 4)
    from conceptlens.analysis.comparisons import BASELINE_COLUMNS

    m = m.drop(columns=[c for c in BASELINE_COLUMNS if c in m])
    scores, corr, notes = clid_and_correlations(m, seed=0)
    assert len(notes) == 1 and "c embedded other images" in notes[0] and "a," not in notes[0]
    s = pd.DataFrame(scores).set_index("checkpoint_id")
    assert s.loc["c"].isna()[["clid", "wclid", "wclid_loo"]].all()
    keep = m[m["checkpoint_id"] != "c"]
    z = lambda v: (v - v.mean()) / v.std(ddof=0)  # noqa: E731
    want = (z(keep["cl"]) + z(keep["id"])).to_numpy()
    assert s.loc[["a", "b", "d"], "clid"].to_numpy(float) == pytest.approx(want)
    assert {r["predictor"] for r in corr} == set(schema.PREDICTORS)


# ---- similarity: what a checkpoint is scored on --------------------------------------------------
def test_a_checkpoint_is_scored_on_the_trials_and_images_it_has_features_for(factory_copy):
    """ck0 lacks the features of one embedded image, and another image has no label: the
    triplet accuracy is over the trials whose images all have features (counted here
    triplet by triplet), RSA over the embedded images with features, per-label rows only
    for real labels. Catches the trials or images without features kept (or their weights
    misaligned), and an unlabelled image making a label group."""
    from conceptlens.analysis.common import read_trials
    from conceptlens.analysis.similarity import Scorer
    from conceptlens.embedding.psych import read_embedding

    ws = Workspace(factory_copy)
    embedded, _ = read_embedding(ws, "toy")
    trials = ws.read("similarity_trials", dataset="toy").to_pandas()
    gone = trials["query"].iloc[0]
    unlabelled = next(i for i in embedded if i != gone)
    img = ws.read("images")
    df = img.to_pandas()
    df.loc[df["image_id"] == unlabelled, ["label", "label_name"]] = None
    ws.write("images", pa.Table.from_pandas(df, schema=img.schema, preserve_index=False))
    ctx = Context(ws, progress=False)
    ids, X = ctx.features("ck0")
    keep = ids != gone
    ids, X = ids[keep], X[keep]
    opts = {"seed": 0, "n_boot": 20, "rsa_max": 1000, "beta": 10.0}
    rows = pd.DataFrame(Scorer(ctx, "toy", read_trials(ctx, "toy"), opts).score(ids, X, "ck0"))

    pos = {s: k for k, s in enumerate(ids)}
    num = den = used = 0
    for r in trials[~trials["is_catch"]].itertuples():
        shown = [r.query, *r.references]
        if any(s not in pos for s in shown):
            continue
        d = {s: float(np.linalg.norm(X[pos[s]] - X[pos[r.query]])) for s in r.references}
        chosen = list(r.chosen)
        rest = [s for s in r.references if s not in chosen]
        for i, a in enumerate(chosen):
            for b in chosen[i + 1 :] + rest:
                num += r.weight * (1.0 if d[a] < d[b] else 0.5 if d[a] == d[b] else 0.0)
                den += r.weight
        used += 1
    assert 0 < used < (~trials["is_catch"]).sum()
    overall = rows[(rows["metric"] == "triplet_accuracy") & (rows["distance"] == "l2") & rows["label"].isna()]
    assert overall["value"].iloc[0] == pytest.approx(num / den)
    assert overall["n_units"].iloc[0] == used
    rsa = rows[(rows["metric"] == "rsa") & rows["label"].isna()]
    assert set(rsa["n_units"]) == {len([s for s in embedded if s in pos])}
    assert set(rows["label"].dropna()) <= {0, 1, 2}


def test_pairs_are_compared_within_each_k(factory_copy):
    """ck0 also clustered at k = 3, alone: the pairs at k = 4 are compared, none at k = 3
    (no other checkpoint has k = 3). Catches a pair's second (or first) checkpoint taken
    from every k."""
    ws = Workspace(factory_copy)
    for table in ("clusters", "checkpoint_metrics"):
        t = ws.read(table, checkpoint_id="ck0", k=4).drop_columns(["checkpoint_id", "k"])
        if table == "clusters":
            i = t.schema.get_field_index("cluster")
            t = t.set_column(i, t.schema.field(i), pa.array(np.arange(len(t)) % 3, t.schema.field(i).type))
        ws.write(table, t, checkpoint_id="ck0", k=3)
    runner.run(factory_copy, "comparisons", with_dependencies=False, progress_bars=False)
    s = ws.read("clustering_similarity", dataset="toy").to_pandas()
    assert sorted(zip(s["k"], s["checkpoint_a"], s["checkpoint_b"])) == [
        (4, "ck0", "ck1"),
        (4, "ck0", "ck2"),
        (4, "ck1", "ck2"),
    ]


def test_round_shares_count_only_the_trials_fitted(factory_copy):
    """Trials before the rounds (two of them showing an image the embedding lacks) and one
    study round: the first share ends after the known trials before the rounds. Catches
    the rounds read from every train trial, the dropped ones included."""
    ws = Workspace(factory_copy)
    t = _stranger_trials(ws)
    fitted = t[~t["is_catch"] & (t["split"] == "train")]
    again = fitted[fitted["trial_id"].str.startswith("t")].head(10).astype(object)
    again = again.assign(trial_id="r0." + again["trial_id"], round=0).drop(columns="dataset")
    _append_trials(ws, again.where(again.notna(), None).to_dict("records"))
    runner.run(factory_copy, "convergence", CONV_OPTS, with_dependencies=False, progress_bars=False)
    c = ws.read("similarity_convergence", dataset="toy").to_pandas().sort_values("round")
    known = len(fitted) - 2  # a0 and a1 show the stranger
    assert list(c["n_trials"]) == [known, known + 10]
