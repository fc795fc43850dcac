"""`conceptlens init` and `conceptlens import images|features|captions` on tiny fixtures
written in the real layouts; bad input fails naming file and row, leaving the workspace as
it was; the README's "Your own data in three commands" runs end to end."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import sys

import numpy as np
import pyarrow.parquet as pq
import pytest
from PIL import Image

from conceptlens.cli import main, parser
from conceptlens.importers import images as imp
from conceptlens.importers.features import import_features
from conceptlens.importers.imagefolder import scan as scan_folder
from conceptlens.validate import format_problems, validate
from conceptlens.workspace import Workspace
from tests.conftest import ROOT

COLORS = {"red": (220, 40, 40), "green": (40, 200, 60), "blue": (40, 60, 220)}


def draw(path, rgb, rng, size=(40, 30), fmt=None):
    """A small noisy image of one colour (seeded by `rng`)."""
    arr = np.clip(np.array(rgb) + rng.normal(0, 25, (size[1], size[0], 3)), 0, 255).astype(np.uint8)
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(arr).save(path, format=fmt)


def make_imagefolder(root, per_class=6, splits=("train", "val"), seed=0, size=(40, 30)):
    """root/[split/]class/NNN.{jpg,png}: a colour per class."""
    rng = np.random.default_rng(seed)
    for split in splits or (None,):
        for name, rgb in COLORS.items():
            for i in range(per_class):
                folder = root / split / name if split else root / name
                draw(folder / f"{i:03d}.{'png' if i % 3 == 2 else 'jpg'}", rgb, rng, size)
    return root


def init(tmp_path, name="ws"):
    assert main(["init", "--workspace", str(tmp_path / name), "--description", "test"]) == 0
    return tmp_path / name


def table(ws):
    return pq.read_table(ws / "images.parquet").to_pandas()


def snapshot(ws) -> dict:
    """Every file of the workspace but the thumbnail cache a failed import may leave."""
    return {
        p.relative_to(ws).as_posix(): p.read_bytes()
        for p in ws.rglob("*")
        if p.is_file() and not p.relative_to(ws).as_posix().startswith((".partial", "thumbnails/"))
    }


def fails(argv, capsys, *needles):
    """The command exits 1 with one line naming every needle."""
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    for n in needles:
        assert n in err, (n, err)
    return err


def assert_valid(ws):
    problems = validate(ws)
    assert not problems, format_problems(problems)


# ---- init ------------------------------------------------------------------------------
def test_init_makes_an_empty_valid_workspace_and_never_overwrites(tmp_path, capsys):
    ws = init(tmp_path)
    assert_valid(ws)
    meta = json.loads((ws / "workspace.json").read_text())
    assert meta["name"] == "ws" and meta["description"] == "test"
    before = snapshot(ws)
    fails(["init", "--workspace", str(ws)], capsys, "already a workspace")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    fails(["init", "--workspace", str(tmp_path / "other")], capsys, "not an empty folder")
    assert snapshot(ws) == before and not (tmp_path / "other" / "workspace.json").exists()
    fails(
        [
            "import",
            "images",
            "--workspace",
            str(tmp_path / "other"),
            str(tmp_path / "other"),
            "--dataset",
            "d",
        ],
        capsys,
        "workspace.json: not found",
        f"conceptlens init --workspace {tmp_path / 'other'}",
    )


# ---- ImageFolder -------------------------------------------------------------------------
def test_imagefolder_with_splits(tmp_path, capsys):
    src = make_imagefolder(tmp_path / "src", size=(300, 200))
    (src / "train" / "red" / "notes.txt").write_text("not an image by name: ignored")
    (src / "train" / "red" / "broken.jpg").write_bytes(b"not an image")
    ws = init(tmp_path)
    capsys.readouterr()
    assert main(["import", "images", "--workspace", str(ws), "--dataset", "colors", str(src), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "skipped 1 image(s)" in out and str(src / "train" / "red" / "broken.jpg") in out
    df = table(ws)
    assert len(df) == 36 and set(df["split"]) == {"train", "val"}
    # Labels in sorted class-name order, the same across splits.
    assert dict(zip(df["label_name"], df["label"])) == {"blue": 0, "green": 1, "red": 2}
    row = df.set_index("image_id").loc["colors-val-green-002"]
    assert (row["label_name"], row["split"]) == ("green", "val")
    assert row["source_path"] == str(src / "val" / "green" / "002.png")
    with Image.open(ws / row["thumbnail"]) as im:  # the recorded size is the file's
        assert im.size == (row["width"], row["height"]) == (128, 85)
    assert row["thumbnail"].endswith(".jpg")
    assert_valid(ws)
    assert not (ws / ".partial").exists()
    prov = json.loads((ws / "workspace.json").read_text())["provenance"]["imports"]["colors"]
    assert prov["format"] == "imagefolder" and prov["images"] == 36 and prov["skipped"] == 1


def interrupt_thumbnails(monkeypatch, at: int, flush_every: int):
    """Make the import's thumbnail job raise KeyboardInterrupt on its `at`-th call, records
    flushed every `flush_every` images (an interrupted import); returns the real job, to
    set back for the resumed import."""
    job, calls = imp.thumbnail_job, {"n": 0}

    def interrupted(j):
        calls["n"] += 1
        if calls["n"] == at:
            raise KeyboardInterrupt
        return job(j)

    monkeypatch.setattr(imp, "FLUSH_EVERY", flush_every)
    monkeypatch.setattr(imp, "thumbnail_job", interrupted)
    return job


def test_strict_fails_naming_the_file_and_leaves_the_table(tmp_path, capsys):
    src = make_imagefolder(tmp_path / "src", splits=None)
    ws = init(tmp_path)
    assert main(["import", "images", "--workspace", str(ws), "--dataset", "a", str(src), "--quiet"]) == 0
    (src / "blue" / "000.jpg").write_bytes(b"\xff\xd8\xff truncated jpeg")
    before = snapshot(ws)
    fails(
        ["import", "images", "--workspace", str(ws), "--dataset", "b", str(src), "--strict", "--quiet"],
        capsys,
        str(src / "blue" / "000.jpg"),
        "--strict",
    )
    assert snapshot(ws) == before


def test_no_split_folders_all_train_or_a_seeded_stratified_test_share(tmp_path):
    src = make_imagefolder(tmp_path / "src", per_class=10, splits=None)
    listing = scan_folder(src)
    assert imp.assign_splits(listing.items, None, None, 0) == ["train"] * 30
    a = imp.assign_splits(listing.items, None, 0.2, seed=1)
    assert a == imp.assign_splits(listing.items, None, 0.2, seed=1)
    assert a != imp.assign_splits(listing.items, None, 0.2, seed=2)
    for name in COLORS:  # every class gets its share of test images
        assert sum(s == "test" for s, it in zip(a, listing.items) if it.label_name == name) == 2
    with pytest.raises(imp.ImportInputError, match="already gives splits"):
        imp.assign_splits(scan_folder(make_imagefolder(tmp_path / "s2")).items, None, 0.2, 0)


def test_split_folders_mixed_with_class_folders_is_an_error(tmp_path):
    src = make_imagefolder(tmp_path / "src", per_class=1)
    make_imagefolder(src, per_class=1, splits=None)  # red/ green/ blue/ next to train/ val/
    with pytest.raises(imp.ImportInputError, match="mixes split folders"):
        scan_folder(src)


def test_ids_are_unique_safe_and_the_same_on_every_run(tmp_path):
    rng = np.random.default_rng(0)
    for name in ("a b.jpg", "a_b.jpg", "x.jpg", "x.png", "é.png"):
        draw(tmp_path / "src" / "cls" / name, COLORS["red"], rng)
    items = scan_folder(tmp_path / "src").items
    ids = imp.make_ids("d", items)
    assert len(set(ids)) == 5 and ids == imp.make_ids("d", scan_folder(tmp_path / "src").items)
    imp.check_items(items, ids)  # every id in the safe alphabet
    assert "d-cls-x" not in ids  # same stem, two files: both get a hash


def test_interrupted_import_resumes_and_stale_thumbnails_are_redone(tmp_path, monkeypatch):
    src = make_imagefolder(tmp_path / "src", splits=None)
    ws = init(tmp_path)
    job = interrupt_thumbnails(monkeypatch, at=14, flush_every=5)
    with pytest.raises(KeyboardInterrupt):
        imp.import_images(ws, "c", scan_folder(src), workers=1, progress=False)
    assert len(table(ws)) == 0  # nothing half-written
    monkeypatch.setattr(imp, "thumbnail_job", job)
    r = imp.import_images(ws, "c", scan_folder(src), workers=1, progress=False)
    assert (r.reused, r.made, r.n_images) == (13, 5, 18)
    # A source changed since its thumbnail was made, or other thumbnail settings: made again.
    changed = src / "red" / "001.jpg"
    draw(changed, COLORS["blue"], np.random.default_rng(5))
    r = imp.import_images(ws, "c", scan_folder(src), workers=1, progress=False, replace=True)
    assert (r.reused, r.made) == (17, 1)
    r = imp.import_images(
        ws,
        "c",
        scan_folder(src),
        workers=1,
        progress=False,
        replace=True,
        thumbs=imp.Thumbs(size=32, format="webp"),
    )
    assert (r.reused, r.made) == (0, 18) and table(ws)["width"].max() == 32
    assert table(ws)["thumbnail"].str.endswith(".webp").all()
    assert_valid(ws)  # decodes every thumbnail


def test_second_dataset_keeps_the_first_and_reimport_needs_replace(tmp_path, capsys):
    ws = init(tmp_path)
    a = make_imagefolder(tmp_path / "a", splits=None)
    b = make_imagefolder(tmp_path / "b", per_class=2, splits=("test",), seed=1)
    assert main(["import", "images", "--workspace", str(ws), "--dataset", "a", str(a), "--quiet"]) == 0
    assert main(["import", "images", "--workspace", str(ws), "--dataset", "b", str(b), "--quiet"]) == 0
    assert table(ws).groupby("dataset").size().to_dict() == {"a": 18, "b": 6}
    before = snapshot(ws)
    fails(
        ["import", "images", "--workspace", str(ws), "--dataset", "a", str(a), "--quiet"],
        capsys,
        "already has 18 image(s)",
        "--replace",
    )
    # A checkpoint has features of a's images: a re-import must not drop any of them.
    ids = table(ws).query("dataset == 'a'")["image_id"].tolist()
    np.save(tmp_path / "x.npy", np.ones((18, 4)))
    (tmp_path / "ids.txt").write_text("\n".join(ids))
    import_features(ws, "a", "ck", tmp_path / "x.npy", ids=tmp_path / "ids.txt")
    before = snapshot(ws)
    (a / "red" / "000.jpg").unlink()
    fails(
        ["import", "images", "--workspace", str(ws), "--dataset", "a", str(a), "--replace", "--quiet"],
        capsys,
        "checkpoint ck has features of 1 image(s)",
        "a-red-000",
    )
    assert snapshot(ws) == before
    draw(a / "red" / "000.jpg", COLORS["red"], np.random.default_rng(0))
    draw(a / "red" / "new.jpg", COLORS["red"], np.random.default_rng(0))
    capsys.readouterr()
    assert (
        main(["import", "images", "--workspace", str(ws), "--dataset", "a", str(a), "--replace", "--quiet"])
        == 0
    )
    assert "checkpoint ck has no features of 1 new image(s)" in capsys.readouterr().out
    assert table(ws).groupby("dataset").size().to_dict() == {"a": 19, "b": 6}


# ---- manifests -----------------------------------------------------------------------------
def write_manifest(tmp_path, rows, name="m.csv"):
    import pandas as pd

    path = tmp_path / name
    df = pd.DataFrame(rows)
    df.to_parquet(path) if name.endswith(".parquet") else df.to_csv(path, index=False)
    return path


def test_manifest_csv_extra_columns_become_factors(tmp_path, capsys):
    src = make_imagefolder(tmp_path / "img", per_class=2, splits=None)
    rows = [
        {
            "path": f"img/{c}/{i:03d}.{'png' if i % 3 == 2 else 'jpg'}",
            "label_name": c,
            "split": "test" if i else "train",
            "weather": "sunny" if i else "rain",
            "brightness": 0.5 * i,
        }
        for c in COLORS
        for i in range(2)
    ]
    m = write_manifest(tmp_path, rows)
    ws = init(tmp_path)
    assert main(["import", "images", "--workspace", str(ws), "--dataset", "m", str(m), "--quiet"]) == 0
    df = table(ws).set_index("image_id")
    assert dict(zip(df["label_name"], df["label"])) == {"blue": 0, "green": 1, "red": 2}
    assert df.loc["m-img-green-001", "weather"] == "sunny" and df.loc["m-img-green-001", "brightness"] == 0.5
    assert df.loc["m-img-green-001", "split"] == "test"
    assert df.loc["m-img-green-000", "source_path"] == str(src / "green" / "000.jpg")
    assert_valid(ws)


@pytest.mark.parametrize(
    "case,needles",
    [
        ("no label", ["m.csv", "no `label` or `label_name` column", "--unlabeled"]),
        ("duplicate", ["m.csv row 3 (line 4)", "listed twice", "m.csv row 1"]),
        ("missing file", ["m.csv row 2 (line 3)", "column path", "nope.jpg not found"]),
        ("bad split", ["m.csv row 2 (line 3)", "split 'dev'"]),
        ("label conflict", ["m.csv row 2 (line 3)", "label 0 is named 'green' here but 'red'"]),
        ("reserved column", ["m.csv", "thumbnail", "rename"]),
        ("not an image", ["m.csv row 2 (line 3)", "--strict"]),
    ],
)
def test_bad_manifests_fail_naming_file_and_row(tmp_path, capsys, case, needles):
    make_imagefolder(tmp_path, per_class=1, splits=None)
    rows = [
        {"path": "red/000.jpg", "label": 0, "label_name": "red", "split": "train"},
        {"path": "green/000.jpg", "label": 1, "label_name": "green", "split": "train"},
        {"path": "blue/000.jpg", "label": 2, "label_name": "blue", "split": "train"},
    ]
    if case == "no label":
        rows = [{"path": r["path"]} for r in rows]
    elif case == "duplicate":
        rows[2]["path"] = "red/000.jpg"
    elif case == "missing file":
        rows[1]["path"] = "nope.jpg"
    elif case == "bad split":
        rows[1]["split"] = "dev"
    elif case == "label conflict":
        rows[1]["label"] = 0
    elif case == "reserved column":
        rows = [{**r, "thumbnail": "x.png"} for r in rows]
    elif case == "not an image":
        (tmp_path / "green" / "000.jpg").write_text("hello")
    m = write_manifest(tmp_path, rows)
    ws = init(tmp_path)
    make_imagefolder(tmp_path / "other", per_class=1, splits=None)
    assert (
        main(
            [
                "import",
                "images",
                "--workspace",
                str(ws),
                "--dataset",
                "first",
                str(tmp_path / "other"),
                "--quiet",
            ]
        )
        == 0
    )
    before = snapshot(ws)
    fails(
        ["import", "images", "--workspace", str(ws), "--dataset", "m", str(m), "--strict", "--quiet"],
        capsys,
        *needles,
    )
    assert snapshot(ws) == before


def test_manifest_parquet_with_ids_labels_and_unlabeled(tmp_path, capsys):
    make_imagefolder(tmp_path, per_class=1, splits=None)
    rows = [
        {"path": str(tmp_path / f"{c}/000.jpg"), "image_id": f"img-{c}", "label": 7 + i}
        for i, c in enumerate(COLORS)
    ]
    ws = init(tmp_path)
    m = write_manifest(tmp_path, rows, "m.parquet")
    assert (
        main(
            [
                "import",
                "images",
                "--workspace",
                str(ws),
                "--dataset",
                "p",
                str(m),
                "--split",
                "test",
                "--quiet",
            ]
        )
        == 0
    )
    df = table(ws).set_index("image_id")
    assert df.loc["img-green", "label"] == 8 and df.loc["img-green", "label_name"] == "8"
    assert set(df["split"]) == {"test"}
    rows[2]["image_id"] = "img-red"
    m = write_manifest(tmp_path, rows, "dup.parquet")
    before = snapshot(ws)
    fails(
        ["import", "images", "--workspace", str(ws), "--dataset", "q", str(m), "--quiet"],
        capsys,
        "dup.parquet row 3",
        "duplicate image id 'img-red'",
        "dup.parquet row 1",
    )
    assert snapshot(ws) == before
    m = write_manifest(tmp_path, [{"path": r["path"]} for r in rows], "plain.csv")
    assert (
        main(["import", "images", "--workspace", str(ws), "--dataset", "u", str(m), "--unlabeled", "--quiet"])
        == 0
    )
    assert table(ws).query("dataset == 'u'")["label"].isna().all()
    assert_valid(ws)


# ---- ImageNet validation set -----------------------------------------------------------------
# (ILSVRC2012_ID, WordNet id, words): the devkit's ids are not in WordNet-id order, and two
# synsets share the lemma "crane", as in the real devkit.
SYNSETS = [
    (1, "n01751748", "sea snake"),
    (2, "n03126707", "crane"),
    (3, "n01440764", "tench, Tinca tinca"),
    (4, "n02012849", "crane"),
]
TRUTH = ["n02012849", "n01440764", "n01751748", "n03126707", "n01440764", "n02012849", "n01751748"]
WNID_LABEL = {"n01440764": 0, "n01751748": 1, "n02012849": 2, "n03126707": 3}  # sorted WordNet ids
NAMES = {
    "n01440764": "tench",
    "n01751748": "sea snake",
    "n02012849": "crane (n02012849)",
    "n03126707": "crane (n03126707)",
}


def make_imagenet(root, layout):
    """ImageNet's validation set as distributed: `devkit` (ILSVRC2012_img_val + the devkit),
    `kaggle` (the Kaggle challenge's folder) or `folders` (val/ sorted into WordNet ids)."""
    rng = np.random.default_rng(3)
    root.mkdir(parents=True)
    names = [f"ILSVRC2012_val_{i + 1:08d}.JPEG" for i in range(len(TRUTH))]
    colors = dict(zip(WNID_LABEL, [(200, 0, 0), (0, 200, 0), (0, 0, 200), (200, 200, 0)]))
    if layout == "devkit":
        images = root / "ILSVRC2012_img_val"
        data = root / "ILSVRC2012_devkit_t12" / "data"
        data.mkdir(parents=True)
        ids = {w: i for i, w, _ in SYNSETS}
        (data / "ILSVRC2012_validation_ground_truth.txt").write_text("".join(f"{ids[w]}\n" for w in TRUTH))
        _meta_mat(data / "meta.mat")
    elif layout == "kaggle":
        images = root / "ILSVRC" / "Data" / "CLS-LOC" / "val"
        rows = [f"{n[:-5]},{w} 10 12 200 180 {w} 30 40 90 100 " for n, w in zip(names, TRUTH)]
        (root / "LOC_val_solution.csv").write_text(
            "ImageId,PredictionString\n" + "\n".join(rows[::-1]) + "\n"
        )  # not in image order
        (root / "LOC_synset_mapping.txt").write_text(
            "".join(f"{w} {t}\n" for _, w, t in sorted(SYNSETS, key=lambda s: s[1]))
        )
    for n, w in zip(names, TRUTH):
        folder = images if layout != "folders" else root / "val" / w
        draw(folder / n, colors[w], rng, size=(50, 40), fmt="JPEG")
    if layout == "folders":
        (root / "LOC_synset_mapping.txt").write_text("".join(f"{w} {t}\n" for _, w, t in SYNSETS))
    return root


def _meta_mat(path):
    """The devkit's meta.mat: a struct array `synsets`, leaves first, then their ancestors."""
    import scipy.io

    fields = [
        "ILSVRC2012_ID",
        "WNID",
        "words",
        "gloss",
        "num_children",
        "children",
        "wordnet_height",
        "num_train_images",
    ]
    rows = [(i, w, t, f"gloss of {t}", 0, np.zeros((1, 0)), 0, 1300) for i, w, t in SYNSETS]
    rows.append((1001, "n00001740", "entity", "that which exists", 2, np.array([[1, 2]]), 18, 0))
    arr = np.zeros((len(rows), 1), dtype=[(f, "O") for f in fields])
    for r, values in enumerate(rows):
        for f, v in zip(fields, values):
            arr[r, 0][f] = v
    scipy.io.savemat(str(path), {"synsets": arr})


@pytest.mark.parametrize(
    "layout,args",
    [
        ("devkit", lambda r: [str(r / "ILSVRC2012_img_val"), "--devkit", str(r / "ILSVRC2012_devkit_t12")]),
        ("devkit", lambda r: [str(r)]),  # everything found from the folder that holds both
        ("kaggle", lambda r: [str(r)]),
        (
            "kaggle",
            lambda r: [
                str(r / "ILSVRC/Data/CLS-LOC/val"),
                "--ground-truth",
                str(r / "LOC_val_solution.csv"),
                "--synsets",
                str(r / "LOC_synset_mapping.txt"),
            ],
        ),
        ("folders", lambda r: [str(r / "val"), "--format", "imagenet"]),
    ],
)
def test_imagenet_validation_layouts_give_the_standard_labels(tmp_path, capsys, layout, args):
    root = make_imagenet(tmp_path / "imagenet", layout)
    ws = init(tmp_path)
    assert (
        main(["import", "images", "--workspace", str(ws), "--dataset", "imagenet", *args(root), "--quiet"])
        == 0
    )
    assert "(imagenet)" in capsys.readouterr().out
    df = table(ws).set_index("image_id")
    assert len(df) == len(TRUTH) and set(df["split"]) == {"val"}
    for i, w in enumerate(TRUTH):
        r = df.loc[f"imagenet-ILSVRC2012_val_{i + 1:08d}"]
        assert (r["wnid"], r["label"], r["label_name"]) == (w, WNID_LABEL[w], NAMES[w])
    assert_valid(ws)


def test_imagenet_errors_name_the_file(tmp_path, capsys):
    root = make_imagenet(tmp_path / "imagenet", "devkit")
    kaggle = make_imagenet(tmp_path / "kaggle", "kaggle")
    ws = init(tmp_path)
    before = snapshot(ws)
    # The devkit numbers classes its own way: only its meta.mat can decode that.
    fails(
        [
            "import",
            "images",
            "--workspace",
            str(ws),
            "--dataset",
            "i",
            str(root / "ILSVRC2012_img_val"),
            "--ground-truth",
            str(root / "ILSVRC2012_devkit_t12/data/ILSVRC2012_validation_ground_truth.txt"),
            "--synsets",
            str(kaggle / "LOC_synset_mapping.txt"),
        ],
        capsys,
        "ILSVRC2012_ID",
        "meta.mat",
    )
    extra = root / "ILSVRC2012_img_val" / "ILSVRC2012_val_00000099.JPEG"
    shutil.copy(root / "ILSVRC2012_img_val" / "ILSVRC2012_val_00000001.JPEG", extra)
    fails(
        ["import", "images", "--workspace", str(ws), "--dataset", "i", str(root)],
        capsys,
        str(extra),
        "not in the ground truth",
    )
    extra.unlink()
    bad = kaggle / "LOC_val_solution.csv"
    bad.write_text(bad.read_text().replace("n01440764 10", "n09999999 10", 1))
    fails(
        ["import", "images", "--workspace", str(ws), "--dataset", "i", str(kaggle)],
        capsys,
        "LOC_val_solution.csv line",
        "n09999999",
        "not a synset",
    )
    assert snapshot(ws) == before


# ---- Hugging Face datasets ---------------------------------------------------------------------
def make_hf(root, dict_=True, bad_row=None):
    """A DatasetDict (train, validation), or one Dataset, saved with save_to_disk: PNG bytes
    in the Arrow files (no image files), ClassLabel names not in sorted order."""
    import io

    import datasets

    rng = np.random.default_rng(4)
    feats = datasets.Features(
        {
            "image": datasets.Image(decode=False),
            "label": datasets.ClassLabel(names=["zebra", "ant"]),
            "weather": datasets.Value("string"),
        }
    )

    def part(n, bad=None):
        rows = []
        for i in range(n):
            buf = io.BytesIO()
            arr = np.clip(rng.normal(120, 40, (24, 36, 3)), 0, 255).astype(np.uint8)
            Image.fromarray(arr).save(buf, "PNG")
            rows.append(
                {
                    "image": {"bytes": b"garbage" if i == bad else buf.getvalue(), "path": None},
                    "label": i % 2,
                    "weather": ["rain", "sun"][i % 2],
                }
            )
        return datasets.Dataset.from_list(rows, features=feats).cast_column("image", datasets.Image())

    train = part(6, bad_row)
    d = datasets.DatasetDict({"train": train, "validation": part(4)}) if dict_ else train
    d.save_to_disk(str(root))
    return root


def test_hf_dataset_dict_keeps_its_labels_and_saves_sources(tmp_path, capsys):
    src = make_hf(tmp_path / "hf", bad_row=3)
    ws = init(tmp_path)
    assert main(["import", "images", "--workspace", str(ws), "--dataset", "hf", str(src), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "(hf)" in out and f"{src} split train row 3" in out  # the bad row is reported
    df = table(ws).set_index("image_id")
    assert len(df) == 9 and df.groupby("split").size().to_dict() == {"train": 5, "val": 4}
    r = df.loc["hf-validation-000001"]
    assert (r["label"], r["label_name"], r["weather"]) == (1, "ant", "sun")  # ClassLabel order kept
    assert r["source_path"] == "sources/hf/hf-validation-000001.png"  # inside: relative
    with Image.open(ws / r["source_path"]) as im:
        assert im.size == (36, 24)
    assert_valid(ws)
    single = make_hf(tmp_path / "single", dict_=False)
    assert (
        main(
            [
                "import",
                "images",
                "--workspace",
                str(ws),
                "--dataset",
                "one",
                str(single),
                "--split",
                "test",
                "--quiet",
            ]
        )
        == 0
    )
    assert set(table(ws).query("dataset == 'one'")["split"]) == {"test"}
    capsys.readouterr()
    fails(
        ["import", "images", "--workspace", str(ws), "--dataset", "x", str(src), "--split", "test"],
        capsys,
        "has its own splits",
    )


# ---- extraction reads the originals ------------------------------------------------------------
def test_extract_reads_source_path_not_the_thumbnail(tmp_path):
    pytest.importorskip("torch")
    from conceptlens.extract import extract, image_path
    from conceptlens.workspace import WorkspaceError
    from tests.tiny_models import TinyConv, save_torch_weights

    src = make_imagefolder(tmp_path / "src", per_class=2, splits=None)
    ws = init(tmp_path)
    assert main(["import", "images", "--workspace", str(ws), "--dataset", "d", str(src), "--quiet"]) == 0
    hf = make_hf(tmp_path / "hf")
    assert main(["import", "images", "--workspace", str(ws), "--dataset", "h", str(hf), "--quiet"]) == 0
    for t in (ws / "thumbnails").rglob("*.jpg"):  # unreadable thumbnails: only originals work
        t.write_bytes(b"broken")
    w = save_torch_weights(
        tmp_path / "w.pt",
        TinyConv(width=4, dim=6),
        {"width": 4, "dim": 6},
        {"size": 32, "mean": [0.5] * 3, "std": [0.5] * 3},
    )
    for d in ("d", "h"):  # absolute sources, and sources inside the workspace
        extract(ws, d, "torch:tests.tiny_models:TinyConv", weights=w, checkpoint_id=f"ck-{d}", progress=False)
    w_ = Workspace(ws)
    assert image_path(w_, "thumbnails/x.jpg", None) == (ws / "thumbnails/x.jpg").resolve()
    with pytest.raises(WorkspaceError, match="leaves the workspace"):
        image_path(w_, "thumbnails/x.jpg", "../outside.jpg")


# ---- features ----------------------------------------------------------------------------
@pytest.fixture
def feat_ws(tmp_path):
    """A workspace of 9 images (dataset d) and their vectors, rows of the files shuffled."""
    src = make_imagefolder(tmp_path / "src", per_class=3, splits=None)
    ws = init(tmp_path)
    assert main(["import", "images", "--workspace", str(ws), "--dataset", "d", str(src), "--quiet"]) == 0
    ids = table(ws)["image_id"].tolist()
    X = np.random.default_rng(0).normal(size=(len(ids), 5)).astype(np.float32)
    perm = np.random.default_rng(1).permutation(len(ids))
    return ws, src, [ids[i] for i in perm], X[perm], dict(zip(ids, X))


def _write_vectors(tmp_path, fmt, ids, X):
    """(file, extra CLI args) in each supported format."""
    f = tmp_path / f"v.{fmt}"
    if fmt == "npy":
        np.save(f, X)
        (tmp_path / "ids.txt").write_text("\n".join(ids) + "\n")
        return f, ["--ids", str(tmp_path / "ids.txt")]
    if fmt == "npz":
        np.savez(f, embeddings=X, ids=np.array(ids))
    elif fmt == "h5":
        import h5py

        with h5py.File(f, "w") as h:
            h["features"] = X
            h["image_ids"] = np.array(ids, dtype="S")
    elif fmt == "pt":
        import torch

        torch.save({"embeddings": torch.from_numpy(X), "ids": list(ids)}, f)
    elif fmt == "tensor.pt":
        import pandas as pd
        import torch

        torch.save(torch.from_numpy(X), f)
        pd.DataFrame({"image_id": ids}).to_csv(tmp_path / "ids.csv", index=False)
        return f, ["--ids", str(tmp_path / "ids.csv")]
    elif fmt == "parquet":
        import pyarrow as pa

        pq.write_table(pa.table({"image_id": ids, "embedding": pa.array(list(X), pa.list_(pa.float32()))}), f)
    elif fmt == "wide.parquet":
        import pandas as pd

        pd.DataFrame({"image_id": ids, **{f"d{j}": X[:, j] for j in range(X.shape[1])}}).to_parquet(f)
    return f, []


@pytest.mark.parametrize("fmt", ["npy", "npz", "h5", "pt", "tensor.pt", "parquet", "wide.parquet"])
def test_import_features_every_format(tmp_path, feat_ws, fmt):
    ws, _, ids, X, want = feat_ws
    f, extra = _write_vectors(tmp_path, fmt, ids, X)
    assert (
        main(
            [
                "import",
                "features",
                "--workspace",
                str(ws),
                str(f),
                "--checkpoint",
                "ext",
                "--dataset",
                "d",
                "--method",
                "simclr",
                "--epoch",
                "3",
                "--run",
                "r1",
                *extra,
            ]
        )
        == 0
    )
    got = pq.read_table(ws / "features/checkpoint_id=ext/part-0.parquet").to_pylist()
    assert [r["image_id"] for r in got] == table(ws)["image_id"].tolist()  # images.parquet order
    for r in got:
        np.testing.assert_array_equal(r["embedding"], want[r["image_id"]])
    ck = pq.read_table(ws / "checkpoints.parquet").to_pylist()[0]
    assert (ck["method"], ck["epoch"], ck["run"]) == ("simclr", 3, "r1")
    assert (ck["feature_dim"], ck["dataset"], ck["source"]) == (5, "d", f"import:{f.name}")
    assert_valid(ws)


def test_feature_ids_may_be_paths(tmp_path, feat_ws):
    ws, src, ids, X, want = feat_ws
    src_of = dict(zip(table(ws)["image_id"], table(ws)["source_path"]))
    keys = [
        src_of[i]
        if j % 3 == 0
        # absolute path
        else str(src_of[i]).split("src/")[1]
        if j % 3 == 1
        # relative: red/001.jpg
        else str(src_of[i]).split("src/")[1].rsplit(".", 1)[0]
        for j, i in enumerate(ids)
    ]  # no extension
    np.savez(tmp_path / "v.npz", X=X, paths=np.array(keys))
    cid, n, dim = import_features(ws, "d", "paths", tmp_path / "v.npz")
    assert (n, dim) == (9, 5)
    got = pq.read_table(ws / "features/checkpoint_id=paths/part-0.parquet").to_pylist()
    for r in got:
        np.testing.assert_array_equal(r["embedding"], want[r["image_id"]])


@pytest.mark.parametrize(
    "case,needles",
    [
        ("length", ["ids.txt: 8 ids but", "has 9 vectors"]),
        ("unknown", ["ids.txt row 2", "'nobody' is not an image of the dataset"]),
        ("duplicate", ["ids.txt row 2", "again (also row 1)"]),
        ("missing", ["no vector for 1 of the 9 images", "dataset 'd'"]),
        ("nan", ["v.npy row 4", "NaN"]),
        ("exists", ["checkpoint 'ck' exists", "--replace"]),
        ("other dataset", ["exists for dataset 'e'"]),
        ("shape", ["numeric N x D array", "(9,)"]),
    ],
)
def test_bad_features_fail_naming_file_and_row(tmp_path, feat_ws, capsys, case, needles):
    ws, _, ids, X, _ = feat_ws
    ids, X = list(ids), X.copy()
    if case in ("exists", "other dataset"):
        f, extra = _write_vectors(tmp_path, "npy", ids, X)
        if case == "other dataset":
            make_imagefolder(tmp_path / "e", per_class=3, splits=None)
            assert (
                main(
                    [
                        "import",
                        "images",
                        "--workspace",
                        str(ws),
                        "--dataset",
                        "e",
                        str(tmp_path / "e"),
                        "--quiet",
                    ]
                )
                == 0
            )
            e_ids = table(ws).query("dataset == 'e'")["image_id"].tolist()
            (tmp_path / "e.txt").write_text("\n".join(e_ids))
            assert (
                main(
                    [
                        "import",
                        "features",
                        "--workspace",
                        str(ws),
                        str(f),
                        "--checkpoint",
                        "ck",
                        "--dataset",
                        "e",
                        "--ids",
                        str(tmp_path / "e.txt"),
                    ]
                )
                == 0
            )
        else:
            assert (
                main(
                    [
                        "import",
                        "features",
                        "--workspace",
                        str(ws),
                        str(f),
                        "--checkpoint",
                        "ck",
                        "--dataset",
                        "d",
                        *extra,
                    ]
                )
                == 0
            )
    elif case == "length":
        ids = ids[:8]
    elif case == "unknown":
        ids[1] = "nobody"
    elif case == "duplicate":
        ids[1] = ids[0]
    elif case == "missing":
        ids, X = ids[:8], X[:8]
    elif case == "nan":
        X[3, 2] = np.nan
    elif case == "shape":
        X = X[:, 0]
    before = snapshot(ws)
    np.save(tmp_path / "v.npy", X)
    (tmp_path / "ids.txt").write_text("\n".join(ids) + "\n")
    fails(
        [
            "import",
            "features",
            "--workspace",
            str(ws),
            str(tmp_path / "v.npy"),
            "--checkpoint",
            "ck",
            "--dataset",
            "d",
            "--ids",
            str(tmp_path / "ids.txt"),
        ],
        capsys,
        *needles,
    )
    assert snapshot(ws) == before


# ---- captions ----------------------------------------------------------------------------------
def test_import_captions_feed_eq4_and_bad_rows_fail(tmp_path, feat_ws, capsys):
    import pandas as pd

    from conceptlens.analysis.common import pick_captioner

    ws, src, ids, _, _ = feat_ws
    src_of = dict(zip(table(ws)["image_id"], table(ws)["source_path"]))
    rows = [{"image_id": i if j % 2 else src_of[i], "text": f"a photo number {j}"} for j, i in enumerate(ids)]
    pd.DataFrame(rows).to_csv(tmp_path / "caps.csv", index=False)
    assert (
        main(
            [
                "import",
                "captions",
                "--workspace",
                str(ws),
                str(tmp_path / "caps.csv"),
                "--captioner",
                "my-blip",
            ]
        )
        == 0
    )
    caps = pq.read_table(ws / "captions.parquet").to_pandas()
    assert len(caps) == 9 and set(caps["image_id"]) == set(ids) and pick_captioner(caps) == "my-blip"
    assert_valid(ws)
    before = snapshot(ws)
    for change, needles in (
        (lambda r: r[4].update(image_id="ghost"), ["caps.csv row 5 (line 6)", "'ghost'"]),
        (lambda r: r[4].update(image_id=r[3]["image_id"]), ["row 5", "a second caption", "row 4"]),
        (lambda r: r[2].update(text=""), ["caps.csv row 3", "column text is empty"]),
    ):
        bad = [dict(r) for r in rows]
        change(bad)
        pd.DataFrame(bad).to_csv(tmp_path / "caps.csv", index=False)
        fails(
            [
                "import",
                "captions",
                "--workspace",
                str(ws),
                str(tmp_path / "caps.csv"),
                "--captioner",
                "my-blip",
            ],
            capsys,
            *needles,
        )
    fails(
        [
            "import",
            "captions",
            "--workspace",
            str(ws),
            str(tmp_path / "caps.csv"),
            "--captioner",
            "x",
            "--text-column",
            "caption",
        ],
        capsys,
        "no column 'caption'",
    )
    assert snapshot(ws) == before


# ---- the README, end to end ----------------------------------------------------------------------
def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Your own data in three commands", 1)[1].split("\n## ", 1)[0]
    block = section.split("```bash", 1)[1].split("```", 1)[0]
    return [line.strip() for line in block.splitlines() if line.strip()]


def test_readme_three_commands_end_to_end(tmp_path, capsys, monkeypatch):
    """A folder of a few hundred images in class folders -> a workspace the Clusters page shows."""
    import torch

    from conceptlens.db import WorkspaceDB
    from conceptlens.views import clusters
    from tests.tiny_models import TinyConv, save_torch_weights

    torch.manual_seed(0)
    make_imagefolder(tmp_path / "my-images", per_class=100, splits=None, size=(48, 40))
    weights = save_torch_weights(
        tmp_path / "tiny.pt",
        TinyConv(width=4, dim=6),
        {"width": 4, "dim": 6},
        {"size": 32, "mean": [0.5] * 3, "std": [0.5] * 3},
    )
    monkeypatch.chdir(tmp_path)
    lines = readme_commands()
    for line in lines:  # every command shown parses, commented alternatives too
        if line.lstrip("# ").startswith("conceptlens "):
            parser().parse_args(shlex.split(line.lstrip("# "), comments=True)[1:])
    run = [shlex.split(ln, comments=True)[1:] for ln in lines if ln.startswith("conceptlens ")]
    assert [argv[0] for argv in run] == ["init", "import", "extract", "analyze"], lines
    for argv in run:
        if argv[0] == "extract":  # the tiny model and its weights instead of the README's
            i, j = argv.index("--model"), argv.index("--weights")
            argv[i + 1], argv[j + 1] = "torch:tests.tiny_models:TinyConv", str(weights)
        if argv[0] == "analyze":  # quick: a small k, no vision-language model
            argv += ["--no-describability", "--k", "3"]
        assert main(argv + (["--quiet"] if argv[0] != "init" else [])) == 0, argv
    ws = tmp_path / re.search(r"conceptlens init --workspace (\S+)", "\n".join(lines)).group(1)
    assert_valid(ws)
    df = table(ws)
    assert len(df) == 300 and (df["split"] == "test").sum() == 60
    db = WorkspaceDB(ws)
    ds = clusters.datasets(db)
    assert ds["clustered"].all()
    ck = clusters.checkpoints(db, ds["dataset"][0])["checkpoint_id"][0]
    t = clusters.cluster_table(db, ds["dataset"][0], ck, 3)
    assert len(t) == 3 and t["size"].sum() == 300 and t["top_label_name"].notna().all()
    for name in ("clusters", "cluster_metrics", "checkpoint_metrics", "projections"):
        assert db.has(name), name
    db.close()
    # The dashboard's Clusters page opens on it: no error, the clusters and their thumbnails.
    from streamlit.testing.v1 import AppTest

    monkeypatch.setattr(sys, "argv", ["app.py", "--workspace", str(ws)])
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.switch_page("pages/clusters.py")
    at.run()
    assert not at.exception and not at.error, [e.message for e in at.exception] + [e.value for e in at.error]
    assert len(at.dataframe) >= 1 and at.get("image")


def test_readme_model_works_offline_from_a_state_dict(tmp_path, monkeypatch):
    """The README's own-data extract: its torchvision architecture with a local state dict
    loads offline (no hub, no download)."""
    import torch
    from torchvision import models

    from conceptlens.models import load_adapter

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    argv = next(shlex.split(ln)[1:] for ln in readme_commands() if ln.startswith("conceptlens extract"))
    spec = argv[argv.index("--model") + 1]
    family, name = spec.split(":", 1)
    assert family == "torchvision" and "--weights" in argv
    torch.save(models.get_model(name, weights=None).state_dict(), tmp_path / "w.pth")
    adapter = load_adapter(spec, weights=tmp_path / "w.pth")
    with torch.inference_mode():
        out = adapter.embed(adapter.preprocess(Image.new("RGB", (40, 30), (200, 30, 30)))[None])
    assert out.shape[0] == 1 and torch.isfinite(out).all()
