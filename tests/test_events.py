"""Concept events between clusterings (conceptlens/metrics/events.py) on hand-built
clusterings: a known split, merge, birth and death are each found and nothing else."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import hypergeom

from conceptlens.metrics.compare import contingency
from conceptlens.metrics.events import (
    concept_events,
    label_links,
    sequence_events,
    significant_links,
)


def _base() -> np.ndarray:
    # Four clusters of 50 images each.
    return np.repeat([0, 1, 2, 3], 50)


def _kinds(ev: pd.DataFrame) -> list[tuple]:
    return sorted((k, b, a) for k, b, a in zip(ev["kind"], ev["before"], ev["after"]))


def test_identical_clustering_relabelled_gives_continuations_only():
    before = _base()
    after = np.array([7, 5, 9, 6])[before]  # same partition, other ids
    ev = concept_events(before, after)
    assert _kinds(ev) == [
        ("continuation", (0,), (7,)),
        ("continuation", (1,), (5,)),
        ("continuation", (2,), (9,)),
        ("continuation", (3,), (6,)),
    ]
    assert ev["images"].tolist() == [50] * 4
    assert all(s == (1.0,) for s in ev["shares_before"])


def test_small_noise_gives_no_event():
    rng = np.random.default_rng(0)
    before = _base()
    after = before.copy()
    moved = rng.choice(len(after), 12, replace=False)  # 6% of the images, anywhere
    after[moved] = rng.integers(0, 4, len(moved))
    ev = concept_events(before, after)
    assert set(ev["kind"]) == {"continuation"} and len(ev) == 4


def test_split_found_and_nothing_else():
    before = _base()
    after = before.copy()
    after[50:75] = 4  # cluster 1 -> 1 and 4 (25 images each)
    ev = concept_events(before, after)
    assert _kinds(ev) == [
        ("continuation", (0,), (0,)),
        ("continuation", (2,), (2,)),
        ("continuation", (3,), (3,)),
        ("split", (1,), (1, 4)),
    ]
    split = ev[ev["kind"] == "split"].iloc[0]
    assert split["size_before"] == (50,) and split["size_after"] == (25, 25)
    assert split["shares_before"] == (1.0,) and split["shares_after"] == (1.0, 1.0)
    assert split["images"] == 50


def test_merge_found_and_nothing_else():
    before = _base()
    after = before.copy()
    after[after == 3] = 2  # clusters 2 and 3 -> 2
    ev = concept_events(before, after)
    assert _kinds(ev) == [
        ("continuation", (0,), (0,)),
        ("continuation", (1,), (1,)),
        ("merge", (2, 3), (2,)),
    ]
    merge = ev[ev["kind"] == "merge"].iloc[0]
    assert merge["size_after"] == (100,) and merge["shares_after"] == (1.0,)


def test_birth_and_death_found_and_nothing_else():
    # Cluster 3 dissolves into 0, 1, 2 (a few images each: a death) and a new cluster 4
    # gathers a few images from each of 0, 1, 2 (a birth).
    before = np.repeat([0, 1, 2, 3], [100, 100, 100, 12])
    after = before.copy()
    after[300:304], after[304:308], after[308:312] = 0, 1, 2
    after[[0, 1, 2, 100, 101, 102, 200, 201, 202]] = 4
    ev = concept_events(before, after)
    assert _kinds(ev) == [
        ("birth", (), (4,)),
        ("continuation", (0,), (0,)),
        ("continuation", (1,), (1,)),
        ("continuation", (2,), (2,)),
        ("death", (3,), ()),
    ]


def test_large_cluster_is_not_significant_by_chance():
    # B holds half the images in one cluster: every A cluster sends it about half its
    # images. Shares pass min_share, the hypergeometric test does not.
    rng = np.random.default_rng(1)
    before = np.repeat(np.arange(4), 100)
    after = rng.permutation(np.repeat([0, 1], 200))
    assert set(concept_events(before, after, alpha=None)["kind"]) >= {"split", "merge"}
    ev = concept_events(before, after)
    assert set(ev["kind"]) <= {"birth", "death"}


def test_p_value_is_the_hypergeometric_tail():
    links = contingency(
        pd.DataFrame({"image_id": range(10), "cluster": [0] * 6 + [1] * 4}),
        pd.DataFrame({"image_id": range(10), "cluster": [0] * 5 + [1] * 5}),
    )
    s = significant_links(links, min_images=1)
    row = s[(s["a"] == 0) & (s["b"] == 0)].iloc[0]
    # By hand: P(X >= 5), X ~ Hypergeom(N=10, K=6, n=5) = C(6,5) C(4,0) / C(10,5) = 6/252.
    assert row["p_value"] == pytest.approx(6 / 252)
    assert row["p_value"] == pytest.approx(hypergeom.sf(4, 10, 6, 5))


@pytest.mark.parametrize("case", ["split", "merge", "birth"])
def test_permuting_images_and_relabelling_changes_nothing(case):
    before = np.repeat([0, 1, 2, 3], [100, 100, 100, 12])
    after = before.copy()
    if case == "split":
        after[50:100] = 9
    elif case == "merge":
        after[after == 1] = 0
    else:
        after[[0, 1, 2, 100, 101, 102, 200, 201, 202]] = 9
    ev = concept_events(before, after)
    rng = np.random.default_rng(2)
    order = rng.permutation(len(before))
    ma = {c: f"a{c}" for c in np.unique(before)}
    mb = {c: f"b{c}" for c in np.unique(after)}
    ev2 = concept_events([ma[c] for c in before[order]], [mb[c] for c in after[order]])
    renamed = ev.assign(
        before=[tuple(ma[c] for c in t) for t in ev["before"]],
        after=[tuple(mb[c] for c in t) for t in ev["after"]],
    )
    key = ["kind", "before", "after"]
    pd.testing.assert_frame_equal(
        renamed.sort_values(key).reset_index(drop=True), ev2.sort_values(key).reset_index(drop=True)
    )
    assert case in set(ev["kind"])


def test_min_images_declines_tiny_links():
    before = np.repeat([0, 1], [40, 4])
    after = np.repeat([0, 1], [40, 4])
    ev = concept_events(before, after, min_images=5)
    assert _kinds(ev) == [("birth", (), (1,)), ("continuation", (0,), (0,)), ("death", (1,), ())]
    assert len(concept_events(before, after, min_images=4)) == 2


def test_sequence_gives_each_event_its_step():
    c0 = _base()
    c1 = c0.copy()
    c1[50:75] = 4  # step 1: split of 1
    c2 = c1.copy()
    c2[c2 == 3] = 2  # step 2: merge of 2 and 3
    ev = sequence_events([c0, c1, c2])
    changes = ev[ev["kind"] != "continuation"]
    assert list(zip(changes["step"], changes["kind"])) == [(1, "split"), (2, "merge")]
    frames = [pd.DataFrame({"image_id": np.arange(len(c)), "cluster": c}) for c in (c0, c1, c2)]
    pd.testing.assert_frame_equal(sequence_events(frames), ev)
    with pytest.raises(ValueError, match="two or more"):
        sequence_events([c0])


def test_links_are_labelled_with_their_event():
    before = _base()
    after = before.copy()
    after[50:75] = 4
    after[after == 3] = 2
    fa = pd.DataFrame({"image_id": range(200), "cluster": before})
    fb = pd.DataFrame({"image_id": range(200), "cluster": after})
    links = label_links(contingency(fa, fb))
    assert sorted(zip(links["a"], links["b"], links["event"])) == [
        (0, 0, "continuation"),
        (1, 1, "split"),
        (1, 4, "split"),
        (2, 2, "merge"),
        (3, 2, "merge"),
    ]
    # A stray image is a link, but not a significant one.
    after[0] = 1
    links = label_links(contingency(fa, fb.assign(cluster=after)))
    assert links.set_index(["a", "b"]).loc[(0, 1), "event"] == "not significant"
    # A link in a split and a merge at once: half of A0 and half of A1 form B1.
    regrouped = label_links(
        contingency(
            pd.DataFrame({"image_id": range(160), "cluster": np.repeat([0, 1, 2, 3], 40)}),
            pd.DataFrame(
                {"image_id": range(160), "cluster": np.repeat([0, 1, 4, 2, 3], [20, 40, 20, 40, 40])}
            ),
        )
    )
    assert regrouped.set_index(["a", "b"]).loc[(0, 1), "event"] == "split+merge"


def test_bad_parameters_are_named():
    with pytest.raises(ValueError, match="min_share"):
        concept_events([0], [0], min_share=0)
    with pytest.raises(ValueError, match="min_images"):
        concept_events([0], [0], min_images=0)
    with pytest.raises(ValueError, match="same images"):
        concept_events([0, 1], [0])


# ---- events ----------------------------------------------------------------------------------
def test_a_merge_gives_each_earlier_cluster_its_own_share():
    """Clusters 2 and 3 (50 images each) merge into 2, except 10 images of cluster 2 that
    scatter (5 to 0, 5 to 1: not significant). By hand: cluster 2 puts 40 of its 50 images
    into the merge, cluster 3 all 50; the merge holds 90 images."""
    before = np.repeat([0, 1, 2, 3], 50)
    after = before.copy()
    after[after == 3] = 2
    after[100:105], after[105:110] = 0, 1
    ev = concept_events(before, after)
    merge = ev[ev["kind"] == "merge"].iloc[0]
    assert merge["before"] == (2, 3) and merge["after"] == (2,)
    assert merge["size_before"] == (50, 50) and merge["size_after"] == (90,)
    assert merge["shares_before"] == (0.8, 1.0) and merge["shares_after"] == (1.0,)
    assert merge["images"] == 90
    # rows by kind (EVENT_KINDS order), then cluster ids
    assert list(zip(ev["kind"], ev["before"], ev["after"])) == [
        ("continuation", (0,), (0,)),
        ("continuation", (1,), (1,)),
        ("merge", (2, 3), (2,)),
    ]
