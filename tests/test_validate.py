"""`conceptlens validate`: every corruption of tests/malformed.py is found, named, harmless."""

import json
import os
import shutil

import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conceptlens import schema
from conceptlens.cli import main
from conceptlens.validate import Problem, format_problems, validate
from conceptlens.workspace import Workspace
from tests.factory import make_workspace, snapshot
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
