"""conceptlens/importers/imagefolder.py: what is a class, an image and a stray, and the order images
are listed in."""

from __future__ import annotations

from conceptlens.importers.imagefolder import scan as scan_folder
from tests.helpers_importers import RGB, draw, folder


# ---- ImageFolder: what is a class, an image, a stray ----------------------------------------
def test_hidden_folders_and_files_and_non_images_are_not_classes_or_images(tmp_path):
    src = folder(tmp_path / "src", per_class=2, classes=("red", "blue"))
    draw(src / ".cache" / "x.png", RGB["green"], 1)  # a hidden class folder
    draw(src / "red" / ".thumbs" / "y.png", RGB["green"], 2)  # a hidden folder inside a class
    draw(src / "red" / ".z.png", RGB["green"], 3)  # a hidden file
    (src / "red" / "notes.txt").write_text("not an image")
    (src / "README.md").write_text("not an image either")
    draw(src / "b_stray.png", RGB["green"], 4)
    draw(src / "a_stray.png", RGB["green"], 5)
    listing = scan_folder(src)
    keys = [it.key for it in listing.items]
    assert keys == ["blue/000.png", "blue/001.png", "red/000.png", "red/001.png"]
    assert [(it.label, it.label_name) for it in listing.items] == [(0, "blue")] * 2 + [(1, "red")] * 2
    assert listing.notes == [f"ignored 2 image(s) outside a class folder, e.g. {src / 'a_stray.png'}"]
    assert listing.hierarchy is None  # no image lies deeper than its class folder


def test_images_are_listed_in_sorted_path_order_at_every_depth(tmp_path):
    src = tmp_path / "src"
    for i, rel in enumerate(["b/y/2.png", "a/z.png", "b/x/1.png", "a/y/9.png", "b/a.png", "a/y/10.png"]):
        draw(src / rel, RGB["red"], i)
    keys = [it.key for it in scan_folder(src).items]
    # os.walk order: a class's own files, then its subfolders, each sorted by name
    assert keys == ["a/z.png", "a/y/10.png", "a/y/9.png", "b/a.png", "b/x/1.png", "b/y/2.png"]
    splits = tmp_path / "splits"
    for s in ("val", "train"):
        for c in ("b", "a"):
            draw(splits / s / c / "0.png", RGB["red"], 0)
    items = scan_folder(splits).items
    assert [(it.split, it.key) for it in items] == [
        ("train", "train/a/0.png"),
        ("train", "train/b/0.png"),
        ("val", "val/a/0.png"),
        ("val", "val/b/0.png"),
    ]
    assert [it.label for it in items] == [0, 1, 0, 1]
