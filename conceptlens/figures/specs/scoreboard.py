"""The Scoreboard page's figures (pages/scoreboard.py): its URL keys `ds`, `ckpt` (a
checkpoint with a scoreboard), `score` (the score ranked by; `purity_label` when the
checkpoint has it, else `learnability`), `src` (the sources shown, comma-separated; all
when absent) and `concept` (SOURCE/CONCEPT, the concept looked at; the first ranked)."""

from __future__ import annotations

from ...errors import ConceptLensError
from ...views import scoreboard as V
from ..catalog import Figure, Param, add, view
from .common import col


def chosen_sources(db, p) -> list[str] | None:
    """The sources `src` names (None: all), each a source of the checkpoint."""
    raw = p.get("src")
    if raw is None:
        return None
    have = view(db, V.sources, checkpoint=p["ckpt"])
    picked = [s for s in str(raw).split(",") if s]
    bad = [s for s in picked if s not in have]
    if bad:
        raise ConceptLensError(
            f"parameter src: {', '.join(bad)} is not a source of {p['ckpt']!r} ({', '.join(have)})"
        )
    return [s for s in have if s in picked]


def _keys(db, p) -> list[str]:
    return col(
        view(db, V.ranked, checkpoint=p["ckpt"], score=p["score"], chosen=chosen_sources(db, p)), "key"
    )


DS = Param("ds", lambda db, p: col(view(db, V.datasets), "dataset"), help="dataset")
CKPT = Param(
    "ckpt", lambda db, p: col(view(db, V.checkpoints, dataset=p["ds"]), "checkpoint_id"), help="checkpoint"
)
SCORE = Param(
    "score",
    lambda db, p: view(db, V.scores, checkpoint=p["ckpt"]),
    default=lambda db, p: V.default_score(view(db, V.scores, checkpoint=p["ckpt"])),
    help="the score concepts are ranked by",
)
SRC = Param("src", optional=True, help="sources shown, comma-separated (default: all)")
CONCEPT = Param("concept", _keys, help="the concept looked at, SOURCE/CONCEPT (default: the first ranked)")


def _scatter(db, p):
    from ..scoreboard import scatter

    pts = view(db, V.scatter_points, checkpoint=p["ckpt"], chosen=chosen_sources(db, p))
    return scatter(
        pts,
        view(db, V.null_bands, checkpoint=p["ckpt"]),
        V.SCATTER_X,
        V.SCATTER_Y,
    )


def _sources(db, p):
    from ..scoreboard import sources

    chosen = chosen_sources(db, p)
    values = view(db, V.source_values, checkpoint=p["ckpt"], score=p["score"], chosen=chosen)
    summary = view(db, V.source_summary, checkpoint=p["ckpt"], score_names=[p["score"]], chosen=chosen)
    return sources(
        values,
        summary,
        view(db, V.null_bands, checkpoint=p["ckpt"]),
        p["score"],
    )


def _projection(db, p):
    from ..scoreboard import projection

    src, concept = V.split_key(p["concept"])
    pts = view(db, V.projection, checkpoint=p["ckpt"], source=src, concept=concept)
    rows = view(db, V.concept, checkpoint=p["ckpt"], source=src, concept=concept)
    name = str(rows["name"].iloc[0]) if len(rows) else p["concept"]
    return projection(pts, name, view(db, V.projection_density, checkpoint=p["ckpt"]))


def axis_order(rows) -> str:
    """What orders the checkpoints of `views.scoreboard.across`: epoch, depth or both."""
    epochs, depths = rows["epoch"].notna().any(), rows["depth"].notna().any()
    return {(True, False): "epoch", (False, True): "depth"}.get((epochs, depths), "epoch, then depth")


def axis_title(rows) -> str:
    return f"checkpoint (by {axis_order(rows)})"


def _across(db, p):
    from ..scoreboard import across

    src, concept = V.split_key(p["concept"])
    ds = str(p["ds"])
    rows = view(db, V.across, dataset=ds, checkpoint=p["ckpt"], source=src, concept=concept, score=p["score"])
    return across(rows, p["score"], axis_title(rows))


PARAMS = (DS, CKPT, SCORE, SRC)
add(
    Figure(
        "scoreboard",
        "scoreboard_scatter",
        "Purity against coherence of every concept, by source",
        (DS, CKPT, SRC),
        _scatter,
        aspect=0.8,
        narrow_aspect=1.15,
        steps=("scoreboard",),
    )
)
add(
    Figure(
        "scoreboard",
        "scoreboard_sources",
        "A score per source, against random directions and random sets",
        PARAMS,
        _sources,
        aspect=0.7,
        narrow_aspect=1.1,
        steps=("scoreboard",),
    )
)
add(
    Figure(
        "scoreboard",
        "scoreboard_projection",
        "A concept's members on the projection",
        (*PARAMS, CONCEPT),
        _projection,
        aspect=0.8,
        steps=("scoreboard",),
        reads=("projections",),  # no step of the page writes it: its spec's `optional`
    )
)
add(
    Figure(
        "scoreboard",
        "scoreboard_across",
        "A concept across checkpoints and layers",
        (*PARAMS, CONCEPT),
        _across,
        aspect=0.55,
        narrow_aspect=0.8,
        steps=("scoreboard",),
        optional=("dictionary",),
    )
)
