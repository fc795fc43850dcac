"""`conceptlens validate`: every corruption of tests/malformed.py is found, named, harmless."""

import datetime as dt
import json
import os
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conceptlens import schema
from conceptlens import validate as V
from conceptlens.cli import main
from conceptlens.validate import Problem, format_problems, validate
from conceptlens.workspace import Workspace
from harness.factory import make_workspace, snapshot, write_features
from tests.malformed import MALFORMATIONS


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    return make_workspace(tmp_path_factory.mktemp("tpl") / "ws", derived=True).root


@pytest.fixture()
def ws(tmp_path, template):
    shutil.copytree(template, tmp_path / "ws", symlinks=True)
    return Workspace(tmp_path / "ws")


def run_cli(root, capsys, *options):
    code = main(["validate", "--workspace", str(root), *options])
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err, out
    return code, out.out


def hits(problems, m):
    return [
        p
        for p in problems
        if (p.file, p.table, p.column) == (m.file, m.table, m.column) and m.words in p.message
    ]


def test_valid_workspace_exits_0(ws, capsys):
    before = snapshot(ws.root)
    code, out = run_cli(ws.root, capsys)
    assert code == 0, out
    assert "valid workspace" in out
    assert validate(ws.root, deep=False) == []
    assert snapshot(ws.root) == before


def test_registry_covers_the_format():
    assert len(MALFORMATIONS) >= 40
    assert all(
        m.table in schema.TABLES_BY_NAME or m.table == "workspace.json" for m in MALFORMATIONS.values()
    )
    # Every table of the format is broken at least once (vl_models is added broken).
    assert {m.table for m in MALFORMATIONS.values()} >= set(schema.TABLES_BY_NAME)


@pytest.mark.parametrize("name", list(MALFORMATIONS))
def test_malformation_is_reported(ws, capsys, name):
    m = MALFORMATIONS[name]
    m.apply(ws)
    before = snapshot(ws.root)
    code, out = run_cli(ws.root, capsys)
    assert code == 1, out
    assert snapshot(ws.root) == before, "validate must not modify the workspace"
    where = f"{m.file} (table {m.table}" + (f", column {m.column})" if m.column else ")")
    assert where in out, out
    problems = validate(ws.root)
    assert hits(problems, m), format_problems(problems)
    # What the dashboard runs on a page that shows this table: the same problem, and only
    # this table's; quick mode decodes no image and reads no embedding.
    quick = validate(ws.root, deep=False, tables={m.table})
    assert bool(hits(quick, m)) != m.deep_only, format_problems(quick)
    assert {p.table for p in quick} <= {m.table}, format_problems(quick)


def test_null_foreign_key_is_a_null_not_a_missing_reference(ws):
    MALFORMATIONS["clusters_null_image_id"].apply(ws)
    found = [p for p in validate(ws.root) if p.table == "clusters" and p.column == "image_id"]
    assert len(found) == 1 and "null value(s)" in found[0].message, format_problems(found)


def test_duplicate_within_a_features_partition(ws):
    MALFORMATIONS["features_duplicate_image_id"].apply(ws)
    (p,) = [p for p in validate(ws.root, deep=False) if "not unique" in p.message]
    assert p.file == "features/checkpoint_id=ck0/part-0.parquet"
    assert "image_id='toy-0000'" in p.example and "rows 0 and 48" in p.example


def test_same_image_in_two_checkpoints_is_not_a_duplicate(ws):
    # The key is (checkpoint_id, image_id): partitions share image ids by design.
    assert not [p for p in validate(ws.root, deep=False) if "not unique" in p.message]


def test_meta_without_required_fields(ws):
    ws.meta_path.write_text(json.dumps({"schema_version": "2.0"}))
    missing = {p.column for p in validate(ws.root) if p.file == "workspace.json"}
    assert missing == {"name", "description", "created", "provenance"}


def test_format_1_is_one_problem_pointing_at_migrate(ws, capsys):
    MALFORMATIONS["meta_format_1"].apply(ws)
    problems = validate(ws.root)
    assert len(problems) == 1, format_problems(problems)  # no layout noise on top
    assert f"conceptlens migrate --workspace {ws.root}" in problems[0].message
    # Whatever a page asks for: none of its tables can be read.
    assert validate(ws.root, deep=False, tables={"clusters"}) == problems


def test_tables_restriction(ws):
    MALFORMATIONS["thumbnail_missing"].apply(ws)
    MALFORMATIONS["purity_above_one"].apply(ws)
    assert validate(ws.root, deep=False, tables={"clusters", "features"}) == []
    only = validate(ws.root, deep=False, tables={"cluster_metrics"})
    # purity 1.5: outside [0, 1], and above its interval's purity_hi
    assert {(p.table, p.column) for p in only} == {("cluster_metrics", "purity")}
    only = validate(ws.root, deep=False, tables=["images"])
    assert [(p.table, p.column) for p in only] == [("images", "thumbnail")]


def test_broken_referenced_table_does_not_break_its_referrers(ws):
    # images is unreadable: clusters cannot check its image ids, and must not claim
    # they are all missing; its own page stays clean.
    MALFORMATIONS["images_missing"].apply(ws)
    assert validate(ws.root, deep=False, tables={"clusters", "captions", "features"}) == []
    assert [p.table for p in validate(ws.root)] == ["images"]


def test_meta_fields_only_when_asked(ws):
    MALFORMATIONS["meta_without_name"].apply(ws)
    assert validate(ws.root, deep=False, tables={"images"}) == []
    assert [p.column for p in validate(ws.root, deep=False, tables={"workspace.json"})] == ["name"]


def test_unknown_table_name_is_a_problem_not_an_error(ws):
    (p,) = validate(ws.root, tables={"nope"})
    assert p.table == "nope"


def test_every_undecodable_thumbnail_is_named(ws):
    for i in (3, 11):
        p = ws.root / f"thumbnails/toy/{i:04d}.png"
        p.unlink()
        p.write_bytes(b"\x89PNG broken")
    found = [p for p in validate(ws.root) if "does not decode" in p.message]
    assert [p.example.split(",")[0] for p in found] == ["image_id='toy-0003'", "image_id='toy-0011'"]
    assert str(ws.root) not in found[0].message
    assert validate(ws.root, deep=False) == []


def test_symlinks_inside_the_workspace_are_fine(ws):
    src = ws.root / "thumbnails/toy"
    shutil.move(src, ws.root / "thumbnails/real")
    src.symlink_to("real", target_is_directory=True)
    (ws.root / "thumbnails/real/0001.png").unlink()
    (ws.root / "thumbnails/real/0001.png").symlink_to("0002.png")
    assert validate(ws.root) == []


def test_empty_partition_folder_left_by_remove_partition(ws):
    ws.remove_partition("projections", checkpoint_id="ck1", method="umap")
    assert (ws.root / "projections/checkpoint_id=ck1/method=umap").is_dir()
    assert validate(ws.root) == []


def test_json_output(ws, capsys):
    MALFORMATIONS["purity_above_one"].apply(ws)
    code, out = run_cli(ws.root, capsys, "--json")
    assert code == 1
    found = [Problem(**d) for d in json.loads(out)]  # outside [0, 1] and above purity_hi
    assert {(p.table, p.column) for p in found} == {("cluster_metrics", "purity")}
    assert all("row 1" in p.example for p in found) and any("outside [0, 1]" in p.message for p in found)


# ---- validate never raises --------------------------------------------------------
def test_not_a_workspace(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / "features").mkdir()
    (tmp_path / "features" / "x.parquet").write_bytes(b"junk")
    code, out = run_cli(tmp_path, capsys)
    assert code == 1
    assert "workspace.json (table workspace.json): not found" in out
    assert "images.parquet (table images): required table is missing" in out
    assert "features/x.parquet (table features, column checkpoint_id)" in out


@pytest.mark.parametrize("where", ["missing", "file"])
def test_not_a_directory(tmp_path, capsys, where):
    root = tmp_path / "ws"
    if where == "file":
        root.write_text("not a folder")
    code, out = run_cli(root, capsys)
    assert code == 1 and "not a directory" in out, out


def test_everything_garbage(ws):
    """Every table file random bytes, every partitioned table a file, workspace.json a folder."""
    ws.meta_path.unlink()
    ws.meta_path.mkdir()
    for t in schema.TABLES:
        p = ws.root / t.path
        if p.is_dir():
            shutil.rmtree(p)
        if p.exists():
            p.unlink()
        p.write_bytes(os.urandom(64))
    problems = validate(ws.root)
    assert {p.table for p in problems} == {"workspace.json"} | set(schema.TABLES_BY_NAME)
    assert all(p.file and p.message for p in problems)


def test_unexpected_error_in_a_check_becomes_a_problem(ws, monkeypatch):
    from conceptlens import validate as v

    def boom(self, ld):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(v.Validator, "check_values", boom)
    problems = validate(ws.root, deep=False, tables={"clusters"})
    assert [(p.file, p.table, p.column) for p in problems] == [("clusters", "clusters", None)]
    assert "RuntimeError: disk on fire" in problems[0].message
    monkeypatch.undo()
    monkeypatch.setattr(pq, "ParquetFile", lambda *a, **k: 1 / 0)
    problems = validate(ws.root)
    assert "images.parquet" in {p.file for p in problems}
    assert all("ZeroDivisionError" in p.message for p in problems), format_problems(problems)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 3), st.sampled_from([0.5, 1.5, 2.0])),
        min_size=1,
        max_size=40,
    )
)
def test_key_uniqueness_by_codes_is_what_a_group_by_says(rows):
    import pyarrow as pa

    from conceptlens.validate import _codes_unique

    t = pa.table({"s": [r[0] for r in rows], "i": [r[1] for r in rows], "f": [r[2] for r in rows]})
    for key in (["s"], ["s", "i"], ["i", "s", "f"]):
        counts = t.group_by(key).aggregate([([], "count_all")])
        assert _codes_unique(t, key) == (counts.num_rows == t.num_rows), (key, rows)


# ---- wide files, non-finite lists, oversized thumbnails (issue 24) -----------------------
def test_a_file_with_thousands_of_columns_is_rejected_from_its_footer(ws, monkeypatch):
    from tests.malformed import CM0, _wide

    _wide(CM0, 20_000)(ws)
    read = pq.ParquetFile.read

    def no_wide_read(self, *args, **kwargs):
        assert self.metadata.num_columns < 1000, "the data of a 20,000-column file was read"
        return read(self, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "read", no_wide_read)
    (p,) = validate(ws.root, deep=False, tables={"cluster_metrics"})
    assert (p.file, p.table, p.column) == (CM0, "cluster_metrics", None)
    assert "holds 20,000 columns that are not the table's (at most 16 allowed" in p.message


def test_factor_columns_of_images_have_a_larger_allowance(ws):
    from tests.malformed import IMAGES, _wide

    spec = schema.TABLES_BY_NAME["images"]
    allowed = spec.max_extra_columns
    assert allowed > schema.TABLES_BY_NAME["cluster_metrics"].max_extra_columns
    factors = len(set(pq.read_schema(ws.root / IMAGES).names) - {c.name for c in spec.columns})
    _wide(IMAGES, allowed - factors)(ws)
    assert validate(ws.root, deep=False, tables={"images"}) == []
    _wide(IMAGES, 1, prefix="one_more")(ws)
    found = validate(ws.root, deep=False, tables={"images"})
    assert [p.file for p in found] == [IMAGES] and f"holds {allowed + 1} columns" in found[0].message


@pytest.mark.parametrize("side", [10_000, 14_000])  # past PIL's warning, past its error
def test_an_oversized_thumbnail_is_a_problem_not_a_pil_warning(ws, side):
    import warnings

    from tests.malformed import png_header

    (ws.root / "thumbnails/toy/0004.png").unlink()
    (ws.root / "thumbnails/toy/0004.png").write_bytes(png_header(side, side))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a DecompressionBombWarning fails the test
        found = [p for p in validate(ws.root) if p.column == "thumbnail"]
    assert len(found) == 1, format_problems(found)
    assert "thumbnails/toy/0004.png has " in found[0].message
    assert f"{side * side:,} pixels" in found[0].message
    assert f"more than the {schema.MAX_THUMBNAIL_PIXELS:,}" in found[0].message


def test_the_dashboard_draws_an_oversized_thumbnail_as_unreadable(ws):
    from types import SimpleNamespace

    from components.image_grid import _readable
    from tests.malformed import png_header

    ok = _readable(SimpleNamespace(root=ws.root), "thumbnails/toy/0005.png")
    assert ok is not None
    (ws.root / "thumbnails/toy/0005.png").unlink()
    (ws.root / "thumbnails/toy/0005.png").write_bytes(png_header(3000, 3000))
    assert _readable(SimpleNamespace(root=ws.root), "thumbnails/toy/0005.png") is None


# ---- validate.py ---------------------------------------------------------------------------------
def test_a_file_whose_footer_reads_but_whose_pages_do_not_is_reported(tmp_path):
    """images.parquet with an intact footer (its columns and types check out) but garbage
    data pages: one problem of table `images`, file images.parquet, "cannot be read as
    Parquet". Catches the report's file and table swapped (the problem then belongs to no
    selected table and is dropped)."""
    from harness.factory import make_workspace

    ws = make_workspace(tmp_path / "ws")
    path = ws.table_path("images")
    data = bytearray(path.read_bytes())
    footer = int.from_bytes(data[-8:-4], "little")
    end = len(data) - 8 - footer
    data[4:end] = b"\xff" * (end - 4)
    path.write_bytes(bytes(data))
    assert "image_id" in pq.ParquetFile(path).schema_arrow.names  # the footer still reads
    problems = [p for p in validate(ws.root, deep=False) if "cannot be read as Parquet" in p.message]
    assert [(p.table, p.file, p.column) for p in problems] == [
        ("images", path.relative_to(ws.root).as_posix(), None)
    ]


# ---- every file, partition, row and column is checked, not the first one many times ------------
N = 48  # images of the factory workspace


CKS = ("ck0", "ck1", "ck2")


@pytest.fixture(scope="module")
def plain_template(tmp_path_factory):
    return make_workspace(tmp_path_factory.mktemp("tpl") / "ws").root


@pytest.fixture()
def plain_ws(tmp_path, plain_template):
    shutil.copytree(plain_template, tmp_path / "ws", symlinks=True)
    return Workspace(tmp_path / "ws")


def of(problems, table, column="*"):
    return [p for p in problems if p.table == table and (column == "*" or p.column == column)]


def ids():
    return [f"toy-{i:04d}" for i in range(N)]


def labels():
    return [("red", "green", "blue")[i % 3] for i in range(N)]  # harness/factory.py's COLORS


def write_raw(plain_ws: Workspace, rel: str, table: pa.Table) -> None:
    path = plain_ws.root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)


def rewrite(plain_ws: Workspace, rel: str, fn) -> None:
    write_raw(plain_ws, rel, fn(pq.read_table(plain_ws.root / rel)))


def put(t: pa.Table, name: str, values, typ=None) -> pa.Table:
    arr = pa.array(values, typ or t.schema.field(name).type)
    field = pa.field(name, arr.type, nullable=t.schema.field(name).nullable)
    return t.set_column(t.column_names.index(name), field, arr)


def write_clusters(plain_ws: Workspace, cid: str, k: int = 4, rows=None, rel=None) -> str:
    """clusters of `cid` at `k`: image i in cluster i % k, distance i / 100."""
    rows = range(N) if rows is None else rows
    t = pa.table(
        {
            "image_id": pa.array([f"toy-{i:04d}" for i in rows], pa.string()),
            "cluster": pa.array([i % k for i in rows], pa.int64()),
            "distance": pa.array([i / 100 for i in rows], pa.float64()),
        }
    )
    rel = rel or f"clusters/checkpoint_id={cid}/k={k}/part-0.parquet"
    write_raw(plain_ws, rel, t)
    return rel


def write_sizes(plain_ws: Workspace, cid: str, sizes, k: int = 4) -> str:
    """cluster_metrics of `cid` at `k` with these sizes (other required columns null)."""
    rows = [{"cluster": c, "size": s} for c, s in enumerate(sizes)]
    t = pa.Table.from_pylist(rows, schema=schema.arrow_schema("cluster_metrics", partition=False))
    rel = f"cluster_metrics/checkpoint_id={cid}/k={k}/part-0.parquet"
    write_raw(plain_ws, rel, t)
    return rel


# ---- the names given to validate ---------------------------------------------------
def test_every_unknown_table_name_is_reported_once_in_order(plain_ws):
    """Catches reporting the first unknown name for each one, and an unsorted report."""
    problems = validate(plain_ws.root, deep=False, tables={"zeta", "images", "alpha", "mid"})
    assert [(p.file, p.table) for p in problems] == [(".", "alpha"), (".", "mid"), (".", "zeta")]


def test_each_text_field_of_workspace_json_is_type_checked(plain_ws):
    """Catches checking `name` three times instead of name, description and created."""
    meta = json.loads(plain_ws.meta_path.read_text())
    plain_ws.meta_path.write_text(json.dumps({**meta, "description": 5, "created": 7}))
    problems = validate(plain_ws.root, deep=False, tables={"workspace.json"})
    assert [(p.column, p.message) for p in problems] == [
        ("description", "must be a string, got 5"),
        ("created", "must be a string, got 7"),
    ], format_problems(problems)


# ---- partition columns stored inside files -------------------------------------------
def test_every_partition_level_is_looked_for_inside_the_file(plain_ws):
    """clusters is partitioned by checkpoint_id, then k: a file holding k (the second
    level) is reported, and only the values that differ from the folder's are listed,
    smallest first. Catches checking the first level twice, listing every value as a clash
    and listing the largest first."""
    rel = write_clusters(plain_ws, "ck0")
    write_clusters(plain_ws, "ck1")
    rewrite(plain_ws, rel, lambda t: t.append_column("k", pa.array([4] * N, pa.int64())))
    (p,) = of(validate(plain_ws.root, deep=False), "clusters")
    assert (p.file, p.column) == (rel, "k"), p
    assert "also stored inside the file" in p.message and "other values" not in p.message, p
    # Now the file holds k values 4, 5, 6, 7 and 8: four of them clash, the three smallest named.
    rewrite(plain_ws, rel, lambda t: put(t, "k", [4 + i % 5 for i in range(N)]))
    (p,) = of(validate(plain_ws.root, deep=False), "clusters")
    assert p.message.endswith("the file holds other values: ['5', '6', '7']"), p


# ---- rows, columns and files ---------------------------------------------------------
def test_example_leaves_out_partition_columns_and_columns_the_file_lacks(plain_ws):
    """An example names a row by its key minus the partition columns (they are in the file
    name), and a key column the file does not have is left out instead of stopping the
    check. Catches `_example` showing every key column, and not filtering missing ones."""
    rel = write_clusters(plain_ws, "ck1")
    rewrite(plain_ws, rel, lambda t: put(t, "distance", [-1.0 if i == 7 else i / 100 for i in range(N)]))
    (p,) = of(validate(plain_ws.root, deep=False), "clusters")
    assert (p.file, p.column, p.example) == (rel, "distance", "image_id='toy-0007', distance=-1.0 (row 7)")

    rewrite(plain_ws, "images.parquet", lambda t: t.drop_columns(["image_id"]))
    rewrite(plain_ws, "images.parquet", lambda t: put(t, "width", [-3 if i == 5 else 8 for i in range(N)]))
    problems = of(validate(plain_ws.root, deep=False), "images")
    assert [(p.column, p.example) for p in problems] == [
        ("image_id", None),
        ("width", "width=-3 (row 5)"),
    ], format_problems(problems)


def test_a_duplicate_key_in_the_last_partition_is_found(plain_ws):
    """Catches the per-file uniqueness shortcut looking at the first file's rows only."""
    rel = "features/checkpoint_id=ck2/part-0.parquet"
    rewrite(plain_ws, rel, lambda t: put(t, "image_id", [f"toy-{min(i, 46):04d}" for i in range(N)]))
    (p,) = [p for p in validate(plain_ws.root, deep=False) if "not unique" in p.message]
    assert (p.file, p.table, p.column) == (rel, "features", "image_id"), p
    assert p.example == "image_id='toy-0046' (rows 46 and 47)", p


def test_checkpoints_without_feature_dim_leave_the_features_check_working(plain_ws):
    """The features check reads checkpoint ids and, when present, feature_dim. Catches
    selecting a column that checkpoints.parquet lacks (the features check then fails)."""
    rewrite(plain_ws, "checkpoints.parquet", lambda t: t.drop_columns(["feature_dim"]))
    problems = validate(plain_ws.root)
    assert [(p.table, p.column) for p in problems] == [("checkpoints", "feature_dim")], format_problems(
        problems
    )
    # and the features check still runs: a checkpoint without its features is reported.
    (plain_ws.root / "features/checkpoint_id=ck1/part-0.parquet").unlink()
    assert [p.file for p in of(validate(plain_ws.root), "features")] == ["features/checkpoint_id=ck1"]


def test_a_checkpoint_row_without_id_is_a_null_not_a_missing_partition(plain_ws):
    """Catches the features check keeping checkpoint rows whose id is null: it would ask
    for a folder `checkpoint_id=None`."""

    def add_null_row(t):
        t = t.cast(pa.schema([f.with_nullable(True) for f in t.schema]))
        row = t.slice(0, 1).to_pylist()[0]
        return pa.concat_tables([t, pa.Table.from_pylist([{**row, "checkpoint_id": None}], schema=t.schema)])

    rewrite(plain_ws, "checkpoints.parquet", add_null_row)
    problems = validate(plain_ws.root)
    assert [(p.table, p.column) for p in problems] == [("checkpoints", "checkpoint_id")], format_problems(
        problems
    )
    assert "null value(s)" in problems[0].message


def test_every_checkpoint_without_features_is_named_in_order(plain_ws):
    """Catches naming the first missing partition for each, and an unsorted report."""
    for cid in ("ck2", "ck1"):
        shutil.rmtree(plain_ws.root / f"features/checkpoint_id={cid}")
    problems = of(validate(plain_ws.root, deep=False), "features")
    assert [(p.file, p.example) for p in problems] == [
        ("features/checkpoint_id=ck1", "checkpoint_id='ck1'"),
        ("features/checkpoint_id=ck2", "checkpoint_id='ck2'"),
    ], format_problems(problems)


# ---- embeddings (deep) ---------------------------------------------------------------
def set_embeddings(plain_ws: Workspace, cid: str, fn) -> str:
    rel = f"features/checkpoint_id={cid}/part-0.parquet"

    def edit(t):
        emb = t["embedding"].to_pylist()
        fn(emb)
        return put(t, "embedding", emb, pa.list_(pa.float32()))

    rewrite(plain_ws, rel, edit)
    return rel


def test_every_kind_of_bad_embedding_is_counted_in_every_file(plain_ws):
    """Defects of three kinds in the last file, NaNs in another: each kind counted by rows
    (a row with two NaNs is one row), each file reported. Catches checking the first file
    only, counting the first kind only, and counting every row once one value is NaN."""

    def last(e):
        e[3][0] = e[3][5] = float("nan")  # one row, two NaNs
        e[9][2] = float("inf")
        e[20] = None
        e[30] = e[30][:5]

    rel2 = set_embeddings(plain_ws, "ck2", last)
    rel1 = set_embeddings(plain_ws, "ck1", lambda e: e[40].__setitem__(0, float("-inf")))
    problems = of(validate(plain_ws.root), "features", "embedding")
    assert [(p.file, p.message, p.example) for p in problems] == [
        (rel1, "1 embedding(s) contain NaN or infinity", "image_id='toy-0040' (row 40)"),
        (rel2, "1 null embedding(s) in a non-nullable column", "image_id='toy-0020' (row 20)"),
        (rel2, "1 embedding(s) do not have length feature_dim=8", "image_id='toy-0030' (row 30), length 5"),
        (rel2, "2 embedding(s) contain NaN or infinity", "image_id='toy-0003' (row 3)"),
    ], format_problems(problems)
    assert of(validate(plain_ws.root, deep=False), "features") == []


def test_embeddings_past_the_first_batch_are_checked(plain_ws):
    """The deep check streams a file in batches of 8,192 rows. Catches checking the first
    batch as many times as there are batches."""
    n = 8192 + 20
    rng = np.random.default_rng(0)
    emb = rng.standard_normal((n, 8))
    emb[8200, 4] = np.nan
    write_features(plain_ws, "ck1", [f"toy-{i % N:04d}" for i in range(n)], emb)
    problems = [p for p in of(validate(plain_ws.root), "features", "embedding")]
    assert [(p.message, p.example) for p in problems] == [
        ("1 embedding(s) contain NaN or infinity", "image_id='toy-0040' (row 8200)")
    ], format_problems(problems)


# ---- cluster sizes -------------------------------------------------------------------
def test_cluster_sizes_are_compared_with_their_own_partition(plain_ws):
    """Sizes add up to the images of the matching clusters partition, whichever file of it
    holds them. Catches counting the first partition for all, checking only the first
    checkpoint's sums, and counting one file of a partition split in two."""
    write_clusters(plain_ws, "ck0")
    write_clusters(plain_ws, "ck1", rows=range(40))  # ck1 clustered 40 images,
    write_clusters(
        plain_ws, "ck1", rows=range(40, N), rel="clusters/checkpoint_id=ck1/k=4/part-1.parquet"
    )  # +8
    write_clusters(plain_ws, "ck2", rows=range(30))
    write_sizes(plain_ws, "ck0", [12, 12, 12, 12])
    write_sizes(plain_ws, "ck1", [12, 12, 12, 12])
    bad = write_sizes(plain_ws, "ck2", [8, 8, 8, 8])  # 32, but ck2 clustered 30 images
    problems = of(validate(plain_ws.root, deep=False), "cluster_metrics")
    assert [(p.file, p.column, p.message) for p in problems] == [
        (bad, "size", "cluster sizes sum to 32 but clusters/checkpoint_id=ck2/k=4 holds 30 image(s)")
    ], format_problems(problems)


def test_a_link_count_is_bounded_by_both_cluster_sizes(plain_ws):
    """A link between clusters a and b counts at most min(size_a, size_b) images. Catches
    comparing the count with the first bound (size_a) as many times as there are bounds."""
    rows = [
        {
            "k": 4,
            "checkpoint_a": "ck0",
            "checkpoint_b": "ck1",
            "a": 0,
            "b": 1,
            "count": 5,
            "size_a": 12,
            "size_b": 6,
        },
        {
            "k": 4,
            "checkpoint_a": "ck0",
            "checkpoint_b": "ck1",
            "a": 1,
            "b": 2,
            "count": 7,
            "size_a": 12,
            "size_b": 6,
        },
    ]
    t = pa.Table.from_pylist(rows, schema=schema.arrow_schema("cluster_links", partition=False))
    rel = "cluster_links/dataset=toy/part-0.parquet"
    write_raw(plain_ws, rel, t)
    problems = validate(plain_ws.root, deep=False)
    assert [(p.file, p.column, p.message) for p in problems] == [
        (rel, "count", "1 value(s) greater than size_b")
    ], format_problems(problems)
    assert "(row 1)" in problems[0].example


# ---- paths ---------------------------------------------------------------------------
def test_each_kind_of_bad_path_is_its_own_problem(plain_ws):
    """Catches reporting the first kind of bad thumbnail path for every kind."""
    rewrite(
        plain_ws,
        "images.parquet",
        lambda t: put(
            t,
            "thumbnail",
            [
                "thumbnails/toy/nope.png" if i == 4 else "/abs/x.png" if i == 9 else r
                for i, r in enumerate(t["thumbnail"].to_pylist())
            ],
        ),
    )
    problems = of(validate(plain_ws.root, deep=False), "images", "thumbnail")
    assert sorted((p.message, p.example) for p in problems) == [
        (
            "1 path(s) are not relative to the workspace (absolute or empty)",
            "image_id='toy-0009', thumbnail='/abs/x.png' (row 9)",
        ),
        ("1 path(s) do not exist", "image_id='toy-0004', thumbnail='thumbnails/toy/nope.png' (row 4)"),
    ], format_problems(problems)


# ---- saved selections ----------------------------------------------------------------
def test_a_selection_of_later_images_is_valid(plain_ws):
    """Every image of the dataset counts as known. Catches knowing the first image only."""
    row = {
        "name": "later ones",
        "image_ids": ["toy-0005", "toy-0040"],
        "n_images": 2,
        "origin": "a test",
        "checkpoint_id": None,
        "created": dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc),
    }
    t = pa.Table.from_pylist([row], schema=schema.arrow_schema("selections", partition=False))
    write_raw(plain_ws, "selections/dataset=toy/part-0.parquet", t)
    assert validate(plain_ws.root) == []
    t = put(t, "image_ids", [["toy-0005", "toy-0040", "toy-9999"]])
    write_raw(plain_ws, "selections/dataset=toy/part-0.parquet", put(t, "n_images", [3]))
    problems = validate(plain_ws.root)
    assert [(p.table, p.column, p.message) for p in problems] == [
        ("selections", "image_ids", "1 row(s) hold value(s) not found in images.image_id"),
        ("selections", "image_ids", "1 value(s) hold ids that are not images of the selection's dataset"),
    ], format_problems(problems)


# ---- label hierarchies -----------------------------------------------------------------
def add_dataset(plain_ws: Workspace, name: str, n: int) -> None:
    """A second dataset in images: `n` images (sharing toy's thumbnails), shape as factor."""

    def edit(t):
        extra = t.slice(0, n)
        extra = put(extra, "image_id", [f"{name}-{i:04d}" for i in range(n)])
        extra = put(extra, "dataset", [name] * n)
        return pa.concat_tables([t, extra])

    rewrite(plain_ws, "images.parquet", edit)


def write_hierarchy(plain_ws: Workspace, dataset: str, column: str, pairs) -> str:
    rows = [{"images_column": column, "node": n, "parent": p, "name": None} for n, p in pairs]
    t = pa.Table.from_pylist(rows, schema=schema.arrow_schema("label_hierarchy", partition=False))
    rel = f"label_hierarchy/dataset={dataset}/part-0.parquet"
    write_raw(plain_ws, rel, t)
    return rel


COLOUR_TREE = [("colour", None), ("warm", "colour"), ("red", "warm"), ("green", "colour"), ("blue", "colour")]


def test_a_valid_hierarchy_has_no_problem(plain_ws):
    """Every row is a node of its dataset, every image's label a node. Catches keeping the
    first row per dataset, keying rows by node or parent instead of dataset, and counting
    images whose label is a node."""
    write_hierarchy(plain_ws, "toy", "label_name", COLOUR_TREE)
    assert validate(plain_ws.root) == []


def test_hierarchy_problems_of_every_dataset_are_found_in_order(plain_ws):
    """Two datasets, each with its own images column and defects. Catches checking the
    first dataset (or the first row's images column) only, and reporting out of order."""
    add_dataset(plain_ws, "zoo", 10)  # shape: circle/square
    # toy: no blue, and a cycle; zoo: no square, and a cycle.
    toy = write_hierarchy(
        plain_ws, "toy", "label_name", [("red", None), ("green", "red"), ("a", "b"), ("b", "a")]
    )
    zoo = write_hierarchy(plain_ws, "zoo", "shape", [("circle", "x"), ("x", "circle")])
    problems = of(validate(plain_ws.root), "label_hierarchy")
    off = "image(s) hold a value of images.{} that is not a node of the hierarchy: {!r}"
    assert [(p.file, p.column, p.message) for p in problems] == [
        (toy, "parent", "dataset 'toy': cycle(s) 'a' -> 'b' -> 'a'"),
        (zoo, "parent", "dataset 'zoo': cycle(s) 'circle' -> 'x' -> 'circle'"),
        (toy, "node", "dataset 'toy': 16 " + off.format("label_name", "blue")),
        (zoo, "node", "dataset 'zoo': 4 " + off.format("shape", "square")),  # images 3, 4, 5 and 9
    ], format_problems(problems)


def test_images_off_the_hierarchy_are_counted_and_listed_in_order(plain_ws):
    """Catches counting every image (not only those whose label is no node), and listing
    the values largest first."""
    rel = write_hierarchy(plain_ws, "toy", "label_name", [("red", None)])
    (p,) = validate(plain_ws.root)
    assert (p.file, p.column) == (rel, "node")
    assert p.message == (
        "dataset 'toy': 32 image(s) hold a value of images.label_name that is not a node of the "
        "hierarchy: 'blue', 'green'"
    ), p
    assert 32 == sum(v != "red" for v in labels())


def test_a_parent_that_is_no_node_is_one_problem(plain_ws):
    """A parent outside the hierarchy is reported once, as such; only cycles come from the
    tree check. Catches reporting the tree check's other findings again."""
    rel = write_hierarchy(plain_ws, "toy", "label_name", [*COLOUR_TREE, ("purple", "violet")])
    problems = validate(plain_ws.root)
    assert [(p.file, p.column, p.message) for p in problems] == [
        (rel, "parent", "1 value(s) are not nodes of the same dataset")
    ], format_problems(problems)


def test_a_second_images_column_in_a_dataset_is_reported(plain_ws):
    """Catches comparing each row's images column with its own instead of the first row's."""
    rows = [{"images_column": "label_name", "node": n, "parent": p, "name": None} for n, p in COLOUR_TREE]
    rows[3]["images_column"] = "shape"
    t = pa.Table.from_pylist(rows, schema=schema.arrow_schema("label_hierarchy", partition=False))
    write_raw(plain_ws, "label_hierarchy/dataset=toy/part-0.parquet", t)
    problems = validate(plain_ws.root)
    assert [(p.column, p.message, p.example) for p in problems] == [
        (
            "images_column",
            "1 value(s) differ from the dataset's first row (one images column per dataset)",
            "node='green', images_column='shape' (row 3)",
        )
    ], format_problems(problems)


# ---- a check that fails names its file and table ---------------------------------------
@pytest.mark.parametrize(
    "method, tables, where",
    [
        ("_list", {"images"}, ("images.parquet", "images")),
        ("_load", {"images"}, ("images.parquet", "images")),
        ("_read_file", {"features"}, ("features/checkpoint_id=ck0/part-0.parquet", "features")),
        ("check_table", {"images"}, ("images.parquet", "images")),
        ("check_key", {"images"}, ("images.parquet", "images")),
        ("check_sizes", {"cluster_metrics"}, ("cluster_metrics", "cluster_metrics")),
    ],
)
def test_a_check_that_fails_names_its_file_and_table(plain_ws, monkeypatch, method, tables, where):
    """Catches the file and table of a failed check given to `guarded` the other way round
    (the problem is then filed under a table nobody asked for, and dropped), and a check
    left unguarded (its error would stop the whole validation)."""

    def boom(*args, **kwargs):
        raise RuntimeError("disk on fire")

    write_clusters(plain_ws, "ck0")
    write_sizes(plain_ws, "ck0", [12, 12, 12, 12])
    monkeypatch.setattr(V.Validator, method, boom)
    problems = validate(plain_ws.root, deep=False, tables=tables)
    assert [(p.file, p.table) for p in problems][:1] == [where], format_problems(problems)
    assert problems[0].message == "could not be checked: RuntimeError: disk on fire"
