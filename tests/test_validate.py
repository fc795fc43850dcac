"""`conceptlens validate`: one test per failure mode, each naming table and column."""
import json
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from conceptlens.cli import main
from conceptlens.validate import validate
from conceptlens.workspace import Workspace
from tests.helpers import snapshot, tiny_workspace, write_features


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    return tiny_workspace(tmp_path_factory.mktemp("tpl") / "ws").root


@pytest.fixture()
def ws(tmp_path, template):
    shutil.copytree(template, tmp_path / "ws")
    return Workspace(tmp_path / "ws")


def run_cli(root, capsys):
    code = main(["validate", str(root)])
    return code, capsys.readouterr().out


def check(ws, capsys, file, column, words):
    before = snapshot(ws.root)
    code, out = run_cli(ws.root, capsys)
    assert code == 1, out
    assert snapshot(ws.root) == before, "validate must not modify the workspace"
    hits = [p for p in validate(ws.root) if p.file == file and p.column == column]
    assert hits, out
    assert any(w in hits[0].message for w in words), hits[0]
    assert file in out and (column is None or column in out)
    return hits[0]


def rewrite(ws, name, fn, checkpoint_id=None):
    p = ws.table_path(name, checkpoint_id)
    pq.write_table(fn(pq.read_table(p)), p)


def test_valid_workspace_exits_0(ws, capsys):
    before = snapshot(ws.root)
    code, out = run_cli(ws.root, capsys)
    assert code == 0, out
    assert "valid" in out
    assert snapshot(ws.root) == before


def test_missing_workspace_json(ws, capsys):
    ws.meta_path.unlink()
    check(ws, capsys, "workspace.json", None, ["not found"])


def test_invalid_workspace_json(ws, capsys):
    ws.meta_path.write_text("{not json")
    check(ws, capsys, "workspace.json", None, ["invalid JSON"])


def test_incompatible_schema_version(ws, capsys):
    meta = json.loads(ws.meta_path.read_text())
    meta["schema_version"] = "9.0"
    ws.meta_path.write_text(json.dumps(meta))
    check(ws, capsys, "workspace.json", "schema_version", ["not readable"])


def test_missing_required_table(ws, capsys):
    ws.table_path("checkpoints").unlink()
    p = check(ws, capsys, "checkpoints.parquet", None, ["required table is missing"])
    assert p.table == "checkpoints"


def test_dropped_image_id_column(ws, capsys):
    rewrite(ws, "images", lambda t: t.drop_columns(["image_id"]))
    p = check(ws, capsys, "images.parquet", "image_id", ["required column is missing"])
    assert p.table == "images"


def test_wrong_column_type(ws, capsys):
    rewrite(ws, "images", lambda t: t.set_column(t.column_names.index("width"), "width",
                                                 pc.cast(t["width"], pa.string())))
    check(ws, capsys, "images.parquet", "width", ["expected int"])


def test_null_in_non_nullable_column(ws, capsys):
    def f(t):
        ds = t["dataset"].to_pylist()
        ds[3] = None
        return t.set_column(t.column_names.index("dataset"), "dataset", pa.array(ds, pa.string()))
    rewrite(ws, "images", f)
    p = check(ws, capsys, "images.parquet", "dataset", ["null"])
    assert "row 3" in p.example


def test_duplicate_key(ws, capsys):
    def f(t):
        ids = t["image_id"].to_pylist()
        ids[5] = ids[4]
        return t.set_column(0, "image_id", pa.array(ids, pa.string()))
    rewrite(ws, "images", f)
    p = check(ws, capsys, "images.parquet", "image_id", ["not unique"])
    assert "shapes-00004" in p.example


def test_reference_to_missing_image(ws, capsys):
    def f(t):
        ids = t["image_id"].to_pylist()
        ids[0] = "no-such-image"
        return t.set_column(0, "image_id", pa.array(ids, pa.string()))
    rewrite(ws, "features", f, checkpoint_id="rand0")
    p = check(ws, capsys, "features/rand0.parquet", "image_id", ["not found in images.image_id"])
    assert "no-such-image" in p.example


def test_checkpoint_dataset_must_exist(ws, capsys):
    rewrite(ws, "checkpoints", lambda t: t.set_column(1, "dataset", pa.array(["nope"], pa.string())))
    check(ws, capsys, "checkpoints.parquet", "dataset", ["not found in images.dataset"])


def test_embedding_of_wrong_length(ws, capsys):
    ids = ws.read("features", "rand0")["image_id"].to_pylist()
    emb = [np.zeros(8, np.float32) for _ in ids]
    emb[2] = np.zeros(7, np.float32)
    write_features(ws, "rand0", ids, np.array(emb, dtype=object))
    p = check(ws, capsys, "features/rand0.parquet", "embedding", ["feature_dim=8"])
    assert ids[2] in p.example and "length 7" in p.example


def test_nan_and_inf_in_embedding(ws, capsys):
    ids = ws.read("features", "rand0")["image_id"].to_pylist()
    emb = np.zeros((len(ids), 8), np.float32)
    emb[6, 1] = np.nan
    emb[9, 0] = np.inf
    write_features(ws, "rand0", ids, emb)
    p = check(ws, capsys, "features/rand0.parquet", "embedding", ["NaN or infinity"])
    assert p.message.startswith("2 ")
    assert ids[6] in p.example


def test_missing_features_file(ws, capsys):
    ws.table_path("features", "rand0").unlink()
    check(ws, capsys, "features/rand0.parquet", None, ["file is missing"])


def test_features_file_without_checkpoint_row(ws, capsys):
    ids = ws.read("features", "rand0")["image_id"].to_pylist()
    write_features(ws, "orphan", ids, np.zeros((len(ids), 8), np.float32))
    check(ws, capsys, "features/orphan.parquet", None, ["no row in checkpoints"])


def test_missing_thumbnail_file(ws, capsys):
    (ws.root / "thumbnails/shapes/00007.png").unlink()
    p = check(ws, capsys, "images.parquet", "thumbnail", ["do not exist"])
    assert "00007.png" in p.example


@pytest.mark.parametrize("bad", ["/etc/passwd", "../outside.png", "thumbnails/../../x.png"])
def test_thumbnail_outside_workspace(ws, capsys, bad):
    def f(t):
        th = t["thumbnail"].to_pylist()
        th[1] = bad
        return t.set_column(t.column_names.index("thumbnail"), "thumbnail", pa.array(th, pa.string()))
    rewrite(ws, "images", f)
    check(ws, capsys, "images.parquet", "thumbnail", ["leave the workspace"])


def test_unreadable_parquet(ws, capsys):
    ws.table_path("captions").write_bytes(b"not parquet")
    check(ws, capsys, "captions.parquet", None, ["cannot be read as Parquet"])


def test_not_a_directory(tmp_path, capsys):
    code, out = run_cli(tmp_path / "nothing", capsys)
    assert code == 1 and "is not a directory" in out
