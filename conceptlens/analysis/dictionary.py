"""`conceptlens analyze dictionary`: dictionary concepts of each checkpoint's features.

A dictionary factorises a checkpoint's features X (images x dims) as codes x atoms, codes
non-negative: each atom is a candidate concept and its members are the images whose code
for it is among its top N positive codes (`conceptlens.metrics.dictionary.members`; the
`scoreboard` analysis scores them beside clusters, units, labels and random directions).
Methods (`--methods`): `nmf` (non-negative matrix factorisation, overcomplete's HALS; the
features must be non-negative), `semi_nmf` (atoms of any sign: a middle layer's signed
features), `convex_nmf` (atoms are convex combinations of images: archetypal), `topk_sae`
(a TopK sparse autoencoder) and `sklearn_nmf` (scikit-learn's MiniBatchDictionaryLearning
with non-negative codes and atoms: the cross-check of the `nmf` row). `auto` (the default)
takes `nmf`, `convex_nmf`, `topk_sae` and `sklearn_nmf` on non-negative features and
`semi_nmf`, `convex_nmf` and `topk_sae` on signed ones (CRAFT, Fel et al. 2023; Archetypal
SAE, Fel et al. 2025; TopK SAE, Gao et al. 2024).

One unit per checkpoint; it stores every method's atoms, the largest non-zero codes of
each atom (`--keep-codes`), and per method the reconstruction R^2, the mean L0 of the codes,
the dead atoms and the stability across two seeds: two further fits, each on its own seeded
90% of the images, whose atoms are matched by the Hungarian method on |cosine| (Fel et al.
2025 measure stability so); the mean |cosine| of the matched pairs.
"""

from __future__ import annotations

import numpy as np

from .. import schema
from ..metrics import dictionary as D
from ..schema import FLOAT, FLOAT_LIST, INT, NON_NEGATIVE, STRING, UNIT, Column, Table
from ..workspace import files_signature
from .base import ONLY, Analysis, Option, Scope, Skipped, Unit, checkpoints_with_features, only_selected
from .common import Context, progress, write_rows

AUTO = "auto"
OVERCOMPLETE = "overcomplete==0.3.0"  # the Makefile installs it with --no-deps
CHOICES = (AUTO, *D.METHODS)

_CKPT = schema.CHECKPOINT_PARTITION
_METHOD = Column("method", STRING, "Dictionary method (`--methods`).", allowed=D.METHODS)

FIT = Table(
    "dictionary_fit",
    "dictionary_fit",
    "One row per checkpoint and dictionary method: how well the atoms reconstruct the features, "
    "how sparse the codes are and how stable the atoms are across seeds.",
    (
        _CKPT,
        _METHOD,
        Column("solver", STRING, "What ran: library, class and solver."),
        Column("atoms", INT, "Number of atoms k (`--atoms`).", positive=True),
        Column(
            "top_k",
            INT,
            "TopK SAE: codes kept per image; null for the other methods.",
            nullable=True,
            positive=True,
        ),
        Column("images", INT, "Images the dictionary was fitted on.", positive=True),
        Column(
            "r2",
            FLOAT,
            "Reconstruction R^2: 1 - |X - Z D|^2 / |X - mean X|^2 (at most 1).",
            bounds=(None, 1.0),
        ),
        Column(
            "l0", FLOAT, "Mean number of non-zero codes per image.", bounds=NON_NEGATIVE, at_most=("atoms",)
        ),
        Column(
            "dead", INT, "Atoms whose code is 0 for every image.", bounds=NON_NEGATIVE, at_most=("atoms",)
        ),
        Column(
            "stability",
            FLOAT,
            "Mean |cosine| of the atoms of two refits (seeded 90% samples), matched by the Hungarian method.",
            nullable=True,
            bounds=UNIT,
        ),
    ),
    key=("checkpoint_id", "method"),
    partition=("checkpoint_id",),
)

ATOMS = Table(
    "dictionary_atoms",
    "dictionary_atoms",
    "One row per atom of a checkpoint's dictionary: its direction in feature space.",
    (
        _CKPT,
        _METHOD,
        Column("atom", INT, "Atom index in [0, k).", bounds=NON_NEGATIVE),
        Column("vector", FLOAT_LIST, "The atom (feature_dim values), as the method returns it.", finite=True),
        Column("active", FLOAT, "Share of the images with a non-zero code for it.", bounds=UNIT),
    ),
    key=("checkpoint_id", "method", "atom"),
    partition=("checkpoint_id",),
)

CODES = Table(
    "dictionary_codes",
    "dictionary_codes",
    "The sparse codes: for each atom its largest non-zero codes (at most `--keep-codes`), "
    "rank 0 first; an atom's members as a concept are its first N.",
    (
        _CKPT,
        _METHOD,
        Column("atom", INT, "Atom index in [0, k).", bounds=NON_NEGATIVE),
        Column("image_id", STRING, "Image.", references="images.image_id"),
        Column(
            "rank",
            INT,
            "Rank of the code within the atom (0 = largest; ties: image order).",
            bounds=NON_NEGATIVE,
        ),
        Column("code", FLOAT, "The code (> 0).", positive=True, finite=True),
    ),
    key=("checkpoint_id", "method", "atom", "image_id"),
    partition=("checkpoint_id",),
)


def methods_for(opts: dict, signed: bool) -> tuple[str, ...]:
    """The methods a unit runs: those asked for, `auto` by the features' sign."""
    asked = tuple(opts["methods"])
    if AUTO in asked:
        base = (
            ("semi_nmf", "convex_nmf", "topk_sae")
            if signed
            else ("nmf", "convex_nmf", "topk_sae", "sklearn_nmf")
        )
        asked = tuple(dict.fromkeys([*base, *(m for m in asked if m != AUTO)]))
    return asked


def _units(ctx: Context, opts: dict, scope: Scope) -> list[Unit]:
    cids = only_selected(checkpoints_with_features(ctx, opts, scope), opts.get("only"))
    return [Unit({"checkpoint_id": c}, c) for c in cids]


def _inputs(ctx: Context, unit: Unit, opts: dict) -> str:
    return files_signature(ctx.ws.partition_files("features", checkpoint_id=unit.partition["checkpoint_id"]))


def _run(ctx: Context, unit: Unit, opts: dict, scope: Scope) -> str:
    cid = unit.partition["checkpoint_id"]
    inputs = _inputs(ctx, unit, opts)
    ids, X = ctx.features(cid)
    where = f"features of checkpoint {cid!r}"
    if not np.isfinite(X).all():
        raise ValueError(f"{where} hold NaN or infinite values: the dictionary cannot be fitted")
    k = int(opts["atoms"])
    if k > len(ids):
        raise ValueError(f"--atoms {k} is larger than the {len(ids)} images of checkpoint {cid!r}")
    signed = bool((X < 0).any())
    methods = methods_for(opts, signed)
    for m in methods:  # every method checked before anything is fitted or written
        D.check_features(X, m, name=where)
    fits, atoms, codes = [], [], []
    seed, keep = int(opts["seed"]), int(opts["keep_codes"])
    for m in progress(methods, f"dictionary {cid}", enabled=ctx.progress):
        kw = dict(max_iter=int(opts["max_iter"]), sae_epochs=int(opts["sae_epochs"]))
        if m == "topk_sae" and opts.get("top_k"):
            kw["top_k"] = int(opts["top_k"])
        try:
            f = D.fit(X, m, k, seed, unit=unit.partition, **kw)
        except ImportError as e:  # the pipeline's packages are not installed
            raise Skipped(f"{e.name or e}: not installed (pip install --no-deps {OVERCOMPLETE})") from None
        stab = None
        if opts["stability"]:
            stab = float(D.stability(X, m, k, seed, unit=unit.partition, **kw)[0])
        fits.append(
            {
                "method": m,
                "solver": f.solver,
                "atoms": k,
                "top_k": (int(opts["top_k"]) or D.default_top_k(k)) if m == "topk_sae" else None,
                "images": len(ids),
                "r2": float(f.r2),
                "l0": float(f.l0),
                "dead": int(np.sum(f.dead)),
                "stability": None if stab is None else min(1.0, max(0.0, stab)),
            }
        )
        active = (f.codes > 0).mean(axis=0)
        for a in range(k):
            atoms.append(
                {
                    "method": m,
                    "atom": a,
                    "vector": np.asarray(f.atoms[a], np.float32),
                    "active": float(active[a]),
                }
            )
        for a, rows in enumerate(D.members(f.codes, keep)):
            for r, i in enumerate(rows):
                codes.append(
                    {"method": m, "atom": a, "image_id": str(ids[i]), "rank": r, "code": float(f.codes[i, a])}
                )
    write_rows(ctx, "dictionary_codes", codes, checkpoint_id=cid)
    write_rows(ctx, "dictionary_atoms", atoms, checkpoint_id=cid)
    write_rows(ctx, "dictionary_fit", fits, metadata=ANALYSIS.done_metadata(opts, inputs), checkpoint_id=cid)
    return inputs


ANALYSIS = Analysis(
    name="dictionary",
    title="Dictionary concepts: NMF, convex NMF, TopK SAE atoms of each checkpoint",
    writes=("dictionary_codes", "dictionary_atoms", "dictionary_fit"),
    tables=(FIT, ATOMS, CODES),
    units=_units,
    run=_run,
    inputs=_inputs,
    options=(
        Option(
            "methods",
            str,
            (AUTO,),
            "dictionary methods: nmf, semi_nmf, convex_nmf, topk_sae, sklearn_nmf, or auto "
            "(nmf, convex_nmf, topk_sae and sklearn_nmf on non-negative features; semi_nmf, "
            "convex_nmf and topk_sae on signed ones)",
            multiple=True,
            choices=CHOICES,
        ),
        Option("atoms", int, 16, "atoms k of every dictionary (at most the images)", minimum=1, maximum=4096),
        Option(
            "top_k",
            int,
            0,
            "TopK SAE: codes kept per image (0: the library's rule, k / 10, at least 1)",
            minimum=0,
        ),
        Option("max_iter", int, 500, "most iterations of the NMF solvers", minimum=1),
        Option("sae_epochs", int, 50, "training epochs of the sparse autoencoder", minimum=1),
        Option("stability", bool, True, "measure stability across two seeded refits (three fits per method)"),
        Option(
            "keep_codes",
            int,
            100,
            "non-zero codes stored per atom, largest first (an atom's members are its first N)",
            minimum=1,
        ),
        ONLY,
    ),
    doc=__doc__.splitlines()[0],
)
