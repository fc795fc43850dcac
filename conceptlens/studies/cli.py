"""`conceptlens study create|list|export|next-round|close|open`: human studies from the
command line (docs/studies.md).

The answers store is `CONCEPTLENS_ANSWERS_URL` (PostgreSQL), else the SQLite file in
`CONCEPTLENS_STATE_DIR`; `--store URL` overrides both.
"""

from __future__ import annotations

import argparse
import json
from urllib.parse import urlencode

from ..cliargs import add_quiet, add_seed, add_workspace
from ..workspace import Workspace
from .design import CAPTION_SOURCES, KINDS, NEGATIVES, SELECTIONS, StudySpec, design


def participant_link(base: str, study_id: str, token: str | None = None, ws: str | None = None) -> str:
    """The link participants open: the dashboard's URL with `?study=` (and `ws`, `token`)."""
    q = {"study": study_id} | ({"ws": ws} if ws else {}) | ({"token": token} if token else {})
    return base.rstrip("/") + "/?" + urlencode(q)


def _clusters(text: str | None):
    if not text:
        return None
    try:
        return tuple(int(c) for c in text.split(",") if c.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--clusters must be comma-separated integers, got {text!r}"
        ) from None


def _create(args) -> int:
    from .store import open_store  # local: the command's own, so --help stays light

    spec = StudySpec(
        kind=args.kind,
        checkpoint_id=args.checkpoint,
        k=args.k,
        clusters=args.clusters,
        negatives=args.negatives,
        caption_source=args.captions,
        dataset=args.dataset,
        stimuli=args.stimuli,
        tasks=args.tasks,
        answers=args.answers,
        per_participant=args.per_participant,
        catch=args.catch,
        refs=args.refs,
        seed=args.seed,
        reclaim_minutes=args.reclaim_minutes,
        selection=args.selection,
    )
    store = open_store(args.store)
    d = design(Workspace(args.workspace), spec)
    study_id, token = store.create_study(d, args.id, token=True if args.token else None)
    _created(store, d, study_id, token, args)
    return 0


def _created(store, d, study_id: str, token: str | None, args) -> None:
    real = sum(not t.is_catch for t in d.tasks)
    print(
        f"study {study_id} created in {store.label}: {real} tasks (+{len(d.tasks) - real} catch), "
        f"{d.n_sessions} sessions of up to {d.spec.per_participant} tasks, {len(d.slots)} answers planned"
    )
    for note in d.notes:
        print(f"note: {note}")
    print(f"participant link: {participant_link(args.url, study_id, token, args.ws)}")


def _next_round(args) -> int:
    from ..analysis.runner import all_options  # local: the analyses load on use
    from .rounds import next_round  # local: the command's own, so --help stays light
    from .store import open_store  # local: the command's own, so --help stays light

    store = open_store(args.store)
    out = next_round(
        store,
        args.study,
        Workspace(args.workspace),
        tasks=args.tasks,
        selection=args.selection,
        max_catch_failure=args.max_catch_failure,
        new_id=args.id,
        token=True if args.token else None,
        options={o: getattr(args, o, None) for o in all_options()},
        progress_bars=not args.quiet,
        step=None if args.quiet else print,
    )
    print(
        f"study {args.study}: {out.exported['similarity_trials']} trial(s) appended to similarity_trials; "
        f"the embedding inferred again"
    )
    for note in out.notes:
        print(f"note: {note}")
    _created(store, out.design, out.study_id, out.token, args)
    return 0


def _list(args) -> int:
    from .store import open_store  # local: the command's own, so --help stays light

    store = open_store(args.store)
    df = store.studies()
    where = store.label
    if args.workspace is not None:
        name = Workspace(args.workspace).meta().get("name")
        df = df[df["workspace"] == name].reset_index(drop=True)
        where = f"{store.label} designed on workspace {name!r} ({args.workspace})"
    if args.json:
        print(json.dumps(df.to_dict(orient="records"), indent=2))
    elif df.empty:
        print(f"no study in {where}")
    else:
        print(f"{len(df)} stud{'y' if len(df) == 1 else 'ies'} in {where}")
        print(df.to_string(index=False))
    return 0


def _export(args) -> int:
    from .results import export  # local: the command's own, so --help stays light
    from .store import open_store  # local: the command's own, so --help stays light

    store = open_store(args.store)
    out = export(store, args.study, Workspace(args.workspace), args.max_catch_failure)
    s = out["summary"]
    print(
        f"study {args.study}: {s['participants']} participants ({s['finished']} finished, "
        f"{s['excluded']} excluded), {s['answers']} answers counted; "
        f"{out['answers']} new answer(s) appended to study_answers"
        + (f", {out['similarity_trials']} trial(s) to similarity_trials" if s["kind"] == "similarity" else "")
    )
    if s["accuracy"] is not None:
        print(f"{s['measure']}: {s['accuracy']:.3f} [{s['lo']:.3f}, {s['hi']:.3f}] (Clopper-Pearson 95%)")
    alpha = "undefined" if s["alpha"] is None else f"{s['alpha']:.3f}"
    print(f"Krippendorff's alpha (nominal): {alpha} over {s['alpha_units']} task(s) answered by 2+ people")
    return 0


def _status(status: str):
    def run(args) -> int:
        from .store import open_store  # local: the command's own, so --help stays light

        open_store(args.store).set_status(args.study, status)
        print(f"study {args.study} is {status}")
        return 0

    return run


def register(sub, parents) -> None:
    store = argparse.ArgumentParser(add_help=False)
    store.add_argument(
        "--store",
        help="answers store URL (postgresql://... or sqlite:///PATH); default "
        "$CONCEPTLENS_ANSWERS_URL, else answers.sqlite in $CONCEPTLENS_STATE_DIR",
    )
    # What a command that creates a study shares: its id and the participant link printed.
    link = argparse.ArgumentParser(add_help=False)
    link.add_argument("--id", help="study id (default: generated)")
    link.add_argument("--token", action="store_true", help="the link carries an access token")
    link.add_argument(
        "--url", default="http://localhost:8501", help="the dashboard's URL, for the printed link"
    )
    link.add_argument("--ws", help="`?ws=` name of the workspace on the dashboard, for the printed link")
    catch = argparse.ArgumentParser(add_help=False)
    catch.add_argument(
        "--max-catch-failure",
        type=float,
        help="leave out people whose catch failure rate is above this (default: nobody)",
    )
    p = sub.add_parser("study", help="human studies: create one, list them, export their answers")
    ssub = p.add_subparsers(dest="study_command", required=True)

    c = ssub.add_parser(
        "create",
        parents=[store, link],
        help="design a study (fixed from its seed) and print its participant link",
    )
    add_workspace(c)
    c.add_argument("--kind", required=True, choices=KINDS)
    c.add_argument("--checkpoint", help="checkpoint whose clusters are tested (coherence, describability)")
    c.add_argument("--k", type=int, help="number of clusters of the clustering tested")
    c.add_argument("--clusters", type=_clusters, help="comma-separated clusters (default: every usable one)")
    c.add_argument(
        "--negatives", default="random", choices=NEGATIVES, help="2AFC negatives (laina2020 Eq. 2)"
    )
    c.add_argument(
        "--captions",
        default="caption",
        choices=list(CAPTION_SOURCES),
        help="describability: the description shown",
    )
    c.add_argument("--dataset", help="similarity: dataset whose images are judged")
    c.add_argument("--stimuli", type=int, help="similarity: images sampled as stimuli (default: all)")
    c.add_argument(
        "--selection",
        choices=SELECTIONS,
        default="random",
        help="similarity: active picks trials by expected information gain under the dataset's "
        "psychological embedding (roads2021 section 4.3)",
    )
    c.add_argument(
        "--tasks", type=int, default=20, help="tasks per cluster (2AFC) or trials in all (similarity)"
    )
    c.add_argument("--answers", type=int, default=3, help="people per task")
    c.add_argument(
        "--per-participant", type=int, default=20, help="tasks per participant, catch tasks included"
    )
    c.add_argument("--catch", type=int, default=2, help="catch tasks per participant")
    c.add_argument("--refs", type=int, default=10, help="reference images of a coherence task")
    add_seed(c, "the study's design: its tasks, sessions and catch tasks")
    c.add_argument(
        "--reclaim-minutes",
        type=int,
        default=60,
        help="give an unfinished session idle this long to someone new (0: never)",
    )
    c.set_defaults(func=_create)

    lp = ssub.add_parser(
        "list", parents=[store], help="the studies in the answers store, with their progress"
    )
    add_workspace(lp, required=False, help="only the studies designed on this workspace (default: all)")
    lp.add_argument("--json", action="store_true")
    lp.set_defaults(func=_list)

    e = ssub.add_parser(
        "export",
        parents=[store, catch],
        help="write a study's answers and results into workspace tables",
    )
    e.add_argument("study")
    add_workspace(e, help="the workspace the study was designed on")
    e.set_defaults(func=_export)

    from ..analysis import by_name  # local: the analyses load on use
    from ..analysis.cli import add_options  # local: the analyses load on use

    nr = ssub.add_parser(
        "next-round",
        parents=[store, link, catch],
        help="a similarity study's next round: export its answers, infer the embedding again "
        "(analyze similarity), create the next study with trials chosen from it",
    )
    nr.add_argument("study", help="the similarity study whose round ends")
    add_workspace(nr, help="the workspace the study was designed on")
    nr.add_argument("--tasks", type=int, help="trials of the next round (default: the study's)")
    nr.add_argument(
        "--selection",
        choices=SELECTIONS,
        default="active",
        help="active: by expected information gain under the new embedding (roads2021 §4.3)",
    )
    add_quiet(nr)
    add_options(nr, by_name()["similarity"].options)
    nr.set_defaults(func=_next_round)

    for status, what in (("close", "stop taking answers"), ("open", "take answers again")):
        sp = ssub.add_parser(status, parents=[store], help=f"{what}")
        sp.add_argument("study")
        sp.set_defaults(func=_status("closed" if status == "close" else "open"))
