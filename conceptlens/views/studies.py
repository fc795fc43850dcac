"""What the Studies page and the participant page read of a workspace: the clusterings and
datasets a study can be designed on, and a task's pictures. Views only read: every write of a
study (creating, closing, exporting, joining, answering), and every private read of the answers
store, goes through `conceptlens.studies.service`, which decides who may.

Workspace queries take the page's `db` (cached by the workspace's fingerprint).
"""

from __future__ import annotations

import pandas as pd

from ..studies.shown import Picture, picture_bytes

KIND_NAMES = {
    "coherence": "Coherence (2AFC with reference images)",
    "describability": "Describability (2AFC with a description)",
    "similarity": "Similarity (8-rank-2 trials)",
}
INSTRUCTIONS = {
    "coherence": (
        "The images at the top form a group. Which of the two images below belongs to the same group?"
    ),
    "describability": "Which of the two images fits the description best?",
    "similarity": (
        "Which two images on the right are most similar to the image on the left? "
        "Choose the most similar first, then the second most similar."
    ),
}
COOKIE_PREFIX = "conceptlens_p_"


def cookie_name(study_id: str) -> str:
    return COOKIE_PREFIX + study_id


# ---- the workspace: what a study can be designed on ------------------------------------------
def clusterings(db) -> pd.DataFrame:
    """Every clustering (checkpoint_id, k) with its dataset, from folder names alone."""
    parts = pd.DataFrame(db.ws.partitions("clusters"), columns=["checkpoint_id", "k"])
    if parts.empty or not db.has("checkpoints"):
        return parts.assign(dataset=pd.Series(dtype=str))
    ck = db.query("SELECT checkpoint_id, dataset FROM checkpoints")
    return parts.merge(ck, on="checkpoint_id").sort_values(["checkpoint_id", "k"]).reset_index(drop=True)


def cluster_options(db, checkpoint: str, k: int) -> pd.DataFrame:
    """The clusters of one clustering: size, and purity / coherence / caption where computed."""
    sizes = db.query(
        "SELECT cluster, count(*) AS size FROM clusters WHERE checkpoint_id = $ckpt AND k = $k "
        "GROUP BY cluster ORDER BY cluster",
        {"ckpt": checkpoint, "k": int(k)},
    )
    if db.has("cluster_metrics"):
        m = db.query(
            "SELECT cluster, purity, coherence_random, coherence_hard FROM cluster_metrics "
            "WHERE checkpoint_id = $ckpt AND k = $k",
            {"ckpt": checkpoint, "k": int(k)},
        )
        sizes = sizes.merge(m, on="cluster", how="left")
    if db.has("cluster_captions"):
        c = db.query(
            "SELECT cluster, caption FROM cluster_captions WHERE checkpoint_id = $ckpt AND k = $k",
            {"ckpt": checkpoint, "k": int(k)},
        )
        sizes = sizes.merge(c, on="cluster", how="left")
    return sizes


def datasets(db) -> pd.DataFrame:
    return db.query("SELECT dataset, count(*) AS images FROM images GROUP BY dataset ORDER BY dataset")


def exported_studies(db) -> pd.DataFrame:
    """The studies exported into the workspace (`study_summary`), newest first."""
    if not db.has("study_summary"):
        return pd.DataFrame(columns=["study_id", "kind", "measure", "created", "participants", "excluded"])
    return db.query(
        "SELECT study_id, kind, measure, created, participants, finished, excluded, answers, accuracy, "
        "lo, hi, alpha FROM study_summary ORDER BY created DESC, study_id"
    )


def exported_2afc(db) -> pd.DataFrame:
    """The exported 2AFC studies with per-cluster results (study_id, measure), newest first."""
    if not (db.has("study_summary") and db.has("study_clusters")):
        return pd.DataFrame(columns=["study_id", "measure"])
    return db.query(
        "SELECT study_id, measure FROM study_summary WHERE study_id IN "
        "(SELECT DISTINCT study_id FROM study_clusters) ORDER BY created DESC, study_id"
    )


def exported_clusters(db, study: str) -> pd.DataFrame:
    """One exported study's `study_clusters` rows (people's accuracy per cluster, the proxy's)."""
    return db.query("SELECT * FROM study_clusters WHERE study_id = $s ORDER BY cluster", {"s": study})


def picture(root, pic: Picture, side: int) -> bytes:
    return picture_bytes(str(root), pic, side)
