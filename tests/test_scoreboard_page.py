"""The Scoreboard page (pages/scoreboard.py) and its views (conceptlens/views/scoreboard.py)
on a small workspace analysed for real (clustering, projections, dictionary, scoreboard):
every choice in the URL, a concept's members, and the views' numbers against the same
numbers computed another way from the tables' files (pandas, sets, numpy)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.io
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conceptlens import rng as rngs
from conceptlens.analysis.scoreboard import SOURCE_NAMES, SOURCES
from conceptlens.db import WorkspaceDB
from conceptlens.figures.catalog import FIGURES
from conceptlens.views import scoreboard as V
from harness.factory import make_workspace
from tests.test_app import assert_clean, open_app, plain

PAGE = "pages/scoreboard.py"
OPTIONS = {"atoms": 4, "units_max": 8, "directions": 10, "n_null": 20, "bootstrap": 50}


@pytest.fixture(scope="module")
def sb(tmp_path_factory):
    from conceptlens.analysis import runner

    root = tmp_path_factory.mktemp("scoreboard") / "ws"
    make_workspace(root, n_images=96)
    runner.run(root, ["clustering", "projections"], {}, progress_bars=False)
    runner.run(root, ["dictionary", "scoreboard"], OPTIONS, progress_bars=False)
    return root


@pytest.fixture(scope="module")
def db(sb):
    return WorkspaceDB(sb)


def table(root, name: str) -> pd.DataFrame:
    """A table read from its files with pandas (not through the views' SQL)."""
    return pd.read_parquet(root / name)


def ranking(at) -> pd.DataFrame:
    return next(d.value for d in at.dataframe if "rank" in d.value.columns)


def figures(at) -> list:
    return [plotly.io.from_json(c.proto.spec) for c in at.get("plotly_chart")]


# ---- the page ---------------------------------------------------------------------------------------
def test_default_view_renders_every_section_with_defaults_out_of_the_url(monkeypatch, sb, db):
    at = open_app(monkeypatch, sb, PAGE)
    assert_clean(at)
    assert not at.warning, [w.value for w in at.warning]
    assert [h.value for h in at.header] == [
        "Purity against coherence",
        "Ranking",
        "Purity (labels) by source",
        "One concept",
        "Per source",
        "Dictionaries",
    ]
    # Defaults are left out of the URL.
    assert not {"ds", "ckpt", "score", "src", "concept"} & set(at.query_params)
    first = V.checkpoints(db, "toy")["checkpoint_id"].iloc[0]
    assert at.selectbox(key="sb_ckpt").value == first == "ck2"  # the lowest epoch first
    assert at.selectbox(key="sb_score").value == "purity_label"
    assert at.multiselect(key="sb_src").value == V.sources(db, first)
    figs = figures(at)
    assert len(figs) == 4  # scatter, sources, projection, across
    # The ranking: every scored concept of every source.
    assert len(ranking(at)) == len(V.ranked(db, first, "purity_label"))


def test_scatter_legend_follows_sources_declaration(db):
    f = FIGURES["scoreboard_scatter"]
    params = f.resolve(db, {"ckpt": "ck0"})
    fig = f.build(db, params)
    pts = V.scatter_points(db, "ck0")
    names = [t.name for t in fig.data if t.mode == "markers" and t.x is not None and t.x[0] is not None]
    assert names == [s.title for s in SOURCES if s.name in set(pts["source"])]
    # The random-direction band: its edges are the 2.5% and 97.5% of that null, on both axes.
    null = table(db.ws.root, "scoreboard_null")
    d = null[(null["checkpoint_id"] == "ck0") & (null["null"] == "random_directions")].set_index("score")
    rects = [s for s in fig.layout.shapes if s.type == "rect"]
    assert {(r.x0, r.x1) for r in rects if r.xref == "x"} == {
        (d.loc["coherence_random", "lo"], d.loc["coherence_random", "hi"])
    }
    assert {(r.y0, r.y1) for r in rects if r.yref == "y"} == {
        (d.loc["purity_label", "lo"], d.loc["purity_label", "hi"])
    }


URL = {"ckpt": "ck1", "score": "coherence_random", "src": "unit,label", "concept": "label/1"}


def test_every_choice_is_read_from_the_url_and_a_change_is_written_back(monkeypatch, sb):
    at = open_app(monkeypatch, sb, PAGE, query=URL)
    assert_clean(at)
    assert not at.warning, [w.value for w in at.warning]
    assert at.selectbox(key="sb_ckpt").value == "ck1"
    assert at.selectbox(key="sb_score").value == "coherence_random"
    assert at.multiselect(key="sb_src").value == ["unit", "label"]
    assert at.selectbox(key="sb_concept").value == "label/1"
    assert {k: at.query_params[k] for k in URL} == URL
    # Only the chosen sources are ranked.
    assert set(ranking(at)["source"]) == {V.title("unit"), V.title("label")}
    # A changed choice is written back; back at its default it leaves the URL.
    at.selectbox(key="sb_score").set_value("learnability").run()
    assert_clean(at)
    assert at.query_params["score"] == "learnability"
    at.selectbox(key="sb_score").set_value("purity_label").run()
    assert "score" not in at.query_params
    keys = list(V.ranked(WorkspaceDB(sb), "ck1", "purity_label", chosen=["unit", "label"])["key"])
    at.selectbox(key="sb_concept").set_value(keys[-1]).run()
    assert at.query_params["concept"] == keys[-1]
    at.selectbox(key="sb_concept").set_value(keys[0]).run()
    assert "concept" not in at.query_params  # the first ranked: the default
    at.multiselect(key="sb_src").set_value(["label"]).run()
    assert at.query_params["src"] == "label"
    assert at.selectbox(key="sb_concept").value.startswith("label/")


def test_a_link_to_a_missing_choice_warns_and_shows_the_default(monkeypatch, sb):
    at = open_app(monkeypatch, sb, PAGE, query={"ckpt": "no-such", "score": "nope"})
    assert not at.exception
    assert len(at.warning) == 2
    assert at.selectbox(key="sb_ckpt").value == "ck2"


def test_a_chosen_concept_shows_its_members(monkeypatch, sb, db):
    key = "dictionary:convex_nmf/1"
    at = open_app(monkeypatch, sb, PAGE, query={"ckpt": "ck0", "concept": key})
    assert_clean(at)
    mem = table(sb, "scoreboard_members")
    mine = mem[(mem["checkpoint_id"] == "ck0") & (mem["source"] == "dictionary:convex_nmf")]
    mine = mine[mine["concept"] == "1"].sort_values("rank")
    images = at.get("image")
    assert len(images) == 1  # one grid
    assert len(images[0].proto.imgs) == min(len(mine), 24)
    assert f"{len(mine)} member(s)" in plain(at.caption)
    # Its members on the projection: exactly the concept's images highlighted.
    proj = next(f for f in figures(at) if any(str(t.name).startswith("members of") for t in f.data))
    members = next(t for t in proj.data if str(t.name).startswith("members of"))
    assert sorted(np.asarray(members.customdata)[:, 0]) == sorted(mine["image_id"])
    # The view's members: rank order, as the file has them.
    assert list(V.members(db, "ck0", "dictionary:convex_nmf", "1")["image_id"]) == list(mine["image_id"])


def test_the_latex_table_is_captioned_with_workspace_checkpoint_and_n(monkeypatch, sb, db):
    from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage

    from conceptlens.tables import latex_escape

    files = {}
    original = MemoryMediaFileStorage.load_and_get_id

    def record(self, data, mimetype, kind, filename=None):
        files[filename] = data
        return original(self, data, mimetype, kind, filename)

    monkeypatch.setattr(MemoryMediaFileStorage, "load_and_get_id", record)
    at = open_app(monkeypatch, sb, PAGE, query={"ckpt": "ck1"})
    assert_clean(at)
    tex = files["scoreboard-sources-ck1.tex"].decode()
    caption = tex[tex.index("\\caption{") :].splitlines()[0]
    assert "checkpoint ck1" in caption and latex_escape(str(sb)) in caption and "N = 12" in caption
    assert tex.count("\\begin{table}") == 1 and "\\begin{tabular}" in tex and "\\end{table}" in tex
    body = tex[tex.index("\\midrule") : tex.index("\\bottomrule")].strip().splitlines()[1:]
    summary = V.source_summary(db, "ck1")
    assert len(body) == summary["source"].nunique()
    # A value and its interval share a cell, as the booktabs export prints them.
    first = summary[
        (summary["source"] == summary["source"].iloc[0]) & (summary["score"] == "purity_label")
    ].iloc[0]
    assert f"{first['mean']:.3f} [{first['lo']:.3f}, {first['hi']:.3f}]" in body[0]


def test_a_workspace_without_the_scoreboard_shows_the_command(monkeypatch, tmp_path):
    root = tmp_path / "ws"
    make_workspace(root)  # features only
    at = open_app(monkeypatch, root, PAGE)
    assert_clean(at)
    assert at.title[0].value == "Scoreboard"
    assert any("analyze scoreboard" in c.value for c in at.code), [c.value for c in at.code]
    assert not at.get("plotly_chart")


# ---- the views against another computation -------------------------------------------------------
def _scores(root, ckpt, score=None):
    s = table(root, "scoreboard_scores")
    c = table(root, "scoreboard_concepts")
    s = s[s["checkpoint_id"] == ckpt].merge(
        c[(c["checkpoint_id"] == ckpt) & c["scored"]][["source", "concept"]], on=["source", "concept"]
    )
    return s if score is None else s[s["score"] == score]


@pytest.mark.parametrize("ckpt", ["ck0", "ck2"])
def test_source_summary_is_the_groupby_mean_with_its_share_above_the_null(db, sb, ckpt):
    got = V.source_summary(db, ckpt).set_index(["source", "score"])
    s = _scores(sb, ckpt)
    s = s[s["score"].isin(V.MAIN_SCORES) & s["value"].notna()]
    want = s.groupby(["source", "score"])["value"].agg(["mean", "count"])
    assert set(got.index) == set(want.index)
    np.testing.assert_allclose(got.loc[want.index, "mean"], want["mean"], rtol=1e-12)
    assert (got.loc[want.index, "n"] == want["count"]).all()
    null = table(sb, "scoreboard_null")
    line = null[(null["checkpoint_id"] == ckpt) & (null["null"] == "random_directions")].set_index("score")[
        "hi"
    ]
    for (src, score), row in got.iterrows():
        v = s[(s["source"] == src) & (s["score"] == score)]["value"]
        assert row["above"] == pytest.approx((v > line[score]).mean())
        if row["n"] > 1:
            assert row["lo"] <= row["mean"] <= row["hi"]
    # Sources in their declared order.
    order = list(dict.fromkeys(got.reset_index()["source"]))
    assert order == sorted(order, key=SOURCE_NAMES.index)


def test_source_summary_resamples_with_the_units_seed(db, sb):
    n_boot, seed = V.resampling(db, "ck0")
    assert (n_boot, seed) == (OPTIONS["bootstrap"], 0)  # as stored with the unit, not the default 1000
    v = _scores(sb, "ck0", "coherence_random")
    v = v[v["source"] == "unit"]["value"].to_numpy()
    r = rngs.stream(seed, V.PURPOSE, "unit")
    means = np.array([v[r.integers(0, len(v), len(v))].mean() for _ in range(n_boot)])
    lo, hi = np.quantile(means, [0.025, 0.975])
    row = V.source_summary(db, "ck0", ["coherence_random"]).set_index("source").loc["unit"]
    assert row["lo"] == pytest.approx(min(lo, v.mean())) and row["hi"] == pytest.approx(max(hi, v.mean()))


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.floats(0, 1, allow_nan=False), min_size=2, max_size=30),
    seed=st.integers(0, 2**31 - 1),
    boot=st.integers(20, 200),
)
def test_source_mean_holds_its_mean_and_moves_with_the_seed(values, seed, boot):
    m, lo, hi = V.source_mean(values, boot, seed, "unit")
    assert m == pytest.approx(np.mean(values))
    assert lo <= m + 1e-12 and m <= hi + 1e-12
    assert V.source_mean(values, boot, seed, "unit") == (m, lo, hi)
    with_nan = V.source_mean([*values, math.nan], boot, seed, "unit")
    assert with_nan == (m, lo, hi)  # a missing value is dropped, not counted


def test_source_mean_interval_follows_the_seed_and_the_source():
    v = np.linspace(0, 1, 20) ** 2
    by_seed = {V.source_mean(v, 200, seed, "unit")[1:] for seed in range(5)}
    assert len(by_seed) > 1, "the interval ignores the seed"
    by_source = {V.source_mean(v, 200, 0, s)[1:] for s in SOURCE_NAMES}
    assert len(by_source) > 1, "every source draws the same resamples"


def test_source_mean_of_one_value_has_no_interval():
    m, lo, hi = V.source_mean([0.3], 100, 0, "unit")
    assert m == 0.3 and math.isnan(lo) and math.isnan(hi)
    assert all(math.isnan(x) for x in V.source_mean([], 100, 0, "unit"))
    m, lo, hi = V.source_mean([0.1, 0.5], 0, 0, "unit")  # computed with --bootstrap 0
    assert m == pytest.approx(0.3) and math.isnan(lo) and math.isnan(hi)


SOURCE = st.sampled_from(SOURCE_NAMES)
ROW = st.tuples(
    SOURCE, st.integers(0, 12).map(str), st.one_of(st.just(math.nan), st.sampled_from([0.0, 0.5, 1.0]))
)


@settings(max_examples=100, deadline=None)
@given(rows=st.lists(ROW, max_size=25, unique_by=lambda r: (r[0], r[1])), perm_seed=st.integers(0, 1000))
def test_ranking_puts_missing_last_and_breaks_ties_by_source_then_concept(rows, perm_seed):
    df = pd.DataFrame(rows, columns=["source", "concept", "value"])
    out = V.order(df)
    assert len(out) == len(df)
    vals = out["value"].to_numpy(float)
    missing = np.isnan(vals)
    assert not (missing[:-1] & ~missing[1:]).any(), "a missing value above a present one"
    present = vals[~missing]
    assert (np.diff(present) <= 0).all()
    keys = [
        (-v if not np.isnan(v) else 0, SOURCE_NAMES.index(s), int(c))
        for s, c, v in out.itertuples(index=False)
    ]
    for a, b, ma, mb in zip(keys, keys[1:], missing, missing[1:]):
        if ma == mb:
            assert a <= b
    # The order does not depend on the rows' order.
    shuffled = df.sample(frac=1, random_state=perm_seed)
    pd.testing.assert_frame_equal(V.order(shuffled), out)


def test_ranked_agrees_with_a_pandas_sort(db, sb):
    got = V.ranked(db, "ck0", "learnability")
    s = _scores(sb, "ck0", "learnability")
    assert list(got["rank"]) == list(range(1, len(got) + 1))
    assert sorted(got["value"], reverse=True) == list(got["value"])
    assert set(zip(got["source"], got["concept"])) == set(zip(s["source"], s["concept"]))
    sub = V.ranked(db, "ck0", "learnability", chosen=["label"])
    assert set(sub["source"]) == {"label"} and len(sub) == (s["source"] == "label").sum()


def _jaccard_by_sets(root, ckpt, source, concept, other):
    mem = table(root, "scoreboard_members")
    con = table(root, "scoreboard_concepts")
    scored = set(map(tuple, con[con["scored"]][["checkpoint_id", "source", "concept"]].to_numpy()))
    mine = set(
        mem[(mem["checkpoint_id"] == ckpt) & (mem["source"] == source) & (mem["concept"] == concept)][
            "image_id"
        ]
    )
    best = {}
    for c, g in mem[(mem["checkpoint_id"] == other) & (mem["source"] == source)].groupby("concept"):
        if (other, source, c) in scored:
            ids = set(g["image_id"])
            best[c] = len(mine & ids) / len(mine | ids)
    return best


@pytest.mark.parametrize(
    ("source", "concept"),
    [("unit", "3"), ("label", "0"), ("dictionary:semi_nmf", "2"), ("random_direction", "4")],
)
def test_across_matches_atoms_as_across_seeds_and_other_concepts_by_jaccard(db, sb, source, concept):
    """An atom's match in another checkpoint (features of equal width) is its partner in the
    Hungarian matching on |cosine| of the two dictionaries, as the dictionary's stability
    matches atoms across seeds, recomputed here with scipy from the stored atoms; any other
    concept's is the largest Jaccard overlap. Catches a greedy (best |cos|) or Jaccard
    match of atoms, a match against the wrong checkpoint's atoms, and a Jaccard that is
    not the match's."""
    from scipy.optimize import linear_sum_assignment
    from scipy.spatial.distance import cdist

    rows = V.across(db, "toy", "ck0", source, concept, "purity_label")
    assert list(rows["checkpoint_id"]) == ["ck2", "ck1", "ck0"]  # by epoch
    assert rows.set_index("checkpoint_id").loc["ck0", "jaccard"] == 1.0
    assert rows.set_index("checkpoint_id").loc["ck0", "concept"] == concept
    assert rows["this"].tolist() == [False, False, True]
    atoms = table(sb, "dictionary_atoms")
    for r in rows.itertuples():
        by_sets = _jaccard_by_sets(sb, "ck0", source, concept, r.checkpoint_id)
        if source.startswith("dictionary:"):
            m = source.split(":", 1)[1]

            def of(ck, m=m):
                a = atoms[(atoms["method"] == m) & (atoms["checkpoint_id"] == ck)].sort_values("atom")
                return a["atom"].to_numpy(), np.stack(a["vector"].map(np.asarray))

            ia, A = of("ck0")
            ib, B = of(r.checkpoint_id)
            C = np.abs(1 - cdist(A, B, "cosine"))
            left, right = linear_sum_assignment(-C)
            partner = dict(zip(ia[left], ib[right]))[int(concept)]
            assert r.matched == "atoms" and r.concept == str(partner)
            assert r.cosine == pytest.approx(C[list(ia).index(int(concept)), list(ib).index(partner)])
            assert r.jaccard == pytest.approx(by_sets.get(r.concept, math.nan), nan_ok=True)
        else:
            assert r.matched == "members"
            assert r.jaccard == pytest.approx(max(by_sets.values()))
            assert by_sets[r.concept] == pytest.approx(r.jaccard)
            assert math.isnan(r.cosine)
        s = _scores(sb, r.checkpoint_id, "purity_label")
        want = s[(s["source"] == source) & (s["concept"] == r.concept)]["value"].iloc[0]
        assert r.value == pytest.approx(want)


@settings(max_examples=150, deadline=None)
@given(
    mine=st.sets(st.integers(0, 12), min_size=1),
    candidates=st.dictionaries(st.integers(0, 30).map(str), st.sets(st.integers(0, 12)), max_size=8),
    prefer=st.one_of(st.none(), st.integers(0, 30).map(str)),
)
def test_best_match_is_the_largest_jaccard_ties_to_the_preferred_then_the_lowest(mine, candidates, prefer):
    c, j = V.best_match(mine, candidates, prefer)
    if not candidates:
        assert c is None and math.isnan(j)
        return
    by_sets = {k: len(mine & m) / len(mine | m) for k, m in candidates.items()}
    assert j == max(by_sets.values()) == by_sets[c]
    tied = sorted((k for k, v in by_sets.items() if v == j), key=int)
    assert c == (prefer if prefer in tied else tied[0])


@settings(max_examples=60, deadline=None)
@given(
    u=st.lists(st.floats(-5, 5, allow_nan=False), min_size=3, max_size=3),
    v=st.lists(st.floats(-5, 5, allow_nan=False), min_size=3, max_size=3),
    scale=st.floats(0.1, 10),
)
def test_abs_cosine_is_sign_and_scale_free_and_bounded(u, v, scale):
    u, v = np.asarray(u), np.asarray(v)
    c = V.abs_cosine(u, v)
    if np.linalg.norm(u) < 1e-6 or np.linalg.norm(v) < 1e-6:
        return
    assert 0 <= c <= 1 + 1e-12
    assert V.abs_cosine(-scale * u, v) == pytest.approx(c, abs=1e-9)
    assert V.abs_cosine(u, v[:2]) != V.abs_cosine(u, v[:2])  # other widths: missing


@given(a=st.sets(st.integers(0, 20)), b=st.sets(st.integers(0, 20)))
def test_jaccard_is_intersection_over_union(a, b):
    j = V.jaccard(a, b)
    if not (a | b):
        assert math.isnan(j)
    else:
        assert j == len(a & b) / len(a | b) and V.jaccard(b, a) == j


def test_the_concept_key_round_trips_for_any_concept_name():
    for s in SOURCE_NAMES:
        for c in ("0", "my/selection", "a b"):
            assert V.split_key(V.concept_key(s, c)) == (s, c)
    with pytest.raises(ValueError, match="SOURCE/CONCEPT"):
        V.split_key("no-separator")


# ---- a projection too large to draw point by point --------------------------------------------
@pytest.mark.parametrize("bins", [1, 3, 8])
def test_a_large_projection_gives_its_members_as_points_and_every_image_in_one_bin(sb, db, bins):
    from conceptlens.figures.scoreboard import projection

    key = "dictionary:convex_nmf/1"
    src, concept = V.split_key(key)
    proj = table(sb, "projections")
    proj = proj[(proj["checkpoint_id"] == "ck0") & (proj["method"] == "umap")]
    n = len(proj)
    mem = table(sb, "scoreboard_members")
    mine = set(
        mem[(mem["checkpoint_id"] == "ck0") & (mem["source"] == src) & (mem["concept"] == concept)][
            "image_id"
        ]
    )
    # At or under the limit: every point, members marked; no histogram.
    whole = V.projection(db, "ck0", src, concept, limit=n)
    assert len(whole) == n and set(whole.loc[whole["member"], "image_id"]) == mine
    assert V.projection_density(db, "ck0", limit=n, bins=bins).empty
    # Over it: the members alone, and a histogram of all the images, counted another way
    # (numpy's histogram2d over the projection's bounding box cuts bins as the view does).
    points = V.projection(db, "ck0", src, concept, limit=n - 1)
    assert set(points["image_id"]) == mine and points["member"].all()
    dens = V.projection_density(db, "ck0", limit=n - 1, bins=bins)
    assert int(dens["count"].sum()) == n  # the images on the box's edges too
    h, _, _ = np.histogram2d(
        proj["x"],
        proj["y"],
        bins=bins,
        range=[[proj["x"].min(), proj["x"].max()], [proj["y"].min(), proj["y"].max()]],
    )
    got = np.zeros((bins, bins))
    got[dens["ix"].to_numpy(int), dens["iy"].to_numpy(int)] = dens["count"]
    assert np.array_equal(got, h)
    assert (dens["bins"] == bins).all() and np.isclose(dens["x0"].iloc[0], proj["x"].min())
    assert np.isclose(dens["x0"].iloc[0] + bins * dens["dx"].iloc[0], proj["x"].max())
    # The figure: the histogram under the members, no point of the other images.
    fig = projection(points, "atom 1", dens)
    kinds = [(type(t).__name__, t.name) for t in fig.data]
    assert kinds[0][0] == "Heatmap" and not any(name == "other images" for _, name in kinds)
    members = next(t for t in fig.data if str(t.name).startswith("members of"))
    assert sorted(np.asarray(members.customdata)[:, 0]) == sorted(mine)
    assert np.nansum(10 ** np.asarray(fig.data[0].z, np.float64)) == pytest.approx(n, rel=1e-4)
