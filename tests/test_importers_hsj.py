"""conceptlens/importers/hsj.py: psiz observations read with padding and defaults, found beside their
catalog, and stimuli matched to the named dataset's images."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conceptlens.importers import images as imp
from conceptlens.importers.imagefolder import scan as scan_folder
from tests.helpers_importers import RGB, draw, run, workspace


# ---- human similarity judgments -------------------------------------------------------------
def _h5(path, **arrays):
    import h5py

    with h5py.File(path, "w") as f:
        for k, v in arrays.items():
            f.create_dataset(k, data=v)
    return path


def test_psiz_rows_end_in_padding_and_missing_columns_take_their_defaults(tmp_path):
    from conceptlens.importers import hsj as H

    stim = np.array([[0, 1, 2, -1], [3, 4, 5, 6]], np.int32)
    raws = H.read_hdf5(_h5(tmp_path / "obs.hdf5", stimulus_set=stim, n_select=np.array([1, 2])))
    got = [(r.query, r.references, r.chosen, r.kind, r.weight, r.rt_ms, r.agent_id) for r in raws]
    assert got == [
        (0, [1, 2], [1], "2rank1", 1.0, None, "0"),
        (3, [4, 5, 6], [4, 5], "3rank2", 1.0, None, "0"),
    ]
    _h5(tmp_path / "no_select.hdf5", stimulus_set=stim)
    with pytest.raises(
        imp.ImportInputError, match="no_select.hdf5: psiz observations lack dataset 'n_select'"
    ):
        H.read_hdf5(tmp_path / "no_select.hdf5")
    _h5(tmp_path / "short.hdf5", stimulus_set=stim, n_select=np.array([1, 2]), weight=np.array([0.5]))
    with pytest.raises(imp.ImportInputError, match="short.hdf5: weight has 1 values for 2 trials"):
        H.read_hdf5(tmp_path / "short.hdf5")


def test_a_folder_of_psiz_observations_is_found_beside_its_catalog(tmp_path):
    from conceptlens.importers import hsj as H

    src = tmp_path / "psiz"
    src.mkdir()
    stim = np.array([[0, 1, 2]], np.int32)
    _h5(src / "obs.hdf5", stimulus_set=stim, n_select=np.array([1]))
    _h5(
        src / "catalog.hdf5",
        stimulus_id=np.arange(3),
        stimulus_filepath=np.array([b"a.png", b"b.png", b"c.png"]),
    )
    (src / "notes.txt").write_text("x")
    assert H.detect(src) == ("hdf5", src / "obs.hdf5")


def test_a_missing_reference_is_named_with_the_references_in_order():
    from conceptlens.importers import hsj as H
    from tests.hsj_fixtures import timestep

    step = timestep(0, 1, [2, 3, 4, 5], [2])
    step["interactions"] = [i for i in step["interactions"] if i["kind"] != "content:reference_1"]
    with pytest.raises(imp.ImportInputError, match=r"needs references 0\.\.3, got 3 \(\[0, 2, 3\]\)"):
        H._timestep(step, "here")


@pytest.fixture
def hsj_ws(tmp_path):
    """Dataset d: a/p0..p3.png, b/q0..q3.png and c/p1.png; dataset e: a/p0..p3.png (the
    same file names as d's)."""
    ws = workspace(tmp_path)
    d, e = tmp_path / "d", tmp_path / "e"
    for i in range(4):
        draw(d / "a" / f"p{i}.png", RGB["red"], i)
        draw(d / "b" / f"q{i}.png", RGB["blue"], 10 + i)
        draw(e / "a" / f"p{i}.png", RGB["green"], 20 + i)
    draw(d / "c" / "p1.png", RGB["green"], 30)
    run(ws, "d", scan_folder(d))
    run(ws, "e", scan_folder(e))
    return ws


def _release(src, stimuli, files):
    """stimuli.txt (local ids from 1) and {split/file: [(sequence_id, [(q, refs, chosen)])]}."""
    from tests.hsj_fixtures import local_id, timestep

    src.mkdir(parents=True)
    lines = ["local_id|filepath|wordnet_id"] + [
        f"{local_id(k)}|{p}|n0" for k, p in enumerate(stimuli, start=1)
    ]
    (src / "stimuli.txt").write_text("\n".join(lines) + "\n")
    for name, seqs in files.items():
        data = [
            {
                "sequence_id": sid,
                "anonymous_id": f"p{sid}",
                "grade": 80,
                "sequence": [timestep(p, *t) for p, t in enumerate(steps)],
            }
            for sid, steps in seqs
        ]
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_text(json.dumps({"data": data}))
    return src


def test_stimuli_match_the_named_dataset_s_images_by_id_or_file_name(tmp_path, hsj_ws):
    from conceptlens.importers.hsj import import_hsj

    ws = hsj_ws
    # stimuli 1..8 alternately by image id and by the source file's name (shared with e's files)
    names = ["d-a-p0", "q1", "p2", "d-b-q0", "p3", "d-b-q2", "q3", "d-a-p1"]
    image = ["d-a-p0", "d-b-q1", "d-a-p2", "d-b-q0", "d-a-p3", "d-b-q2", "d-b-q3", "d-a-p1"]
    src = _release(
        tmp_path / "hsj",
        [f"/imgs/{n}.png" for n in names],
        {
            "train_seqs/seq_b.json": [(3, [(5, [6, 7], [7])])],
            "train_seqs/seq_a.json": [(1, [(1, [2, 3], [3]), (2, [3, 4], [4])]), (2, [(8, [1, 5], [1])])],
            "test_seqs/seq_c.json": [(9, [(4, [4, 6], [4])])],
        },
    )
    r = import_hsj(ws.root, src, dataset="d")
    assert (r["trials"], r["catch"], r["dropped"], r["stimuli"]) == (5, 1, 0, 8)
    t = ws.read("similarity_trials", dataset="d").to_pylist()
    got = [(x["trial_id"], x["split"], x["query"], x["references"], x["chosen"], x["is_catch"]) for x in t]
    # files in name order, then sequences and positions in file order
    assert got == [
        ("1-0", "train", image[0], [image[1], image[2]], [image[2]], False),
        ("1-1", "train", image[1], [image[2], image[3]], [image[3]], False),
        ("2-0", "train", image[7], [image[0], image[4]], [image[0]], False),
        ("3-0", "train", image[4], [image[5], image[6]], [image[6]], False),
        ("9-0", "test", image[3], [image[3], image[5]], [image[3]], True),
    ]
    # the same trials again: refused, naming the first of them
    with pytest.raises(
        imp.ImportInputError, match=r"seq_a.json: sequence 1, position 0: trial '1-0' is already in"
    ):
        import_hsj(ws.root, src, dataset="d")
    # a file name two images of d share matches neither
    amb = _release(
        tmp_path / "amb",
        ["/imgs/p1.png", "/imgs/p0.png", "/imgs/q0.png"],
        {"train_seqs/seq_0.json": [(7, [(2, [1, 3], [3])])]},
    )
    with pytest.raises(
        imp.ImportInputError,
        match=r"stimulus '/imgs/p1.png' matches no image .*\(ambiguous: d-a-p1, d-c-p1\)",
    ):
        import_hsj(ws.root, amb, dataset="d")
