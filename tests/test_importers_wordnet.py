"""conceptlens/importers/wordnet.py: every ancestor sharing a lemma gets its own wnid."""

from __future__ import annotations

# ---- wordnet.imagenet_tree ----------------------------------------------------------------
TWO_BIRDS = """\
00001740 03 n 01 entity 0 002 ~ 01000001 n 0000 ~ 01000002 n 0000 | the root
01000001 05 n 01 bird 0 003 @ 00001740 n 0000 ~ 01000011 n 0000 ~ 01000012 n 0000 | one sense
01000002 05 n 01 bird 0 003 @ 00001740 n 0000 ~ 01000021 n 0000 ~ 01000022 n 0000 | another sense
01000011 05 n 01 a 0 001 @ 01000001 n 0000 | class a
01000012 05 n 01 b 0 001 @ 01000001 n 0000 | class b
01000021 05 n 01 c 0 001 @ 01000002 n 0000 | class c
01000022 05 n 01 d 0 001 @ 01000002 n 0000 | class d
"""


def test_every_ancestor_sharing_a_lemma_gets_its_wnid(tmp_path):
    """first_item on the name-grouping loops: only the first node, the first name or the
    first of two same-named ancestors was looked at, so two ancestors kept the name "bird"
    (or the wrong node got a wnid). Two "bird" senses, each over two classes."""
    from conceptlens.importers import wordnet

    path = tmp_path / "data.noun"
    path.write_text(TWO_BIRDS)
    classes = ["n01000011", "n01000012", "n01000021", "n01000022"]
    parent, names = wordnet.imagenet_tree(classes, path, None)
    assert parent["n01000011"] == "n01000001" and parent["n01000021"] == "n01000002"
    assert names == {
        "n00001740": "entity",
        "n01000001": "bird (n01000001)",
        "n01000002": "bird (n01000002)",
        "n01000011": "a",
        "n01000012": "b",
        "n01000021": "c",
        "n01000022": "d",
    }
