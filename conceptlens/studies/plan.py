"""Planning a 2AFC study before launch: how many people each task needs.

A cluster's result is the share of answers that picked its image, reported with its
Clopper-Pearson interval (results.py). Before anyone answers, simulated observers say what that
share will be: either the machine annotator's (the proxy's coherence of the cluster,
`cluster_metrics.coherence_random|hard`, or the VL model's 2AFC for describability), or a
psychometric function of the cluster's purity,

    p = guess + (1 - guess - lapse) * logistic((purity - threshold) / spread)

with the 2AFC guess rate 0.5. With `tasks` tasks per cluster answered by `a` people each, a
cluster gets n = tasks * a answers; the plan is the smallest `a` whose expected interval
(Clopper-Pearson at k = round(n p) correct of n) is at most the chosen width, for every cluster.

`simulated_response` is the same observer answering one task through the running participant
page (tests and bench/studies.py drive the page over its websocket and ask it what to click).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .design import StudyError

GUESS = 0.5  # 2AFC
MAX_ANSWERS = 100_000  # answers per cluster a plan looks at, at most


def psychometric(purity, threshold: float = 0.5, spread: float = 0.1, lapse: float = 0.02) -> np.ndarray:
    """The probability an observer picks the cluster's image, as a function of its purity."""
    x = np.asarray(purity, dtype=float)
    return GUESS + (1 - GUESS - lapse) / (1 + np.exp(-(x - threshold) / spread))


def interval_widths(p: float, n_max: int, confidence: float = 0.95) -> np.ndarray:
    """Width of the Clopper-Pearson interval at k = round(n p) of n, for n = 1..n_max."""
    from scipy.stats import beta

    alpha = 1 - confidence
    n = np.arange(1, n_max + 1)
    k = np.clip(np.rint(n * p), 0, n)
    with np.errstate(invalid="ignore"):
        lo = np.where(k == 0, 0.0, beta.ppf(alpha / 2, k, n - k + 1))
        hi = np.where(k == n, 1.0, beta.isf(alpha / 2, k + 1, n - k))
    return hi - lo


def answers_needed(p: float, width: float, confidence: float = 0.95, n_max: int = MAX_ANSWERS) -> int | None:
    """The fewest answers whose Clopper-Pearson interval at accuracy `p` is at most `width`
    wide (None: more than `n_max`)."""
    if not 0 < width < 1:
        raise StudyError(f"interval width must be in (0, 1), got {width!r}")
    if not 0 < confidence < 1:
        raise StudyError(f"confidence must be in (0, 1), got {confidence!r}")
    if not 0 <= p <= 1:
        raise StudyError(f"accuracy must be in [0, 1], got {p!r}")
    ok = np.flatnonzero(interval_widths(p, n_max, confidence) <= width)
    return int(ok[0]) + 1 if len(ok) else None


def plan(
    clusters: pd.DataFrame,
    tasks: int,
    width: float,
    confidence: float = 0.95,
    per_participant: int = 20,
    catch: int = 2,
) -> pd.DataFrame:
    """Per cluster (columns `cluster`, `p`: the simulated observers' accuracy): answers needed
    for an interval of `width`, and people per task (`tasks` tasks per cluster). The last row
    of `.attrs["people_per_task"]` is the study's: the largest; `.attrs["participants"]` the
    sessions of `per_participant` tasks (`catch` of them catch tasks) that makes."""
    if tasks < 1:
        raise StudyError(f"tasks must be at least 1, got {tasks!r}")
    rows = []
    for c, p in zip(clusters["cluster"], clusters["p"]):
        if p is None or pd.isna(p):
            rows.append({"cluster": int(c), "p": np.nan, "answers": None, "people_per_task": None})
            continue
        n = answers_needed(float(p), width, confidence, min(MAX_ANSWERS, tasks * 1000))
        rows.append(
            {
                "cluster": int(c),
                "p": float(p),
                "answers": n,
                "people_per_task": None if n is None else math.ceil(n / tasks),
            }
        )
    out = pd.DataFrame(rows, columns=["cluster", "p", "answers", "people_per_task"])
    known = out["people_per_task"].dropna()
    a = int(known.max()) if len(known) else None
    out.attrs["people_per_task"] = a
    out.attrs["participants"] = (
        None if a is None else math.ceil(len(known) * tasks * a / max(1, per_participant - catch))
    )
    return out


def observers(options: pd.DataFrame, source: str, measure: str, **psychometric_args) -> pd.DataFrame:
    """The simulated observers' accuracy per cluster (`cluster`, `p`) from the page's cluster
    options (`views.studies.cluster_options`): `source` "proxy" (the machine annotator's value
    of `measure`, e.g. coherence_random) or "psychometric" (of the cluster's purity)."""
    if source == "proxy":
        col = measure if measure in options.columns else None
        p = options[col] if col else pd.Series(np.nan, index=options.index)
    elif source == "psychometric":
        p = (
            pd.Series(psychometric(options["purity"], **psychometric_args), index=options.index)
            if "purity" in options.columns
            else pd.Series(np.nan, index=options.index)
        )
    else:
        raise StudyError(f"observers must be 'proxy' or 'psychometric', got {source!r}")
    return pd.DataFrame({"cluster": options["cluster"].astype(int), "p": p.astype(float)})


def simulated_response(store, study_id: str, participant_id: str, accuracy: dict, rng) -> str | list:
    """What a simulated observer answers to the task the participant page shows now: the
    cluster's image with probability accuracy[cluster] (catch tasks: always), else the other;
    similarity trials: two references at random."""
    task = store.shown_task(study_id, participant_id)
    if task is None:
        raise StudyError(f"participant {participant_id} has no task left in study {study_id}")
    unit, is_catch, layout = task
    if "order" in layout:
        return [int(i) for i in rng.choice(8, 2, replace=False)]
    right = is_catch or rng.random() < accuracy.get(unit, GUESS)
    side = layout["positive_side"]
    return side if right else ("left" if side == "right" else "right")
