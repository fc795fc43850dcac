"""One source of randomness (conceptlens/rng.py): every generator of the product comes from
(the run's seed, a purpose, the unit), and the contracts that follow are checked on every
analysis that declares resamples, derived from its declaration.

- No file of the product (the demo builder aside: it draws its synthetic data, not results)
  creates a generator or touches global random state by hand.
- `rng.stream` is a pure function of (seed, purpose, unit): the same triple gives the same
  draws, another seed, purpose or unit other draws; a dict unit does not depend on its key
  order or on numpy versus Python integers; without a unit it is the stream that
  `metrics.bootstrap.rng_for` always gave (stored intervals keep their values).
- Two purposes' draws are independent (no correlation beyond chance).
- For every analysis with a resample option: the same seed gives bit-identical tables,
  another seed changes every interval it stores.
- The intervals the Checkpoints page derives at read time use the resample count and seed
  each cluster_metrics unit was computed with (not the analysis's defaults).
"""

from __future__ import annotations

import ast
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conceptlens import rng as R
from tests.conftest import ROOT

SOURCES = ("conceptlens", "components", "pages", "participant", "app.py", "serve.py")
# The only files allowed to create generators: the source itself, and the demo builder's
# synthetic data (its draws build a dataset, they are not a result with an interval).
ALLOWED = ("conceptlens/rng.py", "conceptlens/demo/")
# Calls that create a generator or reseed global state, by their dotted name's last parts.
CREATORS = {
    ("random", "default_rng"),
    ("random", "RandomState"),
    ("random", "SeedSequence"),
    ("random", "Generator"),
    ("random", "seed"),
    ("torch", "manual_seed"),
    ("torch", "Generator"),
    ("random", "Random"),
    ("cuda", "manual_seed_all"),
}
# numpy's and Python's global-state draws (np.random.rand, random.choice, ...).
GLOBAL_DRAWS = {
    "rand",
    "randn",
    "randint",
    "random",
    "choice",
    "choices",
    "shuffle",
    "permutation",
    "normal",
    "uniform",
    "sample",
    "integers",
    "standard_normal",
    "gauss",
}


def _dotted(node: ast.AST) -> list[str]:
    out = []
    while isinstance(node, ast.Attribute):
        out.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        out.append(node.id)
    return out[::-1]


def hand_made_generators(root: Path = ROOT) -> list[str]:
    """`file:line name` of every call, in the product's files, that creates a generator or
    draws from global random state, outside ALLOWED."""
    found = []
    for src in SOURCES:
        top = root / src
        paths = [top] if src.endswith(".py") else sorted(top.rglob("*.py"))
        for path in [p for p in paths if p.is_file()]:
            rel = path.relative_to(root).as_posix()
            if any(rel == a or (a.endswith("/") and rel.startswith(a)) for a in ALLOWED):
                continue
            # Names bound to numpy's and Python's random modules in this file.
            tree = ast.parse(path.read_text(), rel)
            random_modules = {"random"}
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.module in ("numpy", "torch"):
                    for a in node.names:
                        if a.name in ("random", "Generator", "manual_seed", "default_rng"):
                            random_modules.add(a.asname or a.name)
                if isinstance(node, ast.ImportFrom) and node.module in ("numpy.random", "random"):
                    for a in node.names:
                        found.append(f"{rel}:{node.lineno} from {node.module} import {a.name}")
            for node in ast.walk(tree):
                if not isinstance(node, ast.Call):
                    continue
                name = _dotted(node.func)
                if len(name) < 2 and not (name and name[0] in ("default_rng", "manual_seed")):
                    continue
                tail = tuple(name[-2:])
                if tail in CREATORS or (name and name[-1] in ("default_rng", "manual_seed")):
                    found.append(f"{rel}:{node.lineno} {'.'.join(name)}")
                elif len(name) >= 2 and name[-2] in random_modules and name[-1] in GLOBAL_DRAWS:
                    found.append(f"{rel}:{node.lineno} {'.'.join(name)}")
    return found


def test_no_file_of_the_product_makes_its_own_generator():
    found = hand_made_generators()
    assert found == [], (
        "generators made by hand (take them from conceptlens.rng: stream, int_seed, "
        "torch_generator, generator):\n" + "\n".join(found)
    )


@pytest.mark.parametrize(
    "line",
    [
        "rng = np.random.default_rng(seed)",
        "rng = numpy.random.default_rng([seed, 3])",
        "g = torch.Generator().manual_seed(1)",
        "torch.manual_seed(0)",
        "np.random.seed(0)",
        "x = np.random.rand(3)",
        "x = np.random.permutation(10)",
        "r = random.Random(4)",
        "random.shuffle(items)",
        "s = np.random.SeedSequence(2).generate_state(1)",
        "from numpy.random import default_rng",
    ],
)
def test_the_walk_finds_each_way_of_making_a_generator(tmp_path, line):
    """The walk itself: each way of creating a generator or drawing from global state is
    found (a walk that finds nothing would pass the test above on any tree)."""
    (tmp_path / "conceptlens").mkdir()
    (tmp_path / "conceptlens" / "m.py").write_text(
        "import random\nimport numpy as np\nimport numpy\nimport torch\n\n\n"
        f"def f(seed, items):\n    {line}\n"
    )
    assert len(hand_made_generators(tmp_path)) >= 1, line


def test_the_walk_lets_the_source_and_its_users_be(tmp_path):
    (tmp_path / "conceptlens" / "demo").mkdir(parents=True)
    (tmp_path / "conceptlens" / "rng.py").write_text("import numpy as np\nnp.random.default_rng(1)\n")
    (tmp_path / "conceptlens" / "demo" / "d.py").write_text("import numpy as np\nnp.random.default_rng(1)\n")
    (tmp_path / "conceptlens" / "m.py").write_text(
        "from . import rng as rngs\nx = rngs.stream(0, 'a').random(3)\ny = rng.random(3)\n"
        "z = rng.choice(5)\nw = self.rng.permutation(4)\n"
    )
    assert hand_made_generators(tmp_path) == []


# ---- the stream itself ------------------------------------------------------------------
def _draws(g: np.random.Generator, n: int = 64) -> np.ndarray:
    return g.random(n)


def test_without_a_unit_the_stream_is_the_one_stored_intervals_were_drawn_from():
    """Computed another way: numpy's generator of [seed, crc32(purpose)]."""
    for seed, what in [(0, "purity"), (7, "knn_acc"), (2**31 - 1, "mean_coherence_random")]:
        ref = np.random.default_rng([seed, zlib.crc32(what.encode())])  # noqa: the reference
        assert np.array_equal(_draws(R.stream(seed, what)), _draws(ref))


def test_the_stream_is_a_function_of_seed_purpose_and_unit_only():
    base = _draws(R.stream(3, "a", {"checkpoint_id": "ck0", "k": 4}))
    # the same triple, spelled differently: key order, numpy integers, a tuple for a list
    assert np.array_equal(base, _draws(R.stream(3, "a", {"k": 4, "checkpoint_id": "ck0"})))
    assert np.array_equal(
        base, _draws(R.stream(np.int64(3), "a", {"k": np.int32(4), "checkpoint_id": "ck0"}))
    )
    assert np.array_equal(_draws(R.stream(1, "b", [1, 2])), _draws(R.stream(1, "b", (1, 2))))
    # any part changed: other draws
    others = [
        R.stream(4, "a", {"checkpoint_id": "ck0", "k": 4}),
        R.stream(3, "b", {"checkpoint_id": "ck0", "k": 4}),
        R.stream(3, "a", {"checkpoint_id": "ck1", "k": 4}),
        R.stream(3, "a", {"checkpoint_id": "ck0", "k": 5}),
        R.stream(3, "a"),
        R.stream(3, "a", 0),
    ]
    draws = [base] + [_draws(g) for g in others]
    for i in range(len(draws)):
        for j in range(i + 1, len(draws)):
            assert not np.array_equal(draws[i], draws[j]), (i, j)
    # unit 0 and unit "0" and unit [0] are three units
    assert len({_draws(R.stream(0, "a", u)).tobytes() for u in (0, "0", [0], 1)}) == 4


def test_int_seeds_and_torch_generators_derive_from_the_same_triple():
    a, b = R.int_seed(0, "fit", [1, 2]), R.int_seed(0, "fit", [1, 2])
    assert a == b and 0 <= a < 2**31
    assert len({R.int_seed(s, p, u) for s in (0, 1) for p in ("fit", "split") for u in (None, 1, 2)}) == 12
    torch = pytest.importorskip("torch")
    t1 = torch.rand(5, generator=R.torch_generator(0, "aug", 1))
    t2 = torch.rand(5, generator=R.torch_generator(0, "aug", 1))
    t3 = torch.rand(5, generator=R.torch_generator(0, "aug", 2))
    assert torch.equal(t1, t2) and not torch.equal(t1, t3)
    # an already-derived integer seed (a function's own) is used as it is
    assert torch.equal(
        torch.rand(3, generator=R.torch_generator(5)),
        torch.rand(3, generator=torch.Generator().manual_seed(5)),
    )


@pytest.mark.parametrize("bad", [-1, 1.5, "3", None, True, np.float64(2.0)])
def test_a_bad_seed_is_refused_naming_it(bad):
    with pytest.raises(ValueError, match="seed"):
        R.stream(bad, "a")
    with pytest.raises(ValueError, match="random_state"):
        R.generator(bad)


@pytest.mark.parametrize("bad", ["", None, 3])
def test_a_purpose_must_be_named(bad):
    with pytest.raises(ValueError, match="purpose"):
        R.stream(0, bad)


def test_generator_passes_a_generator_through_and_seeds_an_int_as_before():
    g = R.stream(0, "x")
    assert R.generator(g) is g
    assert np.array_equal(_draws(R.generator(9)), _draws(np.random.default_rng(9)))  # noqa


def test_two_purposes_draw_independent_streams():
    """Correlation of 20,000 standard normals of two purposes (and two units of one
    purpose) under one seed stays within chance (|r| < 4/sqrt(n)); the first draws of many
    purposes are spread as uniforms are (a shared stream would repeat them)."""
    n = 20_000
    for a, b in [(("a", None), ("b", None)), (("a", 0), ("a", 1)), (("purity", None), ("purity", {"k": 1}))]:
        x = R.stream(0, a[0], a[1]).standard_normal(n)
        y = R.stream(0, b[0], b[1]).standard_normal(n)
        assert abs(np.corrcoef(x, y)[0, 1]) < 4 / np.sqrt(n), (a, b)
    first = np.array([R.stream(0, f"q{i}").random() for i in range(2000)])
    hist, _ = np.histogram(first, bins=10, range=(0, 1))
    chi2 = ((hist - 200) ** 2 / 200).sum()
    assert chi2 < 30  # 9 degrees of freedom: p < 0.0005 beyond


# ---- contracts derived from the analyses' declarations -----------------------------------
def _resample_option(a) -> str | None:
    """The option of `a` that sets its bootstrap resamples (declared with 'bootstrap
    resamples' in its help), None when it has none."""
    found = [o.name for o in a.options if o.type is int and "bootstrap resamples" in o.help]
    assert len(found) <= 1, (a.name, found)
    return found[0] if found else None


def _resampling_analyses():
    from conceptlens.analysis import registered

    return [a for a in registered() if _resample_option(a)]


def test_the_analyses_that_resample_are_found():
    """The derivation finds the two analyses known to resample (if it found none, the
    contract below would check nothing)."""
    assert {"cluster_metrics", "similarity"} <= {a.name for a in _resampling_analyses()}


def _tables(root, a) -> dict[str, pd.DataFrame]:
    """The tables `a` writes, as read through the dashboard's database, in a fixed order."""
    from conceptlens import schema
    from conceptlens.db import WorkspaceDB

    db = WorkspaceDB(root)
    try:
        out = {}
        for t in a.writes:
            if not db.has(t):
                continue
            spec = schema.tables_by_name()[t]
            df = db.query(f"SELECT * FROM {t}")  # a declared table name, not a value
            # Wall times are measurements of the run, not results (declared "Wall time").
            df = df.drop(
                columns=[c.name for c in spec.columns if c.doc.startswith("Wall time")], errors="ignore"
            )
            key = [c for c in spec.key if c in df.columns]  # its declared key
            out[t] = df.sort_values(key, kind="stable").reset_index(drop=True) if key else df
        return out
    finally:
        db.close()


@pytest.fixture(scope="module")
def seeded_runs(factory_template, tmp_path_factory):
    """Each resampling analysis run on three copies of the factory workspace: seeds 0, 0, 1
    (60 resamples), only itself (its inputs are in the factory). Each run's tables, and the
    log of the streams it took: (seed, purpose, unit) of every `rng.entropy` (stream,
    int_seed, torch_generator) and the integer of every `rng.generator(int)`."""
    from conceptlens.analysis import runner
    from tests.conftest import copy_ws

    out = {}
    entropy, generator = R.entropy, R.generator
    for a in _resampling_analyses():
        runs = []
        for i, seed in enumerate((0, 0, 1)):
            log: list = []

            def logged_entropy(s, purpose, unit=None, log=log):
                log.append(("stream", int(s), purpose, repr(unit)))
                return entropy(s, purpose, unit)

            def logged_generator(state, name="random_state", log=log):
                if not isinstance(state, np.random.Generator):
                    log.append(("int", int(state), name, ""))
                return generator(state, name)

            def marked_run(ctx, unit, opts, scope, log=log, run=a.run):
                log.append(("unit", unit.label, "", ""))
                return run(ctx, unit, opts, scope)

            root = copy_ws(factory_template, tmp_path_factory.mktemp(f"seed-{a.name}") / f"ws{i}")
            R.entropy, R.generator = logged_entropy, logged_generator
            run = a.run
            object.__setattr__(a, "run", marked_run)  # a frozen declaration: marks each unit
            try:
                runner.run(
                    root,
                    a.name,
                    {"seed": seed, _resample_option(a): 60},
                    progress_bars=False,
                    with_dependencies=False,
                    force=True,
                )
            finally:
                R.entropy, R.generator = entropy, generator
                object.__setattr__(a, "run", run)
            runs.append((_tables(root, a), log))
        out[a.name] = runs
    return out


def _per_unit(log: list) -> list:
    """The log as (unit, sorted requests of that unit) pairs."""
    out: list = []
    for e in log:
        if e[0] == "unit" or not out:
            out.append((e, []))
        if e[0] != "unit":
            out[-1][1].append(e)
    return [(u, sorted(map(repr, reqs))) for u, reqs in out]


@pytest.mark.parametrize("name", [a.name for a in _resampling_analyses()])
def test_every_stream_follows_the_runs_seed(seeded_runs, name):
    """Every stream an analysis takes from the source carries the run's --seed, and every
    integer seed it hands a metric changes with it: a seed accepted but not used (a stream
    seeded with 0, or a metric called with its default random_state) is caught whatever
    the data, even where an interval of a tiny sample cannot move."""
    (_, first), (_, again), (_, other) = seeded_runs[name]
    assert first, f"{name} took no stream from conceptlens.rng"
    # Within a unit in any order: its parts may run on threads (the scoreboard's scorer).
    assert _per_unit(first) == _per_unit(again), f"{name}: the same seed asked for other streams"
    streams = [e for e in other if e[0] == "stream" and not e[2].startswith(R.FIXED)]
    assert all(e[1] == 1 for e in streams), [e for e in streams if e[1] != 1][:5]
    units = [e for e in first if e[0] == "unit"]
    assert units, f"{name} ran no unit"
    ints0 = [e for e in first if e[0] == "int"]
    ints1 = [e for e in other if e[0] == "int"]
    assert not set(ints0) & set(ints1), f"{name}: metric seeds that ignore --seed: {set(ints0) & set(ints1)}"


@pytest.mark.parametrize("name", [a.name for a in _resampling_analyses()])
def test_no_two_quantities_of_a_unit_share_a_stream(seeded_runs, name):
    """Within one unit of work, each (purpose, unit) stream is taken once: two quantities
    drawing from one stream (their intervals correlated, one's resamples shifting when the
    other's count changes) are caught."""
    _, _, (_, log) = seeded_runs[name]
    shared, seen = [], set()
    for e in log:
        if e[0] == "unit":
            seen = set()
        elif e[0] == "stream" and not e[2].startswith(R.FIXED):
            if e in seen:
                shared.append(e)
            seen.add(e)
    assert not shared, f"{name}: streams taken twice within a unit: {sorted(set(shared))[:5]}"


@pytest.mark.parametrize("name", [a.name for a in _resampling_analyses()])
def test_the_same_seed_gives_bit_identical_tables(seeded_runs, name):
    (first, _), (again, _), _ = seeded_runs[name]
    assert first, f"{name} wrote no table on the factory workspace"
    assert set(first) == set(again)
    for t in first:
        pd.testing.assert_frame_equal(first[t], again[t], check_exact=True, obj=f"{name}.{t}")


def _on_a_small_lattice(x: np.ndarray, finest: int = 20) -> np.ndarray:
    """Whether each value is j/m for some m <= `finest` (an accuracy of a tiny sample: its
    percentile interval is the same under every seed)."""
    m = np.arange(1, finest + 1).reshape((-1,) + (1,) * x.ndim)
    return np.isclose(x[None] * m, np.round(x[None] * m), rtol=0, atol=1e-9).any(axis=0)


@pytest.mark.parametrize("name", [a.name for a in _resampling_analyses()])
def test_another_seed_changes_every_interval(seeded_runs, name):
    """Every interval column (conceptlens.tables.find_intervals: `x_lo`/`x_hi`, or `value`
    with `lo`/`hi`) whose ends are not pinned by a tiny sample's granularity takes other
    values under another seed; at least one column of the analysis is checked."""
    from conceptlens.tables import find_intervals

    (first, _), _, (other, _) = seeded_runs[name]
    checked = 0
    for t, df in first.items():
        for est, ends_of in find_intervals(df).items():
            if len(ends_of) != 2:
                continue
            ends = df[list(ends_of)].to_numpy(float)
            free = (np.isfinite(ends) & ~_on_a_small_lattice(ends) & (ends[:, :1] < ends[:, 1:])).any(axis=1)
            if not free.any():
                continue
            a, b = ends[free], other[t][list(ends_of)].to_numpy(float)[free]
            assert not np.array_equal(a, b), f"{name}.{t}.{est}: the same interval under seeds 0 and 1"
            checked += 1
    assert checked, f"{name}: no interval to check"


# ---- read-time intervals use the unit's own resampling ---------------------------------
def test_read_time_intervals_use_the_units_own_seed_and_resamples(factory_template, tmp_path):
    """The Checkpoints page's intervals of means over clusters resample with the
    `--bootstrap`/`--seed` each cluster_metrics unit was computed with: computed another way
    (the private loop with the triple passed explicitly), and different from the
    analysis's defaults."""
    from conceptlens.analysis import runner
    from conceptlens.db import WorkspaceDB
    from conceptlens.views import checkpoints as V
    from tests.conftest import copy_ws

    root = copy_ws(factory_template, tmp_path / "ws")
    runner.run(
        root,
        "cluster_metrics",
        {"bootstrap": 80, "seed": 5},
        progress_bars=False,
        with_dependencies=False,
        force=True,
    )
    db = WorkspaceDB(root)
    try:
        cm = db.query(
            "SELECT DISTINCT c.dataset, m.k FROM cluster_metrics m JOIN checkpoints c USING (checkpoint_id)"
        )
        checked = 0
        for ds, k in cm.itertuples(index=False):
            res = V.unit_resampling(db, ds, int(k))
            assert res and set(res.values()) == {(80, 5)}, (ds, k, res)
            got = V.cluster_mean_intervals(db, ds, int(k)).set_index("checkpoint_id")
            same = V._cluster_mean_intervals(db, ds, int(k), {c: (80, 5) for c in res}).set_index(
                "checkpoint_id"
            )
            default = V._cluster_mean_intervals(db, ds, int(k), {c: (1000, 0) for c in res}).set_index(
                "checkpoint_id"
            )
            pd.testing.assert_frame_equal(got, same)
            cols = [c for c in got.columns if got[c].notna().any()]
            if cols:
                assert not np.allclose(
                    got[cols].to_numpy(float), default[cols].to_numpy(float), equal_nan=True
                )
                checked += 1
        assert checked, "no dataset with intervals of means to compare"
    finally:
        db.close()
