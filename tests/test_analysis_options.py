"""Done means done with these options, and with these inputs.

Every analysis, on a copy of the factory workspace: a rerun with another value of an
option that changes its result recomputes its units and says why; a rerun that changes
how it runs only (threads) or gives no option recomputes nothing; a unit computed before
options were stored counts as computed with the defaults. A unit whose inputs are missing
is skipped: logged with its reason, nothing written, not done, and computed by the next
run once its inputs are there.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conceptlens import schema
from conceptlens.analysis import by_name, registered, runner
from conceptlens.analysis.base import EVERYTHING, SEED, Option
from conceptlens.analysis.common import Context
from conceptlens.workspace import Workspace
from tests.conftest import copy_ws
from tests.hsj_fixtures import FAST

pytestmark = pytest.mark.slow

# name -> (the options of a first, fast run; one result-changing option with another value).
# Written by hand only where the derived case (`case`) would not do: defaults too slow for a
# test, or a change that must exercise something particular. A new analysis needs no entry.
CASES = {
    "clustering": ({}, {"n_init": 2}),
    "cluster_metrics": ({}, {"trials": 25}),
    "cluster_captions": ({"describability": False}, {"rouge_ablation": False}),
    "projections": ({}, {"umap_fit_max": 100}),
    "baselines": ({"baseline_images": 8}, {"baseline_images": 16}),
    "comparisons": ({}, {"seed": 1}),
    "compmap": ({"episodes": 2, "ways": [2], "shots": [1], "queries": 1}, {"episodes": 3}),
    "similarity": (FAST, {"n_boot": 60}),
    "concepts": ({"concept_seeds": 1, "purity_steps": 5}, {"purity_steps": 6}),
    "convergence": ({"rounds": 2, "convergence_members": 2, "max_epochs": 20}, {"rounds": 3}),
    "concept_events": ({}, {"event_share": 0.3}),
    "learning_curves": ({"curve_boot": 20}, {"learned_auc": 0.8}),
    "aligned_projections": ({"align": "procrustes"}, {"aligned_min_dist": 0.3}),
    # The factory's features are signed: the derived other value, --methods nmf, is refused.
    "dictionary": ({"atoms": 4}, {"methods": ["semi_nmf"]}),
}


class HashVL:
    """A stand-in VL model (the factory's `open_clip:toy` is no real one): embeddings drawn
    from a hash of the text or the image path."""

    @staticmethod
    def _vec(key: str) -> np.ndarray:
        seed = int(hashlib.sha1(key.encode()).hexdigest()[:8], 16)
        return np.random.default_rng(seed).normal(size=16)

    def encode_text(self, texts):
        return np.stack([self._vec("t:" + t) for t in texts])

    def encode_images(self, paths):
        return np.stack([self._vec("i:" + str(p).rsplit("/", 1)[-1]) for p in paths])


@pytest.fixture
def ws(tmp_path, factory_template, monkeypatch):
    from conceptlens.analysis import compmap

    monkeypatch.setattr(compmap, "load_vl", lambda ws, row: HashVL())
    return Workspace(copy_ws(factory_template, tmp_path / "ws"))


def workspace_for(name: str, ws: Workspace, tmp_path) -> Workspace:
    """The factory copy, or for `concepts` a workspace of known concepts (the factory's
    concept labels are too few for every purity classifier to see both classes)."""
    if name != "concepts":
        return ws
    from tests.concepts_factory import concept_workspace

    return concept_workspace(tmp_path / "concepts", n=90, levels=(0.0,))


def logged(ws: Workspace, name: str) -> int:
    """How many units of `name` the analysis_runs log holds (one file per unit)."""
    return len(ws.partition_files("analysis_runs", analysis=name))


def run(ws, name, opts, **kw):
    return runner.run(ws.root, name, opts, progress_bars=False, with_dependencies=False, **kw)


# ---- cases derived from the declarations ------------------------------------------------------
def other_value(o: Option):
    """A valid value of `o` other than its default, from its declaration (None: none can be
    derived, e.g. a free-form string)."""
    if o.type is bool:
        return not o.default
    if o.choices is not None:
        if o.multiple:  # a list of choices: one the default list does not hold
            return next(([c] for c in o.choices if c not in (o.default or ())), None)
        return next((c for c in o.choices if c != o.default), None)
    if o.type not in (int, float):
        return None
    d = o.default[0] if o.multiple and o.default else o.default
    d = d if d is not None else (o.minimum if o.minimum is not None else 1)
    if o.type is float and o.maximum is not None:
        v = (d + o.maximum) / 2 if d < o.maximum else (d + (o.minimum or 0.0)) / 2
    else:
        v = d + 1 if o.maximum is None or d + 1 <= o.maximum else d - 1
    v = o.type(v)
    if v == o.default or o.problem(v):
        return None
    return [v] if o.multiple else v


def case(name: str) -> tuple[dict, dict]:
    """(first run's options, one result-changing option with another value): CASES' entry,
    else the defaults and the first option declared (then the seed) whose other value can
    be derived."""
    if name in CASES:
        return CASES[name]
    a = by_name()[name]
    for o in (*a.options, SEED):
        v = other_value(o)
        if o.changes_result and v is not None:
            return {}, {o.name: v}
    raise AssertionError(f"{name}: no result-changing option with a derivable other value; add a CASES entry")


NAMES = [a.name for a in registered()]


def test_every_analysis_has_a_case():
    assert set(CASES) <= set(NAMES), "a case for an analysis that is not registered"
    for name in NAMES:
        first, change = case(name)
        (option,) = change
        declared = {o.name: o for o in by_name()[name].all_options}
        assert set(first) <= set(declared), (name, set(first) - set(declared))
        assert declared[option].changes_result, (name, option)
        assert declared[option].check(change[option]) == change[option]
        assert change[option] != first.get(option, declared[option].default), (name, option)


@functools.cache
def cli_parser():
    from conceptlens.cli import parser

    return parser()


def parse_flag(name: str, o: Option, words: list[str]):
    """The value `conceptlens analyze NAME FLAG WORDS...` reads for `o`."""
    args = cli_parser().parse_args(["analyze", name, "--workspace", "W", o.flag, *words])
    return getattr(args, o.name)


def valid_values(o: Option):
    """A hypothesis strategy of the values `o` declares allowed (one element of a list)."""
    if o.choices is not None:
        return st.sampled_from(o.choices)
    lo, hi = o.minimum, o.maximum
    if o.type is int:
        return st.integers(
            min_value=None if lo is None else math.ceil(lo), max_value=None if hi is None else math.floor(hi)
        )
    if o.type is float:
        return st.floats(min_value=lo, max_value=hi, allow_nan=False, allow_infinity=False)
    return st.text(alphabet=st.characters(categories=("L", "N")), min_size=1, max_size=12)


def invalid_values(o: Option):
    """A strategy of values `o`'s declaration rules out (None: it rules out none)."""
    if o.choices is not None:
        return st.text(min_size=1, max_size=12).filter(lambda v: v not in o.choices and not v.startswith("-"))
    parts = []
    step = 1 if o.type is int else 1e-6
    if o.minimum is not None:
        below = o.minimum - step if o.type is float else math.ceil(o.minimum) - 1
        parts.append(
            st.integers(max_value=below) if o.type is int else st.floats(max_value=below, allow_nan=False)
        )
    if o.maximum is not None:
        above = o.maximum + step if o.type is float else math.floor(o.maximum) + 1
        parts.append(
            st.integers(min_value=above) if o.type is int else st.floats(min_value=above, allow_nan=False)
        )
    parts = [p.filter(lambda v: math.isfinite(v)) for p in parts]
    return st.one_of(parts) if parts else None


OPTIONS = [(a.name, o) for a in registered() for o in a.all_options if o.type is not bool]


@pytest.mark.parametrize(("name", "o"), OPTIONS, ids=[f"{n}-{o.name}" for n, o in OPTIONS])
def test_an_option_accepts_every_value_its_declaration_allows(name, o):
    """What the declaration allows, the command line reads as that value and the library
    accepts as it is."""

    @settings(max_examples=25, deadline=None)
    @given(valid_values(o))
    def check(v):
        words = [str(v)] if not o.multiple else [str(v), str(v)]
        assert parse_flag(name, o, words) == ([v, v] if o.multiple else v)
        assert o.check([v] if o.multiple else v) == ([v] if o.multiple else v)

    check()


@pytest.mark.parametrize(("name", "o"), OPTIONS, ids=[f"{n}-{o.name}" for n, o in OPTIONS])
def test_an_option_rejects_every_value_its_declaration_rules_out(name, o, base_ws, capsys):
    """A value below the minimum, above the maximum or not among the choices is an error
    naming the flag: on the command line before anything runs, and from the library
    (`runner.run`) before any unit is computed. Text that is not of the option's type too."""
    if o.type in (int, float):
        with pytest.raises(SystemExit):
            parse_flag(name, o, ["not-a-number"])
        assert o.flag in capsys.readouterr().err
    bad = invalid_values(o)
    if bad is None:
        return

    @settings(max_examples=15, deadline=None)
    @given(bad)
    def check(v):
        with pytest.raises(SystemExit):
            parse_flag(name, o, [str(v)])
        assert o.flag in capsys.readouterr().err
        with pytest.raises(ValueError, match=o.flag):
            runner.run(base_ws, name, {o.name: [v] if o.multiple else v}, progress_bars=False)

    check()


@pytest.fixture(scope="module")
def base_ws(tmp_path_factory):
    """A workspace with features only: a run stops at its options before reading anything."""
    from harness.factory import make_workspace

    return make_workspace(tmp_path_factory.mktemp("opts") / "ws").root


@pytest.mark.parametrize("name", NAMES)
def test_an_option_that_changes_the_result_recomputes_and_threads_do_not(ws, name, tmp_path):
    ws = workspace_for(name, ws, tmp_path)
    first, change = case(name)
    before = logged(ws, name)
    run(ws, name, first, force=True)
    n_units = logged(ws, name) - before
    assert n_units > 0
    assert not runner.missing(ws.root, [name])[name]

    # How it runs, and options not given: nothing is computed again.
    run(ws, name, first, threads=1)
    run(ws, name, {})
    assert logged(ws, name) == before + n_units

    ctx = run(ws, name, {**first, **change})
    assert logged(ws, name) == before + 2 * n_units, "every unit is computed again"
    (option,) = change
    said = [n for n in ctx.notes if "options changed" in n]
    assert len(said) == n_units and all(f"({option} " in n and "recomputing" in n for n in said), said
    # Stored with the units: the same options again, or none, compute nothing.
    run(ws, name, {**first, **change})
    run(ws, name, {})
    assert logged(ws, name) == before + 2 * n_units


def test_the_message_names_the_values(ws):
    run(ws, "cluster_metrics", {}, force=True)
    ctx = run(ws, "cluster_metrics", {"trials": 50})
    assert (
        "cluster_metrics checkpoint_id=ck0/k=4: options changed (trials 20 -> 50), recomputing" in ctx.notes
    )


def test_a_unit_computed_before_options_were_stored_counts_as_computed_with_the_defaults(ws):
    run(ws, "cluster_metrics", {}, force=True)
    md = ws.read_metadata("checkpoint_metrics", checkpoint_id="ck0", k=4)
    old = {k: v for k, v in md.items() if k != "analysis_options"}  # what 2.1 wrote
    ws.write(
        "checkpoint_metrics",
        ws.read("checkpoint_metrics", checkpoint_id="ck0", k=4),
        old,
        checkpoint_id="ck0",
        k=4,
    )
    n = logged(ws, "cluster_metrics")
    run(ws, "cluster_metrics", {"trials": 20, "refs": 10})  # the defaults, given
    assert logged(ws, "cluster_metrics") == n
    ctx = run(ws, "cluster_metrics", {"refs": 5})
    assert "cluster_metrics checkpoint_id=ck0/k=4: options changed (refs 10 -> 5), recomputing" in ctx.notes


def test_concepts_no_longer_pass_options_through_the_context(ws, tmp_path):
    """The options reach the fingerprint as an argument: the context holds no copy of them."""
    ws = workspace_for("concepts", ws, tmp_path)
    ctx = run(ws, "concepts", CASES["concepts"][0], force=True)
    assert not any("opts" in k for k in vars(ctx))


# ---- skipped units -----------------------------------------------------------------------
def test_a_unit_without_captions_is_skipped_logged_and_retried_once_they_exist(ws):
    caps = ws.read("captions")
    ws.write("captions", caps.slice(0, 0))  # no caption for any image
    for p in ws.partitions("cluster_captions"):
        ws.remove_partition("cluster_captions", **p)
    ctx = run(ws, "cluster_captions", {"describability": False})
    units = [u.label for u in by_name()["cluster_captions"].units(Context(ws), {}, EVERYTHING)]
    assert len(units) == 3
    assert all(
        f"cluster_captions {u}: skipped: captions.parquet has no caption" in " ".join(ctx.notes)
        for u in units
    )
    assert not ws.has("cluster_captions"), "a skipped unit writes nothing"
    assert runner.missing(ws.root, ["cluster_captions"])["cluster_captions"] == units, "not done"
    skipped = runner.skipped(ws.root)
    assert set(skipped) == {"cluster_captions"} and sorted(skipped["cluster_captions"]) == units
    assert all("has no caption" in why for why in skipped["cluster_captions"].values())
    log = ws.read("analysis_runs", analysis="cluster_captions").to_pandas()
    assert set(log["status"]) == {"skipped"} and log["reason"].str.contains("no caption").all()
    assert log["inputs"].isna().all()

    ws.write("captions", caps)  # the input appears: the next run computes the units
    ctx = run(ws, "cluster_captions", {"describability": False})
    assert not any("skipped" in n for n in ctx.notes)
    assert runner.missing(ws.root, ["cluster_captions"])["cluster_captions"] == []
    assert runner.skipped(ws.root) == {}
    log = ws.read("analysis_runs", analysis="cluster_captions").to_pandas()
    assert sorted(log["status"]) == ["done"] * 3 + ["skipped"] * 3
    from conceptlens.validate import validate

    assert validate(ws.root) == []


def test_a_model_that_cannot_be_loaded_skips_the_unit_until_it_can(ws):
    """compmap's VL model: a ModelLoadError is a skip, the next run computes it."""
    from conceptlens.analysis import compmap
    from conceptlens.models import ModelLoadError

    def missing_weights(ws, row):
        raise ModelLoadError(f"{row['spec']}: weights not found")

    for p in ws.partitions("compmap_scores"):
        ws.remove_partition("compmap_scores", **p)
    mp = pytest.MonkeyPatch()
    mp.setattr(compmap, "load_vl", missing_weights)
    try:
        run(ws, "compmap", CASES["compmap"][0])
    finally:
        mp.undo()
    why = "VL model 'open_clip:toy' could not be loaded (open_clip:toy: weights not found)"
    assert runner.skipped(ws.root) == {"compmap": {"vl_model=vl-toy": why}}
    assert not ws.has("compmap_scores")
    run(ws, "compmap", CASES["compmap"][0])  # the fixture's model loads again
    assert ws.has("compmap_scores", vl_model="vl-toy") and runner.skipped(ws.root) == {}


def test_a_ray_task_reports_a_skipped_unit_as_skipped_not_failed(ws):
    """The body of a Ray task (engines.run_group, here in-process): the driver logs what it
    reports as the local engine does."""
    from conceptlens.analysis import engines

    ws.write("captions", ws.read("captions").slice(0, 0))
    a = by_name()["cluster_captions"]
    units = a.units(Context(ws), a.option_defaults(), EVERYTHING)
    opts = {**a.option_defaults(), "describability": False}
    results = list(engines.run_group(str(ws.root), a.name, units, opts, EVERYTHING))
    assert [r.error for r in results] == [None] * 3
    assert all("no caption" in r.skipped for r in results)


def test_an_analysis_that_forgets_its_done_metadata_is_an_error(ws):
    from conceptlens.analysis import projections
    from conceptlens.errors import ConceptLensError

    real = by_name()["projections"].run

    def forgetful(ctx, unit, opts, scope):
        real(ctx, unit, opts, scope)
        part = dict(unit.partition)
        t = ctx.ws.read("projections", **part).drop_columns(list(part)).replace_schema_metadata(None)
        ctx.ws.write("projections", t, **part)  # without its metadata

    a = by_name()["projections"]
    object.__setattr__(a, "run", forgetful)  # a frozen dataclass: what a careless analysis would be
    try:
        with pytest.raises(ConceptLensError, match="done_metadata"):
            run(ws, "projections", {}, force=True)
    finally:
        object.__setattr__(a, "run", real)
    assert projections.ANALYSIS.run is real


def test_migrating_a_2_1_workspace_adds_the_log_columns_as_nulls(ws):
    """2.1 logs have no status or reason: `migrate` writes them (null: done) into every log
    file, and the workspace is valid before and after."""
    import pyarrow.parquet as pq

    from conceptlens.migrate import migrate
    from conceptlens.validate import validate

    run(ws, "clustering", {}, force=True)
    for f in ws.files("analysis_runs"):  # what a 2.1 ConceptLens wrote
        t = pq.read_table(f)
        pq.write_table(t.drop_columns([c for c in ("status", "reason") if c in t.column_names]), f)
    ws.write_meta({**ws.meta(), "schema_version": "2.1"})
    assert validate(ws.root) == []
    done = migrate(ws.root, progress=False)
    assert any("analysis_runs: column status added (null)" in d for d in done), done
    assert ws.meta()["schema_version"] == schema.SCHEMA_VERSION == "2.6"
    assert all({"status", "reason"} <= set(pq.read_schema(f).names) for f in ws.files("analysis_runs"))
    assert validate(ws.root) == []
    assert runner.missing(ws.root, ["clustering"])["clustering"] == []


def test_the_log_of_an_older_workspace_reads_as_done(ws):
    """analysis_runs rows of 2.1 have no status: finished units."""
    row = {
        "unit": ["checkpoint_id=ck0/k=4"],
        "inputs": pa.array([None], pa.string()),
        "options": [json.dumps({})],
        "version": ["0.9"],
        "started": ["2026-01-01T00:00:00.000000+00:00"],
        "seconds": [1.0],
    }
    ws.append("analysis_runs", pa.table(row), analysis="clustering")
    assert runner.last_runs(ws)[("clustering", "checkpoint_id=ck0/k=4")]["status"] == "done"
    assert schema.TABLES_BY_NAME["analysis_runs"].column("status").required is False


# ---- adding an analysis: its own module and one line in MODULES ----------------------------
def test_a_new_analysis_with_its_own_table_needs_only_its_module_and_a_line_in_modules(
    ws, monkeypatch, capsys
):
    """A toy analysis declared in a module of its own, with a table of its own: listed in
    MODULES, it runs from the command line, and its table is part of the format (validate,
    the generated docs) without an edit to schema.py."""
    import sys
    import types

    from conceptlens import analysis
    from conceptlens.analysis.base import Analysis, Unit, checkpoints_with_features
    from conceptlens.cli import main
    from conceptlens.validate import validate

    mod = types.ModuleType("conceptlens.analysis.toy_counts")
    table = schema.Table(
        "toy_counts",
        "toy_counts",
        "Images per checkpoint (a toy analysis).",
        (
            schema.Column(
                "checkpoint_id", schema.STRING, "Checkpoint.", references="checkpoints.checkpoint_id"
            ),
            schema.Column("n", schema.INT, "Images with features.", bounds=schema.NON_NEGATIVE),
        ),
        key=("checkpoint_id",),
        added_by="`conceptlens analyze toy_counts`",
        partition=("checkpoint_id",),
    )

    def units(ctx, opts, scope):
        return [Unit({"checkpoint_id": c}, c) for c in checkpoints_with_features(ctx, opts, scope)]

    def run_unit(ctx, unit, opts, scope):
        ids, _ = ctx.features(unit.checkpoint_id)
        md = mod.ANALYSIS.done_metadata(opts, None)
        ctx.ws.write("toy_counts", pa.table({"n": [len(ids)]}), metadata=md, checkpoint_id=unit.checkpoint_id)

    mod.ANALYSIS = Analysis(
        "toy_counts", "Images per checkpoint", ("toy_counts",), units, run_unit, tables=(table,)
    )
    caches = (analysis.registered, analysis.by_name, schema.tables, schema.tables_by_name)
    monkeypatch.setitem(sys.modules, mod.__name__, mod)
    monkeypatch.setattr(analysis, "MODULES", (*analysis.MODULES, "toy_counts"))
    for f in caches:
        f.cache_clear()
    try:
        assert schema.TABLES_BY_NAME["toy_counts"] is table and schema.TABLES[-1] is table
        assert (
            "### `toy_counts` — `toy_counts/checkpoint_id=CHECKPOINT_ID/part-*.parquet`" in schema.markdown()
        )
        assert main(["analyze", "toy_counts", "--workspace", str(ws.root), "--quiet"]) == 0
        assert "toy_counts: analyses written" in capsys.readouterr().out
        assert ws.read("toy_counts", checkpoint_id="ck1").to_pylist()[0]["n"] > 0
        assert validate(ws.root) == []
    finally:
        monkeypatch.undo()
        for f in caches:
            f.cache_clear()
    assert "toy_counts" not in schema.TABLES_BY_NAME


def test_analysis_modules_import_only_base_common_and_metrics_and_no_private_name():
    """No analysis imports another (or the runner): importing any of them alone never
    comes back to the list of analyses. No private name crosses a module boundary into or
    out of conceptlens/analysis."""
    import ast
    from pathlib import Path

    import conceptlens
    from conceptlens import analysis

    root = Path(conceptlens.__file__).parent
    allowed_here = {"base", "common", "compare"}  # compare.py: pure functions (moving to metrics)
    for m in analysis.MODULES:
        tree = ast.parse((root / "analysis" / f"{m}.py").read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                target = (node.module or "").split(".")[0]
                names = {a.name for a in node.names}
                assert target in allowed_here, f"{m}.py imports .{node.module or ''} {names}"
    for path in [*root.rglob("*.py"), *(root.parent / "tests").glob("*.py")]:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom):
                continue
            module = node.module or ""
            inside = path.parent == root / "analysis"
            if "analysis" in module.split(".") or (inside and node.level >= 1):
                private = [
                    a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")
                ]
                assert not private, f"{path.relative_to(root.parent)} imports {private} from {module}"


def test_an_option_added_later_counts_as_its_legacy_value_not_its_default(ws):
    """cluster_metrics stored before 2.3 has no `bootstrap` in its options and no intervals:
    it is done (nothing recomputes it unasked), but it was computed with bootstrap 0, not
    the default 1000, so asking for intervals recomputes it (once it counted as 1000 and
    `--bootstrap 1000` did nothing: the demo's tables kept no intervals)."""
    run(ws, "cluster_metrics", {"bootstrap": 0}, force=True)
    md = ws.read_metadata("checkpoint_metrics", checkpoint_id="ck0", k=4)
    opts = (
        json.loads(md["analysis_options"])
        if isinstance(md["analysis_options"], str)
        else md["analysis_options"]
    )
    old = {**md, "analysis_options": {k: v for k, v in opts.items() if k != "bootstrap"}}  # as 2.2 wrote
    ws.write(
        "checkpoint_metrics",
        ws.read("checkpoint_metrics", checkpoint_id="ck0", k=4),
        old,
        checkpoint_id="ck0",
        k=4,
    )
    n = logged(ws, "cluster_metrics")
    run(ws, "cluster_metrics", {})
    assert logged(ws, "cluster_metrics") == n  # done: nothing asked
    ctx = run(ws, "cluster_metrics", {"bootstrap": 1000})
    assert (
        "cluster_metrics checkpoint_id=ck0/k=4: options changed (bootstrap 0 -> 1000), recomputing"
        in ctx.notes
    )
    assert ws.read("checkpoint_metrics", checkpoint_id="ck0", k=4)["knn_acc_lo"].null_count == 0
