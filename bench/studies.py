"""Reliability of human studies through the real running app (issue 12).

100 simulated participants answer 20 tasks each, all at once: a coherence study on the test
factory's workspace (3 clusters x 20 tasks x 30 people, plus 2 catch tasks per person: exactly
100 sessions of 20), over Streamlit's websocket as browsers speak it (harness/st_client.py), on
SQLite and on PostgreSQL (a throw-away server, harness/pg.py). Once `--kill-at` of the answers are
acknowledged the server is killed with SIGKILL and started again; the participants reconnect
and go on where they were. Checked: every answer acknowledged before the kill is stored;
exactly 2,000 answers in the end, none twice; every participant has their completion code.
Printed and written as JSON: answers per second before and after the kill, click-to-
acknowledgement latency, reconnects, how long the server was down, the machine's load.

With `--observers annotator` the participants are simulated observers (the planning's,
conceptlens/studies/plan.py): each picks the cluster's image with the probability the machine
annotator's coherence of that cluster gives, answering through the running participant page;
the result adds each cluster's people's accuracy next to the observers' and the planned people
per task for an interval 0.2 wide.

    nice .venv/bin/python bench/studies.py [--backend sqlite] [--backend postgresql] [--observers annotator]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
# 30 people per task is above the default limit (20): the owner raises it, as documented.
os.environ.setdefault("CONCEPTLENS_STUDY_MAX_ANSWERS", "30")
from conceptlens.studies.design import StudySpec, design  # noqa: E402
from conceptlens.studies.store import open_store  # noqa: E402
from conceptlens.workspace import Workspace  # noqa: E402
from harness.factory import make_workspace  # noqa: E402
from harness.st_client import Outcome, Server, participate  # noqa: E402

SPEC = StudySpec("coherence", "ck0", 4, refs=10, answers=30, per_participant=20, catch=2, seed=0)


def stored(store, sid: str) -> tuple[int, int, set]:
    """(answers, distinct (participant, task), {(participant, position)}) straight from SQL."""
    rows = store._transact(
        lambda c: c.rows("SELECT participant_id, task_id, position FROM answers WHERE study_id = ?", [sid]),
        False,
    )
    return len(rows), len({(p, t) for p, t, _ in rows}), {(p, int(pos)) for p, _, pos in rows}


def run(backend: str, work: Path, people: int, kill_at: float, observers: str = "random") -> dict:
    root = work / f"ws-{backend}"
    make_workspace(root, derived=True)
    with contextlib.ExitStack() as stack:
        if backend == "sqlite":
            url = f"sqlite:///{work / f'answers-{backend}.sqlite'}"
        else:
            from harness.pg import fresh_database, postgres_server

            url = fresh_database(stack.enter_context(postgres_server()))
        store = open_store(url)
        d = design(Workspace(root), SPEC)
        sid, _ = store.create_study(d, f"bench-{backend}")
        planned = sum(1 for s in d.slots if s.session < people)
        respond, accuracy = None, {}
        if observers == "annotator":
            from conceptlens.studies.plan import simulated_response

            m = Workspace(root).read("cluster_metrics", checkpoint_id="ck0", k=4).to_pandas()
            accuracy = dict(zip(m["cluster"].astype(int), m["coherence_random"].astype(float)))
            rng = np.random.default_rng(0)

            def respond(pid):
                return simulated_response(store, sid, pid, accuracy, rng)

        server = Server(root, {"CONCEPTLENS_ANSWERS_URL": url})
        server.start()
        stack.callback(server.stop)
        marks: dict = {}

        async def main():
            outs = [Outcome(f"bench-person-{i:04d}") for i in range(people)]
            until = time.monotonic() + 3600
            marks["start"] = time.monotonic()
            tasks = [
                asyncio.create_task(
                    participate(
                        server.url,
                        sid,
                        o.participant_id,
                        seed=i,
                        outcome=o,
                        retry_until=until,
                        timeout=900,
                        respond=respond,
                    )
                )
                for i, o in enumerate(outs)
            ]
            while sum(len(o.acked) for o in outs) < kill_at * planned:
                await asyncio.sleep(0.02)
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, server.kill)
            marks["kill"] = time.monotonic()
            marks["acked_before"] = {(o.participant_id, n) for o in outs for n in o.acked}
            marks["at_kill"] = stored(store, sid)
            await loop.run_in_executor(None, server.start)
            marks["up"] = time.monotonic()
            await asyncio.gather(*tasks)
            marks["end"] = time.monotonic()
            return outs

        outs = asyncio.run(main())
        n, distinct, have = stored(store, sid)
        acked = {(o.participant_id, k) for o in outs for k in o.acked}
        codes = store.participants(sid).set_index("participant_id")["completion_code"]
        lat = np.array([s for o in outs for s in o.seconds])
        at_kill = marks["at_kill"]
        result = {
            "backend": backend,
            "store": store.label,
            "participants": people,
            "planned": planned,
            "stored": n,
            "duplicates": n - distinct,
            "acked_before_kill": len(marks["acked_before"]),
            "stored_at_kill": at_kill[0],
            "acked_before_kill_all_stored": marks["acked_before"] <= at_kill[2],
            "acked_all_stored": acked <= have,
            "codes_ok": all(o.code is not None and o.code == codes[o.participant_id] for o in outs),
            "reconnects": sum(o.reconnects for o in outs),
            "seconds_total": marks["end"] - marks["start"],
            "seconds_down": marks["up"] - marks["kill"],
            "answers_per_s_before_kill": at_kill[0] / (marks["kill"] - marks["start"]),
            "answers_per_s_after_restart": (n - at_kill[0]) / (marks["end"] - marks["up"]),
            "latency_s_p50": float(np.percentile(lat, 50)),
            "latency_s_p95": float(np.percentile(lat, 95)),
            "latency_s_max": float(lat.max()),
            "load_average_1min_at_end": os.getloadavg()[0],
        }
        if observers == "annotator":
            from conceptlens.studies.plan import observers as simulated
            from conceptlens.studies.plan import plan
            from conceptlens.studies.results import results

            res = results(store, sid)
            result["clusters"] = [
                {"cluster": int(c.cluster), "observers": accuracy.get(int(c.cluster)), "people": c.accuracy,
                 "lo": c.lo, "hi": c.hi, "n": int(c.n)}
                for c in res.clusters.itertuples()
            ]  # fmt: skip
            opts = pd.DataFrame({"cluster": list(accuracy), "coherence_random": list(accuracy.values())})
            pl = plan(simulated(opts, "proxy", "coherence_random"), tasks=SPEC.tasks, width=0.2)
            result["planned_people_per_task_for_width_0.2"] = pl.attrs["people_per_task"]
        store.close()
    result["ok"] = bool(
        result["stored"] == result["planned"] == people * SPEC.per_participant
        and result["duplicates"] == 0
        and result["acked_before_kill_all_stored"]
        and result["acked_all_stored"]
        and result["codes_ok"]
    )
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", action="append", choices=("sqlite", "postgresql"))
    ap.add_argument("--participants", type=int, default=100)
    ap.add_argument(
        "--kill-at", type=float, default=0.4, help="share of answers acknowledged before the kill"
    )
    ap.add_argument("--observers", choices=("random", "annotator"), default="random")
    ap.add_argument("--out", default="tests/artifacts/bench-studies.json")
    args = ap.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-studies-") as tmp:
        for backend in args.backend or ["sqlite", "postgresql"]:
            r = run(backend, Path(tmp), args.participants, args.kill_at, args.observers)
            results.append(r)
            print(json.dumps(r, indent=2), flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
