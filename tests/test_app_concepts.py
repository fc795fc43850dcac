"""AppTest of the Concepts page on an analysed concept workspace (tests/concepts_factory.py):
every choice in the URL, the heatmaps on one colour scale with the concepts' names, the
niches outlined at the chosen beta, the numbers the views compute, and the page's messages
when a workspace has no concepts or no scores yet."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.io
import pytest

from conceptlens.db import WorkspaceDB
from conceptlens.views import concepts as V
from tests.concepts_factory import TOY_CONCEPTS, concept_workspace
from tests.test_app import assert_clean, open_app, plain

PAGE = "pages/concepts.py"


@pytest.fixture(scope="module")
def cws(tmp_path_factory):
    from conceptlens.analysis import runner

    ws = concept_workspace(tmp_path_factory.mktemp("cqa") / "ws", n=300)
    runner.run(ws.root, "concepts", {"concept_seeds": 2}, progress_bars=False, with_dependencies=False)
    return ws.root


def figures(at) -> list:
    return [plotly.io.from_json(c.proto.spec) for c in at.get("plotly_chart")]


def select(at, label):
    return next(s for s in at.selectbox if s.label == label)


DEEP = {"family": "tabular_toy", "level": "0.75", "method": "vae", "seed": "vae-toy-d0.75-s0", "beta": "0.3"}


def _array(value) -> np.ndarray:
    """A figure's array as sent to the browser (typed arrays travel as base64)."""
    if isinstance(value, dict) and "bdata" in value:
        import base64

        flat = np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"]).astype(float)
        return flat.reshape([int(n) for n in str(value.get("shape", len(flat))).split(",")])
    return np.asarray(value, dtype=float)


def test_deep_link_restores_every_choice_and_draws_every_figure(monkeypatch, cws):
    at = open_app(monkeypatch, cws, PAGE, query=DEEP)
    assert_clean(at)
    assert not at.warning, [w.value for w in at.warning]
    assert {k: at.query_params[k] for k in DEEP} == DEEP
    assert select(at, "Method").value == "vae" and select(at, "Dependency (delta)").value == 0.75
    assert [h.value for h in at.header] == [
        "Purity matrices",
        "Impurity against dependency",
        "Concept niches",
        "Scores",
    ]
    purity, sweep, niches, curves = figures(at)
    # Three heatmaps on one colour scale, concept names on their axes.
    heat = [t for t in purity.data if t.type == "heatmap"]
    assert len(heat) == 3 and {t.coloraxis for t in heat} == {"coloraxis"}
    assert purity.layout.coloraxis.cmin == -1 and purity.layout.coloraxis.cmax == 1
    # Every panel has the learnt panel's rows; the oracle has none for unaligned concepts.
    assert list(heat[1].x) == list(TOY_CONCEPTS) and list(heat[1].y) == list(heat[0].y)
    oracle = _array(heat[1].z)
    assert not np.isnan(oracle[:3]).any() and np.isnan(oracle[3:]).all()
    # The VAE's latents c0..c2 are aligned to the true concepts; c3..c5 follow unaligned.
    assert list(heat[0].y) == [f"c{i} → {t}" for i, t in enumerate(TOY_CONCEPTS)] + ["c3", "c4", "c5"]
    assert {t.name for t in sweep.data} == {"oracle", "swapped", "vae", "vision"}
    # One outline per concept in a niche at beta = 0.3.
    m = V.niche_matrix(WorkspaceDB(cws), "vae-toy-d0.75-s0", "toy-d0.75", 0.3)
    assert len(niches.layout.shapes) == int(m["in_niche"].sum()) > 0
    assert {t.name for t in curves.data} >= {"oracle", "vae"}
    assert len(at.dataframe) == 1


def test_scores_shown_are_the_analysis_means_with_intervals(monkeypatch, cws):
    at = open_app(monkeypatch, cws, PAGE, query={**DEEP, "method": "swapped", "seed": "swapped-toy-d0.75-s0"})
    assert_clean(at)
    s = pd.read_parquet(cws / "concept_scores" / "checkpoint_id=swapped-toy-d0.75-s0")
    from conceptlens.metrics.concepts import mean_interval

    m, lo, hi = mean_interval(s["ois"])
    lo, hi = max(lo, 0.0), min(hi, 2.0)  # OIS lies in [0, 2]
    assert next(x for x in at.metric if x.label == "OIS").value == f"{m:.3f} [{lo:.3f}, {hi:.3f}]"
    table = at.dataframe[0].value
    row = table.set_index("checkpoint_id").loc["swapped-toy-d0.75-s0"]
    assert row["ois"] == pytest.approx(m) and row["ois_lo"] == pytest.approx(lo)
    assert set(table["level"]) == {0.0, 0.75} and len(table) == 8


def test_choosing_another_method_updates_the_url_and_the_scores(monkeypatch, cws):
    at = open_app(monkeypatch, cws, PAGE, query={"family": "tabular_toy", "level": "0.0"})
    assert_clean(at)
    before = next(x for x in at.metric if x.label == "OIS").value
    select(at, "Method").select("swapped").run()
    assert_clean(at)
    # The method's first seed is its default: left out of the link.
    assert at.query_params["method"] == "swapped" and "seed" not in at.query_params
    assert select(at, "Seed").value == "swapped-toy-d0.00-s0"
    assert next(x for x in at.metric if x.label == "OIS").value != before
    at.slider[0].set_value(0.5).run()
    assert at.query_params["beta"] == "0.5"


def test_a_bad_link_value_warns_as_literal_text(monkeypatch, cws):
    at = open_app(monkeypatch, cws, PAGE, query={"family": "tabular_toy", "method": "**cbm** :red[x]"})
    assert_clean(at)
    shown = plain(at.warning)
    assert "**cbm** :red[x]" in shown and "not available here" in shown
    assert select(at, "Method").value == "oracle"


def test_views_interval_over_training_seeds_when_a_method_has_several(cws, tmp_path):
    """A second VAE checkpoint at a level: the sweep's interval is then over the two
    checkpoints' means, not over the analysis seeds."""
    import shutil

    root = shutil.copytree(cws, tmp_path / "ws")
    src = root / "concept_scores" / "checkpoint_id=vae-toy-d0.00-s0" / "part-0.parquet"
    s = pd.read_parquet(src)
    db = WorkspaceDB(root)
    one = V.sweep(db, "tabular_toy").set_index(["method", "level", "score"])
    assert one.loc[("vae", 0.0, "ois"), "over"] == "analysis seeds"
    assert one.loc[("vae", 0.0, "ois"), "mean"] == pytest.approx(s["ois"].mean())
    # Register a copy of the checkpoint with shifted scores as a second training seed.
    from conceptlens import schema
    from conceptlens.workspace import Workspace

    ws = Workspace(root)
    ck = ws.read("checkpoints").to_pandas()
    new = ck[ck["checkpoint_id"] == "vae-toy-d0.00-s0"].assign(
        checkpoint_id="vae-toy-d0.00-s1", run="vae-toy-d0.00-s1"
    )
    import pyarrow as pa

    fields = [f for f in schema.arrow_schema("checkpoints") if f.name in ck.columns]
    ws.write(
        "checkpoints",
        pa.Table.from_pandas(
            pd.concat([ck, new])[[f.name for f in fields]], schema=pa.schema(fields), preserve_index=False
        ),
    )
    shifted = s.drop(columns=["checkpoint_id"], errors="ignore").assign(ois=s["ois"] + 0.1)
    ws.write(
        "concept_scores",
        pa.Table.from_pandas(
            shifted, schema=schema.arrow_schema("concept_scores", partition=False), preserve_index=False
        ),
        checkpoint_id="vae-toy-d0.00-s1",
    )
    two = (
        V.sweep(WorkspaceDB(root), "tabular_toy")
        .set_index(["method", "level", "score"])
        .loc[("vae", 0.0, "ois")]
    )
    means = np.array([s["ois"].mean(), s["ois"].mean() + 0.1])
    from scipy import stats

    lo, hi = stats.t.interval(0.95, 1, loc=means.mean(), scale=stats.sem(means))
    assert two["over"] == "training seeds" and two["n"] == 2
    # The interval is clipped to where OIS can lie.
    assert (two["mean"], two["lo"], two["hi"]) == pytest.approx((means.mean(), max(lo, 0), min(hi, 2)))
    assert lo < 0 < two["lo"] + 1e-12


def test_workspace_without_concepts_shows_the_command(monkeypatch, tmp_path):
    from harness.factory import make_workspace

    ws = make_workspace(tmp_path / "plain", n_images=12, n_checkpoints=1)
    at = open_app(monkeypatch, ws.root, PAGE)
    assert_clean(at)
    assert "no ground-truth concepts" in plain(at.info)
    assert [c.value.splitlines() for c in at.code] == [
        [
            f"conceptlens import concepts --workspace {ws.root} --dataset DATASET FILE",
            f"conceptlens analyze concepts --workspace {ws.root}",
        ]
    ]


def test_concepts_not_scored_yet_show_the_command(monkeypatch, tmp_path):
    ws = concept_workspace(tmp_path / "ws", n=60, levels=(0.5,))
    at = open_app(monkeypatch, ws.root, PAGE)
    assert_clean(at)
    assert "not computed yet" in plain(at.info)
    assert any("conceptlens analyze concepts" in c.value for c in at.code)


@pytest.mark.parametrize(
    "name",
    [
        "concept_labels_unknown_image",
        "concept_datasets_unknown_dependency",
        "purity_auc_above_one",
        "oracle_purity_auc_negative",
        "concept_scores_ois_nan",
        "concept_niches_corr_above_one",
        "niche_scores_negative_size",
    ],
)
def test_a_broken_concept_table_is_named_without_a_traceback(monkeypatch, factory_copy, name):
    from conceptlens.workspace import Workspace
    from tests.malformed import MALFORMATIONS

    m = MALFORMATIONS[name]
    m.apply(Workspace(factory_copy))
    at = open_app(monkeypatch, factory_copy, PAGE)
    assert not at.exception, [e.message for e in at.exception]
    shown = plain(at.error)
    assert m.file in shown and f"table {m.table}" in shown and f"column {m.column}" in shown, shown
