"""Saved selections (conceptlens/selections.py, the `selections` table of format 2.3): saves are
appended and never rewrite an older file, a name reopens its latest save, bad names and ids are
refused with the parameter named, only the owner saves from the dashboard, validate checks the
stored rows, ids travel in links only when few, and the command line."""

import datetime as dt

import pyarrow as pa
import pytest

from conceptlens import schema
from conceptlens import selections as S
from conceptlens.cli import main
from conceptlens.db import WorkspaceDB
from conceptlens.permissions import PermissionDenied
from conceptlens.validate import validate
from conceptlens.workspace import Workspace
from harness.factory import make_workspace

T0 = dt.datetime(2026, 11, 25, 12, 0, tzinfo=dt.timezone.utc)


@pytest.fixture
def root(tmp_path):
    """The factory's tiny workspace (dataset toy: 48 images toy-0000 ... toy-0047, checkpoints
    ck0..ck2) plus a second dataset's image, `other-0`."""
    ws = make_workspace(tmp_path / "ws", n_images=48, n_checkpoints=3)
    images = ws.read("images")
    other = {**images.slice(0, 1).to_pylist()[0], "image_id": "other-0", "dataset": "other"}
    ws.write("images", pa.concat_tables([images, pa.Table.from_pylist([other], schema=images.schema)]))
    return ws.root


def ids(*numbers):
    return [f"toy-{i:04d}" for i in numbers]


def test_saves_are_appended_and_a_name_reopens_its_latest_save(root):
    a = S.save(root, "reds", "toy", ids(0, 3, 6), "label=0", checkpoint="ck0", now=T0)
    assert a["n_images"] == 3 and a["image_ids"] == ids(0, 3, 6)
    (first,) = Workspace(root).files("selections")
    before = first.read_bytes()
    S.save(root, "reds", "toy", ids(0, 3, 6, 9, 9), "csv upload (x.csv)", now=T0 + dt.timedelta(seconds=1))
    S.save(root, "blues", "toy", ids(2), "label=2", now=T0 + dt.timedelta(seconds=2))
    files = Workspace(root).files("selections")
    assert len(files) == 3 and first in files and first.read_bytes() == before  # never rewritten
    assert validate(root) == []
    db = WorkspaceDB(root)
    row = S.load(db, "toy", "reds")
    assert row["image_ids"] == ids(0, 3, 6, 9)  # the repeated id kept once, in order
    assert (row["n_images"], row["origin"], row["checkpoint_id"]) == (4, "csv upload (x.csv)", None)
    assert row["created"] == T0 + dt.timedelta(seconds=1)
    listed = S.saved(db, "toy")
    assert list(listed["name"]) == ["blues", "reds"]  # newest first, one row per name
    assert list(listed["saves"]) == [1, 2] and list(listed["n_images"]) == [1, 4]
    assert S.load(db, "toy", "nothing") is None and S.saved(db, "other").empty


def test_an_empty_workspace_has_no_saved_selection(root):
    db = WorkspaceDB(root)
    assert S.saved(db, "toy").empty and S.load(db, "toy", "x") is None


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"name": ""}, "name: give a selection name"),
        ({"name": "x" * 81}, "name: 81 characters, at most 80"),
        ({"name": "a\tb"}, "only printable characters"),
        ({"name": "a\nb"}, "only printable characters"),
        ({"name": " padded"}, "no leading or trailing spaces"),
        ({"image_ids": []}, "image_ids: the selection holds no image"),
        ({"image_ids": "toy-0000"}, "image_ids: give a list"),
        (
            {"image_ids": ["toy-0000", "other-0"]},
            "image_ids: 1 id(s) are not images of this dataset, e.g. 'other-0'",
        ),
        ({"image_ids": ["nope"]}, "not images of this dataset"),
        ({"dataset": "nope"}, "dataset 'nope': images.parquet has no image of it"),
        ({"origin": " "}, "origin: say where"),
        ({"origin": "o" * 501}, "origin: 501 characters"),
        ({"checkpoint": "ck9"}, "checkpoint 'ck9': not in checkpoints.parquet"),
    ],
)
def test_bad_saves_are_refused_naming_the_parameter_and_write_nothing(root, kw, message):
    args = {"name": "ok", "dataset": "toy", "image_ids": ids(1), "origin": "label=1", **kw}
    with pytest.raises(S.SelectionError) as e:
        S.save(root, **args)
    assert message in str(e.value)
    assert Workspace(root).files("selections") == []


def test_a_checkpoint_of_another_dataset_is_refused(root):
    ws = Workspace(root)
    ck = ws.read("checkpoints").to_pylist()
    ck[2]["dataset"] = "other"
    ws.write("checkpoints", pa.Table.from_pylist(ck, schema=ws.read("checkpoints").schema))
    with pytest.raises(S.SelectionError, match="checkpoint 'ck2' is of dataset 'other', not 'toy'"):
        S.save(root, "x", "toy", ids(1), "o", checkpoint="ck2")


def test_only_the_owner_saves_from_the_dashboard(root, monkeypatch):
    kw = dict(name="g", dataset="toy", image_ids=ids(1, 2), origin="box on the Clusters UMAP")
    monkeypatch.delenv("CONCEPTLENS_OWNER_SECRET", raising=False)
    # No secret: a server on a loopback address is its visitor's own; one listening beyond is nobody's.
    with pytest.raises(PermissionDenied, match="listens beyond this machine"):
        S.save_as(None, "0.0.0.0", root, **kw)
    assert Workspace(root).files("selections") == []
    S.save_as(None, "127.0.0.1", root, **kw)
    assert len(Workspace(root).files("selections")) == 1
    # A secret: only whoever gives it.
    monkeypatch.setenv("CONCEPTLENS_OWNER_SECRET", "s3cret")
    for given, address in ((None, "127.0.0.1"), ("wrong", "0.0.0.0"), ("s3cret!", "127.0.0.1")):
        with pytest.raises(PermissionDenied, match="give the owner secret"):
            S.save_as(given, address, root, **kw)
    assert len(Workspace(root).files("selections")) == 1
    S.save_as("s3cret", "0.0.0.0", root, **kw)
    assert len(Workspace(root).files("selections")) == 2
    # A read-only deployment writes nothing, the owner's saves included.
    monkeypatch.setenv("CONCEPTLENS_READ_ONLY", "1")
    with pytest.raises(PermissionDenied, match="read-only"):
        S.save_as("s3cret", "0.0.0.0", root, **kw)
    assert len(Workspace(root).files("selections")) == 2


def _bad_row(root, **kw):
    row = dict(name="ok", image_ids=ids(1, 2), n_images=2, origin="o", checkpoint_id=None, created=T0)
    row.update(kw)
    t = pa.Table.from_pylist([row], schema=schema.arrow_schema("selections", partition=False))
    Workspace(root).append("selections", t, dataset="toy")


@pytest.mark.parametrize(
    ("kw", "column", "message"),
    [
        ({"name": "a\tb"}, "name", "printable characters"),
        ({"n_images": 3}, "n_images", "differ from the number of image_ids"),
        ({"image_ids": ids(1, 1), "n_images": 2}, "image_ids", "repeat an id"),
        ({"image_ids": ["toy-0001", "other-0"]}, "image_ids", "not images of the selection's dataset"),
        ({"image_ids": ["gone"], "n_images": 1}, "image_ids", "not found in images.image_id"),
        ({"origin": ""}, "origin", "empty or longer than 500"),
    ],
)
def test_validate_checks_stored_selections(root, kw, column, message):
    _bad_row(root, **kw)
    problems = [p for p in validate(root) if p.table == "selections"]
    assert any(p.column == column and message in p.message for p in problems), problems


def test_ids_travel_in_a_link_only_when_few():
    few = [f"shapes-{i:05d}" for i in range(200)]
    text = S.encode_ids(few)
    assert S.decode_ids(text) == few and len(text) < 1200  # 200 ids in about a kilobyte
    assert S.encode_ids(few + ["shapes-99999"]) is None and S.encode_ids([]) is None
    for bad in ("", "abc", "z!!!", "z" + "A" * 7000):
        with pytest.raises(ValueError):
            S.decode_ids(bad)
    # A link that inflates to megabytes is refused before it is decompressed whole.
    import base64
    import zlib

    bomb = "z" + base64.urlsafe_b64encode(zlib.compress(b"a" * 5_000_000, 9)).decode().rstrip("=")
    with pytest.raises(ValueError):
        S.decode_ids(bomb)


def test_ids_of_a_csv(tmp_path):
    assert S.read_ids(b"image_id,label\ntoy-0001,0\n toy-0002 ,1\n,2\n") == ["toy-0001", "toy-0002"]
    assert S.read_ids(b"id\ntoy-0003\n") == ["toy-0003"]  # no image_id column: the first
    with pytest.raises(S.SelectionError, match="no image id"):
        S.read_ids(b"image_id\n\n")
    with pytest.raises(S.SelectionError, match="not a readable CSV"):
        S.read_ids(b"")


def test_choices_and_ids_where(root):
    db = WorkspaceDB(root)
    ch = S.choices(db, "toy")
    labels = ch[ch["column"] == "label"]
    assert list(labels["value"]) == ["0", "1", "2"] and list(labels["images"]) == [16, 16, 16]
    assert list(labels["name"]) == ["red", "green", "blue"]
    assert S.ids_where(db, "toy", "label", "1") == ids(*range(1, 48, 3))
    assert S.ids_where(db, "toy", "shape", "square") == ids(*[i for i in range(48) if (i // 3) % 2])
    with pytest.raises(S.SelectionError, match="column 'thumbnail': not a label or factor column"):
        S.ids_where(db, "toy", "thumbnail", "x")


def test_the_selection_command(root, tmp_path, capsys):
    csv = tmp_path / "ids.csv"
    csv.write_text("image_id\ntoy-0000\ntoy-0003\n")
    w = str(root)
    assert (
        main(["selection", "save", "--workspace", w, "--dataset", "toy", "--name", "two", "--ids", str(csv)])
        == 0
    )
    assert "saved selection 'two' of toy: 2 images (csv upload" in capsys.readouterr().out
    assert main(["selection", "list", "--workspace", w, "--dataset", "toy"]) == 0
    assert capsys.readouterr().out.startswith("two\t2 images\t")
    assert main(["selection", "show", "--workspace", w, "--dataset", "toy", "--name", "two", "--ids"]) == 0
    assert capsys.readouterr().out.split() == ["image_id", "toy-0000", "toy-0003"]
    assert main(["selection", "show", "--workspace", w, "--dataset", "toy", "--name", "none"]) == 1
    assert "name 'none': no saved selection" in capsys.readouterr().err
    csv.write_text("image_id\nother-0\n")
    assert (
        main(["selection", "save", "--workspace", w, "--dataset", "toy", "--name", "x", "--ids", str(csv)])
        == 1
    )
    assert "image_ids: 1 id(s) are not images of this dataset" in capsys.readouterr().err


def test_a_2_2_workspace_is_read_as_it_is_and_migrates_to_2_3(root):
    from conceptlens.migrate import migrate

    ws = Workspace(root)
    ws.write_meta({**ws.meta(), "schema_version": "2.2"})
    assert validate(root) == []  # no selections table: nothing missing
    files = {p: p.stat().st_mtime_ns for t in schema.TABLES for p in ws.files(t.name)}
    assert migrate(root, progress=False) == [f"workspace.json: format 2.2 -> {schema.SCHEMA_VERSION}"]
    assert ws.meta()["schema_version"] == "2.6" == schema.SCHEMA_VERSION
    assert {p: p.stat().st_mtime_ns for p in files} == files  # no table rewritten
    S.save(root, "a", "toy", ids(1), "label=1")
    assert validate(root) == []
