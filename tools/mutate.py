"""Mutation testing (mutmut) of the metrics, the analyses and the storage: `make mutate`.

mutmut makes one small change at a time to a module (a `<` for a `<=`, a constant off by
one, a dropped argument...) and runs the tests that execute the changed function; a
mutant no test notices "survives" and points at a bug the suite would let through.

Each module runs on its own, from a fresh scratch copy of the sources and tests under
`--work`, with only the tests listed for it below, so one run fits a 2-core machine. At
the end the kill rate of every module is printed and written to `<work>/summary.json`;
each module's surviving mutants, with their diffs, go to `<work>/.../*.survivors.txt`.
`--sample N` tests N random mutants per module (an estimate, for a busy machine).

    python tools/mutate.py                      # every module below
    python tools/mutate.py conceptlens/metrics/scores.py conceptlens/db.py
    python tools/mutate.py conceptlens/db.py conceptlens/workspace.py --tests tests/test_db.py --sample 20
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Tests that exercise every metric or the whole pipeline.
METRICS = [
    "tests/test_metrics.py",
    "tests/test_properties.py",
    "tests/test_pipeline_wiring.py",
    "tests/test_embedding_psych.py",
    "tests/test_metrics_captions.py",
    "tests/test_metrics_clid.py",
    "tests/test_metrics_neighbors.py",
]
PIPELINE = ["tests/test_pipeline_wiring.py", "tests/test_analysis.py", "tests/test_cluster_corrections.py"]
STORAGE = ["tests/test_storage_crash.py", "tests/test_properties.py", "tests/test_db.py"]

# module -> the tests relevant to it
MODULES = {
    "conceptlens/metrics/scores.py": METRICS,
    "conceptlens/metrics/learnability.py": METRICS + ["tests/test_cluster_corrections.py"],
    "conceptlens/metrics/coherence.py": METRICS,
    "conceptlens/metrics/clid.py": METRICS + ["tests/test_cluster_corrections.py"],
    "conceptlens/metrics/neighbors.py": METRICS,
    "conceptlens/metrics/intrinsic.py": METRICS,
    "conceptlens/metrics/captions.py": METRICS,
    "conceptlens/metrics/compare.py": [
        "tests/test_compare.py",
        "tests/test_pipeline_wiring.py",
        "tests/test_db.py",
        "tests/test_compare.py",
    ],
    "conceptlens/analysis/cluster_metrics.py": PIPELINE,
    "conceptlens/analysis/comparisons.py": PIPELINE
    + [
        "tests/test_baselines_analysis.py::test_baselines_join_the_predictor_table_with_their_own_values",
        "tests/test_baselines_analysis.py::test_transfer_correlations_use_each_targets_accuracy",
        "tests/test_analysis_comparisons.py",
    ],
    "conceptlens/analysis/clustering.py": PIPELINE,
    "conceptlens/analysis/common.py": PIPELINE + ["tests/test_analysis_common.py"],
    "conceptlens/analysis/runner.py": PIPELINE + ["tests/test_cli.py"],
    "conceptlens/analysis/base.py": PIPELINE + ["tests/test_cli.py", "tests/test_analysis_options.py"],
    "conceptlens/workspace.py": STORAGE + ["tests/test_validate.py", "tests/test_migrate.py"],
    "conceptlens/db.py": STORAGE,
    "conceptlens/metrics/baselines.py": ["tests/test_baselines.py"],
    "conceptlens/metrics/concepts.py": ["tests/test_concepts.py"],
    "conceptlens/metrics/kmeans.py": [
        "tests/test_scale.py",
        "tests/test_cluster_corrections.py",
        "tests/test_metrics_kmeans.py",
    ],
    "conceptlens/embedding/active.py": ["tests/test_active.py", "tests/test_active.py"],
    "conceptlens/analysis/baselines.py": [
        f"tests/test_baselines_analysis.py::test_{t}"
        for t in (
            "rate_reduction_and_uniformity_are_those_of_the_stored_features_and_clusters",
            "transfer_is_a_linear_probe_on_the_other_dataset",
            "a_model_that_cannot_be_loaded_skips_its_checkpoint_until_it_can",
            "imported_features_get_only_their_model_free_baselines",
        )
    ],
    "conceptlens/analysis/convergence.py": ["tests/test_active.py", "tests/test_analysis_convergence.py"],
    "conceptlens/analysis/concepts.py": ["tests/test_concepts.py"],
    "conceptlens/analysis/concept_events.py": ["tests/test_training_analyses.py", "tests/test_events.py"],
    "conceptlens/analysis/learning_curves.py": ["tests/test_training_analyses.py"],
    "conceptlens/metrics/learning.py": ["tests/test_training_analyses.py"],
    "conceptlens/views/training.py": ["tests/test_training_analyses.py"],
    "conceptlens/studies/store.py": [
        "tests/test_studies_store.py",
        "tests/test_studies.py",
        "tests/test_studies_store.py",
    ],
    "conceptlens/studies/design.py": [
        "tests/test_studies.py",
        "tests/test_studies_store.py",
        "tests/test_studies_design.py",
        "tests/test_study_rounds.py::test_active_trials_gain_more_information_than_random_ones",
        "tests/test_study_rounds.py::test_an_active_round_is_fixed_by_its_workspace_and_spec",
    ],
    "conceptlens/studies/rounds.py": ["tests/test_study_rounds.py"],
    "conceptlens/views/projection_window.py": ["tests/test_projection_window.py"],
    "conceptlens/analysis/engines.py": ["tests/test_analysis_ray.py"],
    # The rest of issue 29's list: validation, migration, importers, the embedding, studies.
    "conceptlens/validate.py": ["tests/test_validate.py", "tests/test_transparency.py"],
    "conceptlens/migrate.py": ["tests/test_migrate.py", "tests/test_migrate.py"],
    "conceptlens/embedding/psych.py": [
        "tests/test_similarity.py",
        "tests/test_analysis_similarity.py",
        "tests/test_analysis_convergence.py",
        "tests/test_embedding_psych.py",
        "tests/test_metrics_captions.py",
        "tests/test_metrics_clid.py",
        "tests/test_metrics_neighbors.py",
    ],
    "conceptlens/studies/results.py": [
        "tests/test_studies.py",
        "tests/test_analysis_similarity.py",
        "tests/test_analysis_convergence.py",
    ],
    "conceptlens/studies/service.py": ["tests/test_studies_server.py", "tests/test_studies.py"],
    "conceptlens/studies/plan.py": ["tests/test_study_plan.py"],
    "conceptlens/metrics/bootstrap.py": ["tests/test_intervals.py"],
    "conceptlens/metrics/compmap.py": ["tests/test_compmap.py"],
    "conceptlens/metrics/events.py": ["tests/test_events.py"],
    "conceptlens/metrics/similarity.py": [
        "tests/test_similarity.py",
        "tests/test_embedding_psych.py",
        "tests/test_metrics_captions.py",
        "tests/test_metrics_clid.py",
        "tests/test_metrics_neighbors.py",
        "tests/test_active.py",
    ],
    "conceptlens/metrics/selection.py": ["tests/test_selection.py"],
    **{
        f"conceptlens/importers/{m}.py": ["tests/test_importers.py"]
        for m in ("images", "manifest", "imagefolder", "features", "captions", "hsj")
    },
}


def _registered_analyses() -> None:
    """Every analysis of `conceptlens.analysis.MODULES` is mutated: one not listed above
    (a new one) with the pipeline's tests, its own test file and the per-analysis option
    tests, so adding an analysis needs no edit here."""
    import sys

    sys.path.insert(0, str(ROOT))
    from conceptlens.analysis import MODULES as ANALYSES

    for name in ANALYSES:
        path = f"conceptlens/analysis/{name}.py"
        own = [t for t in (f"tests/test_{name}.py",) if (ROOT / t).is_file()]
        MODULES.setdefault(path, PIPELINE + own + ["tests/test_analysis_options.py"])


_registered_analyses()

# Modules whose tests are in a file marked slow (it loads a real encoder): run those too.
MARKERS = {
    "conceptlens/analysis/baselines.py": "not browser",
    "conceptlens/analysis/comparisons.py": "not browser",
    "conceptlens/analysis/engines.py": "not browser",  # Ray runs are marked slow
    "conceptlens/embedding/psych.py": "not browser",  # the ensemble test of test_embedding_psych is slow
}

# Issue 29, analysis area b: the data-flow tests of seven analyses.
_ANALYSIS_B = (
    "comparisons",
    "compmap",
    "concept_events",
    "concepts",
    "convergence",
    "learning_curves",
    "similarity",
)
for _m in _ANALYSIS_B:
    _m = f"conceptlens/analysis/{_m}.py"
    MODULES[_m] = MODULES.get(_m, []) + [
        "tests/test_analysis_base.py",
        "tests/test_analysis_comparisons.py",
        "tests/test_analysis_concept_events.py",
        "tests/test_analysis_convergence.py",
        "tests/test_analysis_learning_curves.py",
        "tests/test_analysis_similarity.py",
    ]
# The similarity analysis' own data-flow tests (catch trials, weights, held-out members):
# listed only for studies/results.py until 2026-11-26, so 15 of its 40 mutants survived.
MODULES["conceptlens/analysis/similarity.py"].extend(
    ["tests/test_analysis_similarity.py", "tests/test_analysis_convergence.py"]
)
# Likewise the staleness tests of the clustering family and of comparisons (issue 29, item 2).
for _m in ("clustering", "cluster_metrics", "cluster_captions"):
    MODULES[f"conceptlens/analysis/{_m}.py"].extend(["tests/test_analysis_clustering.py"])
MODULES["conceptlens/analysis/comparisons.py"].extend(["tests/test_analysis_comparisons.py"])
for _m in ("conceptlens/analysis/common.py", "conceptlens/workspace.py"):
    MODULES[_m].extend(["tests/test_workspace.py"])

# Data-flow tests of `conceptlens validate` (issue 29).
for _m in ("conceptlens/validate.py",):
    MODULES[_m] = MODULES.get(_m, []) + ["tests/test_validate.py"]

# Data-flow tests of the second metrics area (issue 29): learnability, similarity, selection,
# and the active selection's survivors.
for _m in (
    "conceptlens/metrics/learnability.py",
    "conceptlens/metrics/similarity.py",
    "conceptlens/metrics/selection.py",
    "conceptlens/embedding/active.py",
):
    MODULES[_m] = MODULES.get(_m, []) + [
        "tests/test_active.py",
        "tests/test_metrics_learnability.py",
        "tests/test_metrics_neighbors.py",
        "tests/test_metrics_selection.py",
        "tests/test_metrics_similarity.py",
    ]

# Issue 29, studies/: the data-flow tests of the studies (who may read or write what, values
# from the right place, nothing silently dropped).
for _m in ("design", "plan", "results", "rounds", "service", "store"):
    MODULES[f"conceptlens/studies/{_m}.py"] = MODULES.get(f"conceptlens/studies/{_m}.py", []) + [
        "tests/test_studies_design.py",
        "tests/test_studies_results.py",
        "tests/test_studies_service.py",
        "tests/test_studies_store.py",
    ]


# Issue 29, data-flow tests of the analysis framework and the clustering analyses (session mut-aa).
for _m in (
    "conceptlens/analysis/base.py",
    "conceptlens/analysis/runner.py",
    "conceptlens/analysis/common.py",
    "conceptlens/analysis/engines.py",
    "conceptlens/analysis/clustering.py",
    "conceptlens/analysis/cluster_metrics.py",
    "conceptlens/analysis/cluster_captions.py",
    "conceptlens/analysis/baselines.py",
    "conceptlens/analysis/aligned_projections.py",
):
    MODULES[_m] = MODULES.get(_m, []) + [
        "tests/test_aligned_projections.py",
        "tests/test_analysis_base.py",
        "tests/test_analysis_baselines.py",
        "tests/test_analysis_cluster_captions.py",
        "tests/test_analysis_cluster_metrics.py",
        "tests/test_analysis_clustering.py",
        "tests/test_analysis_common.py",
        "tests/test_analysis_engines.py",
        "tests/test_analysis_runner.py",
    ]

# Issue 29, importers: the other test files that exercise these modules (hsj's importer is
# tested in test_similarity.py; manifests, nested folders and imagenet through
# test_import_hierarchy.py).
_HSJ_TESTS = [
    f"tests/test_similarity.py::{t}"
    for t in (
        "test_import_release",
        "test_import_psiz_hdf5",
        "test_import_errors_name_file_and_sequence",
        "test_import_unmatched_stimuli_and_bad_hdf5",
        "test_import_cli",
    )
]
for _m, _extra in {
    "images": ["tests/test_import_hierarchy.py"],
    "manifest": ["tests/test_import_hierarchy.py"],
    "imagefolder": ["tests/test_import_hierarchy.py"],
    "hsj": _HSJ_TESTS,
}.items():
    _p = f"conceptlens/importers/{_m}.py"
    MODULES[_p] = MODULES.get(_p, []) + _extra
for _m in ("images", "manifest", "imagefolder", "features", "captions", "hsj"):
    _p = f"conceptlens/importers/{_m}.py"
    MODULES[_p] = MODULES.get(_p, []) + [
        "tests/test_importers_captions.py",
        "tests/test_importers_features.py",
        "tests/test_importers_hsj.py",
        "tests/test_importers_imagefolder.py",
        "tests/test_importers_images.py",
        "tests/test_importers_manifest.py",
    ]
# The other importers had no entry, so `dataflow_mutants.py --list` refused them ("unknown
# module"); their tests (not run in the session that added them, see docs/mutation.md):
for _m, _tests in {
    "imagenet": ["tests/test_importers.py", "tests/test_import_hierarchy.py"],
    "wordnet": ["tests/test_import_hierarchy.py"],
    "hf": ["tests/test_importers.py"],
    "cub": ["tests/test_compmap.py"],
    "mit_states": ["tests/test_compmap.py"],
    "primitives": ["tests/test_compmap.py"],
    "cli": ["tests/test_importers.py", "tests/test_import_hierarchy.py", "tests/test_cli.py"],
}.items():
    MODULES.setdefault(f"conceptlens/importers/{_m}.py", _tests)

# Issue 29, metrics batch A: the data-flow tests written against these modules' survivors.
for _m in ("bootstrap", "compare", "compmap", "concepts", "events", "learning"):
    _p = f"conceptlens/metrics/{_m}.py"
    MODULES[_p] = MODULES.get(_p, []) + [
        "tests/test_compare.py",
        "tests/test_events.py",
        "tests/test_metrics_bootstrap.py",
        "tests/test_metrics_compmap.py",
        "tests/test_metrics_concepts.py",
        "tests/test_metrics_learning.py",
    ]

# Tests written against the survivors of the complete data-flow run of 2026-11-26.
for _m in ("compmap", "concepts", "learning_curves", "cluster_captions", "baselines", "common"):
    MODULES[f"conceptlens/analysis/{_m}.py"].extend(
        [
            "tests/test_analysis_baselines.py",
            "tests/test_analysis_cluster_captions.py",
            "tests/test_analysis_compmap.py",
            "tests/test_analysis_concepts.py",
            "tests/test_analysis_learning_curves.py",
        ]
    )
for _m in ("analysis/comparisons", "metrics/selection", "validate"):
    MODULES[f"conceptlens/{_m}.py"].extend(
        ["tests/test_analysis_comparisons.py", "tests/test_metrics_selection.py", "tests/test_validate.py"]
    )
MODULES["conceptlens/analysis/similarity.py"].extend(["tests/test_analysis_similarity.py"])
for _m in ("cub", "images", "imagenet", "mit_states", "wordnet", "hf", "cli", "manifest", "primitives"):
    MODULES[f"conceptlens/importers/{_m}.py"].extend(
        [
            "tests/test_importers_cli.py",
            "tests/test_importers_cub.py",
            "tests/test_importers_hf.py",
            "tests/test_importers_imagenet.py",
            "tests/test_importers_images.py",
            "tests/test_importers_manifest.py",
            "tests/test_importers_mit_states.py",
            "tests/test_importers_primitives.py",
            "tests/test_importers_wordnet.py",
        ]
    )


def scratch_copy(work: Path) -> None:
    """The sources and tests mutmut copies from, and the demo workspace (linked) some tests read."""
    for name in ("conceptlens", "tests", "mutants"):
        if (work / name).exists():
            shutil.rmtree(work / name)
        if name != "mutants":
            ignore = shutil.ignore_patterns("__pycache__", "artifacts", ".*")
            shutil.copytree(ROOT / name, work / name, ignore=ignore)
    (work / "mutants").mkdir(parents=True, exist_ok=True)
    for where in (work, work / "mutants"):
        if not (where / "data").is_symlink():
            (where / "data").symlink_to(ROOT / "data", target_is_directory=True)


def config(modules: list[str], tests: list[str]) -> str:
    """pyproject.toml with its [tool.mutmut] section narrowed to these modules and tests."""
    text = (ROOT / "pyproject.toml").read_text()
    quoted = lambda xs: "[" + ", ".join(json.dumps(x) for x in xs) + "]"  # noqa: E731
    args = json.loads(re.search(r"(?m)^pytest_add_cli_args = (\[.*\])$", text).group(1))
    marker = next((MARKERS[m] for m in modules if m in MARKERS), None)
    if marker:
        args[args.index("-m") + 1] = marker
    keys = [("only_mutate", modules), ("pytest_add_cli_args_test_selection", tests)]
    for key, value in [*keys, ("pytest_add_cli_args", args)]:
        text, n = re.subn(rf"(?ms)^{key} = \[.*?\]$", f"{key} = {quoted(value)}", text, count=1)
        if n != 1:
            raise SystemExit(f"pyproject.toml: [tool.mutmut] lacks a one-line `{key} = [...]`")
    return text


def mutant_results(d: Path, module: str) -> dict[str, str]:
    """Mutant name -> status (killed, survived, no tests, timeout...; None: not run yet)."""
    from mutmut.stats import status_by_exit_code

    meta = json.loads((d / "mutants" / (module + ".meta")).read_text())
    return {
        name: (None if code is None else status_by_exit_code[code])
        for name, code in meta["exit_code_by_key"].items()
    }


def run_group(
    modules: list[str], tests: list[str], work: Path, children: int, sample: int, seed: int
) -> dict:
    """One mutmut run over `modules` with `tests`; with `sample`, only that many mutants per
    module (drawn with `seed`) are tested, after a first run that only generates them."""
    d = work / modules[0].replace("/", "__").removesuffix(".py")
    d.mkdir(parents=True, exist_ok=True)
    scratch_copy(d)
    (d / "pyproject.toml").write_text(config(modules, tests))
    # One thread per worker: `--children` workers share the cores, and threads do not survive a fork.
    threads = {v: "1" for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
    env = {**os.environ, **threads, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONPATH": ""}
    mutmut = [sys.executable, "-m", "mutmut"]
    run = [*mutmut, "run", "--max-children", str(children)]
    t0 = time.time()
    with open(d / "mutmut.log", "w") as log:
        if sample:
            # A pattern no mutant matches: mutmut generates the mutants, times the tests, then stops.
            subprocess.run([*run, "no-such-mutant*"], cwd=d, env=env, stdout=log, stderr=log)
            rng = random.Random(seed)
            names = [n for m in modules for n in sorted(rng.sample(sorted(mutant_results(d, m)), sample))]
            run += names
        code = subprocess.run(run, cwd=d, env=env, stdout=log, stderr=log).returncode
    seconds = round(time.time() - t0)
    out = {}
    for m in modules:
        try:
            res = mutant_results(d, m)
        except FileNotFoundError:
            out[m] = {"module": m, "error": f"mutmut exited {code}; see {d / 'mutmut.log'}"}
            continue
        if sample:
            res = {n: res[n] for n in names if n in res}
        counts = {s: list(res.values()).count(s) for s in ("killed", "timeout", "survived", "no tests", None)}
        if counts[None]:
            out[m] = {"module": m, "error": f"{counts[None]} mutant(s) not run; see {d / 'mutmut.log'}"}
            continue
        survivors = [n for n, s in res.items() if s in ("survived", "no tests")]
        diffs = [
            subprocess.run([*mutmut, "show", n], cwd=d, env=env, capture_output=True, text=True)
            for n in survivors
        ]
        (d / (m.replace("/", "__") + ".survivors.txt")).write_text(
            "\n".join(f"## {n} ({res[n]})\n{r.stdout}" for n, r in zip(survivors, diffs))
        )
        killed = counts["killed"] + counts["timeout"]
        out[m] = {
            "module": m,
            "mutants": len(res),
            "sampled": bool(sample),
            "killed": killed,
            "timeouts": counts["timeout"],
            "survived": counts["survived"],
            "no_tests": counts["no tests"],
            "kill_rate": round(killed / len(res), 4) if res else None,
            "seconds": seconds,
            "tests": tests,
        }
    return out


def _rate(r: dict | None) -> str:
    if not r:
        return f"{'-':>22}"
    if "error" in r:
        return f"{'error':>22}"
    tag = "s" if r.get("sampled") else " "
    return f"{r['killed']:>5}/{r['mutants']:<5} {r['kill_rate']:>6.0%}{tag}    "


# Surviving data-flow mutants argued equivalent (the module's behaviour does not change), each
# with its reason: docs/mutation.md lists them. One is matched by module, mutant name and the
# text of the line it changed, so an entry stops counting once that code changes.
EQUIVALENT = Path(__file__).resolve().parent / "mutants_equivalent.json"
AREAS = ("metrics/", "analysis/", "embedding/", "studies/", "importers/")


def equivalents(path: Path = EQUIVALENT) -> dict[tuple[str, str], dict]:
    """(module, survivor as the data-flow summary lists it: `name: line text`) -> entry."""
    if not path.exists():
        return {}
    return {(e["module"], f"{e['mutant']}: {e['before']}"): e for e in json.loads(path.read_text())}


def area(module: str) -> str:
    """The part of the library a module belongs to, as issue 29's target names them."""
    rel = module.removeprefix("conceptlens/")
    return next((a for a in AREAS if rel.startswith(a)), rel)


def report(summary: dict, equivalent: dict | None = None) -> None:
    """Both kill rates per module: mutmut's operator mutants and the data-flow mutants
    (tools/dataflow_mutants.py); `s`: a sample. Then, per area, the data-flow rate and the
    mutation score with the mutants argued equivalent (EQUIVALENT) left out."""
    equivalent = equivalents() if equivalent is None else equivalent
    print(f"\n{'module':45} {'operators (mutmut)':>22} {'data flow':>22}  equivalent")
    totals = {"op": [0, 0], "df": [0, 0]}
    areas: dict[str, list[int]] = {}
    for m, r in sorted(summary.items()):
        op = r if "kill_rate" in r or "error" in r else None
        df = r.get("dataflow")
        eq = [s for s in (df or {}).get("survivors", []) if (m, s) in equivalent]
        print(f"{m:45} {_rate(op)} {_rate(df)}  {len(eq) if df else '':>10}")
        for key, x in (("op", op), ("df", df)):
            if x and "error" not in x:
                totals[key][0] += x["killed"]
                totals[key][1] += x["mutants"]
        if df and "error" not in df:
            a = areas.setdefault(area(m), [0, 0, 0])
            a[0], a[1], a[2] = a[0] + df["killed"], a[1] + df["mutants"], a[2] + len(eq)
    for key, name in (("op", "operators"), ("df", "data flow")):
        k, n = totals[key]
        if n:
            print(f"{'all modules, ' + name:45} {k}/{n} killed ({k / n:.0%})")
    if areas:
        print(f"\n{'data flow, per area':22} {'killed':>14} {'equivalent':>11} {'left':>5} {'score':>7}")
        for a, (k, n, e) in sorted(areas.items()):
            score = k / (n - e) if n > e else 1.0
            print(f"{a:22} {k:>5}/{n:<5} {k / n:>3.0%} {e:>11} {n - k - e:>5} {score:>7.1%}")
        print("score: killed / (mutants - equivalent); equivalents and their reasons: " + EQUIVALENT.name)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("modules", nargs="*", help="modules to mutate (default: all of MODULES)")
    p.add_argument("--work", type=Path, default=ROOT / "build" / "mutate", help="scratch folder")
    p.add_argument("--children", type=int, default=2, help="mutants tested in parallel")
    p.add_argument(
        "--tests", help="comma-separated test files for all the modules, which then share one mutmut run"
    )
    p.add_argument("--sample", type=int, default=0, help="test only this many random mutants per module")
    p.add_argument("--seed", type=int, default=0, help="random_state of --sample")
    p.add_argument("--report", action="store_true", help="print both kill rates of summary.json, run nothing")
    args = p.parse_args(argv)
    if args.report:
        path = args.work / "summary.json"
        report(json.loads(path.read_text()) if path.exists() else {})
        return 0
    unknown = [m for m in args.modules if m not in MODULES]
    if unknown:
        p.error(f"unknown module(s) {', '.join(unknown)}; choose from {', '.join(MODULES)}")
    modules = args.modules or list(MODULES)
    groups = [(modules, args.tests.split(","))] if args.tests else [([m], MODULES[m]) for m in modules]
    summary_path = args.work / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    for group, tests in groups:
        print(f"mutating {', '.join(group)} ...", flush=True)
        for m, r in run_group(group, tests, args.work, args.children, args.sample, args.seed).items():
            summary[m] = {
                **r,
                **({"dataflow": summary[m]["dataflow"]} if "dataflow" in summary.get(m, {}) else {}),
            }
            args.work.mkdir(parents=True, exist_ok=True)
            summary_path.write_text(json.dumps(summary, indent=2) + "\n")
            done = r.get("error") or f"{r['killed']}/{r['mutants']} killed ({r['kill_rate']:.0%})"
            print(f"   {m}: {done}", flush=True)
    report(summary)
    return 0 if all("error" not in r for r in summary.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
