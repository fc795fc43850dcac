"""conceptlens/importers/mit_states.py: labels agree with the label rows, images come in path order,
and a stray file is not a skipped folder."""

from __future__ import annotations


# ---- mit_states.read ----------------------------------------------------------------------
def test_mit_states_labels_agree_with_the_label_rows_of_its_tables(tmp_path):
    """reverse_sort of the pairs numbered by `read`: images got labels counted from the end,
    so an image's label named another pair than label_primitives' row of that label."""
    from conceptlens.importers import mit_states as MS
    from tests.test_compmap import make_mit_states

    pairs, listing = MS.read(make_mit_states(tmp_path / "mit"))
    _, label_rows = MS.tables(pairs)
    name_of = {r["label"]: r["label_name"] for r in label_rows}
    assert len(listing.items) == 6
    assert all(name_of[it.label] == it.label_name for it in listing.items)


def test_mit_states_images_are_listed_in_path_order(tmp_path):
    """reverse_sort of the pair folders or of a folder's files: the images ran in reverse
    path order."""
    from conceptlens.importers import mit_states as MS
    from tests.test_compmap import make_mit_states

    _, listing = MS.read(make_mit_states(tmp_path / "mit"))
    paths = [str(it.path) for it in listing.items]
    assert len(paths) == 6 and paths == sorted(paths)


def test_a_file_beside_the_pair_folders_is_not_a_skipped_folder(tmp_path):
    """drop_mask of `p.is_dir()`: a README beside the pair folders was counted as a folder of
    a pair no split lists."""
    from conceptlens.importers import mit_states as MS
    from tests.test_compmap import make_mit_states

    root = make_mit_states(tmp_path / "mit")
    (root / "release_dataset" / "images" / "README.txt").write_text("x\n")
    _, listing = MS.read(root)
    assert [n for n in listing.notes if "skipped" in n] == [
        "skipped 1 image folder(s) of pairs no split lists, e.g. 'new car'"
    ]
