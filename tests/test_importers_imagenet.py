"""conceptlens/importers/imagenet.py: both layouts skip what is not an image, list in path order, and
name missing files and classes."""

from __future__ import annotations

import pytest

from conceptlens.importers import images as imp


# ---- imagenet.scan ------------------------------------------------------------------------
def _noun(tmp_path, drop=()):
    from tests.test_import_hierarchy import DATA_NOUN

    path = tmp_path / "data.noun"
    path.write_text("".join(s + "\n" for s in DATA_NOUN.splitlines() if s.split()[0] not in drop))
    return path


def test_ground_truth_layout_skips_folders_and_files_that_are_not_images(tmp_path):
    """drop_mask of `p.is_file() and is_image_file(p.name)`: a sub-folder or a README in the
    validation folder was looked up in the ground truth and failed the import."""
    from conceptlens.importers import imagenet
    from tests.test_importers import TRUTH, make_imagenet

    root = make_imagenet(tmp_path / "imagenet", "kaggle")
    val = root / "ILSVRC" / "Data" / "CLS-LOC" / "val"
    (val / "README.txt").write_text("not an image\n")
    (val / "extra").mkdir()
    listing = imagenet.scan(root, wordnet=_noun(tmp_path))
    assert len(listing.items) == len(TRUTH)
    assert all(it.path.suffix == ".JPEG" for it in listing.items)


def test_folder_layout_skips_files_and_folders_that_are_not_images(tmp_path):
    """drop_mask of `f.is_file() and is_image_file(f.name)`: a class folder's README and
    sub-folder became images of the class."""
    from conceptlens.importers import imagenet
    from tests.test_importers import TRUTH, make_imagenet

    root = make_imagenet(tmp_path / "imagenet", "folders")
    (root / "val" / "n01440764" / "README.txt").write_text("not an image\n")
    (root / "val" / "n01440764" / "sub").mkdir()
    listing = imagenet.scan(root / "val", wordnet=_noun(tmp_path))
    assert len(listing.items) == len(TRUTH)
    assert all(it.path.suffix == ".JPEG" for it in listing.items)


@pytest.mark.parametrize("layout", ["kaggle", "folders"])
def test_images_are_listed_in_path_order(tmp_path, layout):
    """reverse_sort of the class folders, of a class folder's files, or of the ground-truth
    layout's files: the listing (and so images.parquet) ran in reverse path order."""
    from conceptlens.importers import imagenet
    from tests.test_importers import make_imagenet

    root = make_imagenet(tmp_path / "imagenet", layout)
    listing = imagenet.scan(root if layout == "kaggle" else root / "val", wordnet=_noun(tmp_path))
    paths = [str(it.path) for it in listing.items]
    assert len(set(paths)) == len(paths) > 1 and paths == sorted(paths)
    if layout == "folders":
        wnids = [it.factors["wnid"] for it in listing.items]
        assert wnids == sorted(wnids) and len(set(wnids)) == 4


def test_a_missing_synsets_file_is_named(tmp_path):
    """first_item on the (--ground-truth, --synsets) loop: only the ground truth was checked,
    so a --synsets path that does not exist was not named as "file not found"."""
    from conceptlens.importers import imagenet
    from tests.test_importers import make_imagenet

    root = make_imagenet(tmp_path / "imagenet", "kaggle")
    with pytest.raises(imp.ImportInputError, match=r"^--synsets \S*nope.txt: file not found"):
        imagenet.scan(root, synsets=tmp_path / "nope.txt", wordnet=_noun(tmp_path))


def test_classes_missing_from_wordnet_are_named_by_the_smallest_wnid(tmp_path):
    """reverse_sort of the classes' wnids: the error's example was the largest missing wnid
    (n03126707), not the first in wnid order (n01751748)."""
    from conceptlens.importers import imagenet
    from tests.test_importers import make_imagenet

    root = make_imagenet(tmp_path / "imagenet", "kaggle")
    noun = _noun(tmp_path, drop=("01751748", "03126707"))
    with pytest.raises(imp.ImportInputError, match=r"2 synset\(s\) of the classes .* e\.g\. n01751748$"):
        imagenet.scan(root, wordnet=noun)
