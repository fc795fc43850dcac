"""What the dashboard shows, as functions of a workspace: `view(db, **args) -> DataFrame`.

`db` is a `conceptlens.db.WorkspaceDB` (anything with `query(sql, params: dict)`,
`has(table)` and `columns(table)`). A view runs its SQL, with values bound as named
parameters (`$ckpt`), and computes what a page or a figure needs, so the dashboard
only renders and a script makes the same figures without it:

    from conceptlens import views
    from conceptlens.db import WorkspaceDB
    from conceptlens.figures.clusters import purity_coherence
    db = WorkspaceDB("data/demo")
    purity_coherence(views.clusters.cluster_table(db, dataset="shapes", checkpoint="c", k=5))

Views only read, and return data: how a number is shown (its format, a readable column
header) is the dashboard's, in components/formats.py. Nothing here imports Streamlit.
"""

from . import checkpoints, clusters, home

__all__ = ["checkpoints", "clusters", "home"]
