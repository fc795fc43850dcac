"""Data-flow mutation testing: `make mutate` (after mutmut's operator mutants, tools/mutate.py).

mutmut changes operators and constants (a `<` for a `<=`); the bugs a developer really makes
in this code are more often in what a correct function is *given*: a filter that was not
applied, the first element used where the current one was meant, two arguments swapped, a
cache not invalidated, a sort in the wrong direction. Each operator below makes exactly one
such change to a module's syntax tree, the module's tests (tools/mutate.py MODULES) run
against it, and a mutant is killed when they fail (or time out):

- `drop_mask`    `x[cond]` -> `x`, `x.loc[cond, cols]` -> `x.loc[:, cols]`, and a comprehension's
                 `if` dropped: rows that should be filtered out are kept;
- `first_item`   `for v in xs:` iterates over `xs[0]` as many times: the first element reused
                 instead of the current one;
- `swap_args`    the first two positional arguments of a call, when both are plain names or
                 attributes, swapped;
- `skip_reset`   a statement that clears, invalidates, removes or deletes (`.clear()`,
                 `.cache_clear()`, `.pop(...)`, `.unlink()`, `del ...`) becomes `pass`;
- `reverse_sort` `sorted(x)` -> `sorted(x, reverse=True)`, `.sort_values(...)` ->
                 `ascending=False`, `np.argsort(x)` -> `np.argsort(x)[::-1]`.

Every module is copied with the sources and tests into a scratch folder (`--work`), each
mutant written there in turn (the module is unparsed from its tree: comments are gone, the
code is the same), and the tests run with `-x` in a fork of a process that imported the heavy
third-party modules once (`--no-fork`: a fresh interpreter per mutant). The kill rate per module is
added to `<work>/summary.json` under `dataflow` (tools/mutate.py prints both rates), and
each survivor, with the line it changed, to `<work>/dataflow/<module>.survivors.txt`.

    python tools/dataflow_mutants.py                           # every module of tools/mutate.py
    python tools/dataflow_mutants.py conceptlens/metrics/scores.py --sample 10
    python tools/dataflow_mutants.py --list conceptlens/analysis/similarity.py
"""

from __future__ import annotations

import argparse
import ast
import copy
import json
import os
import random
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OPERATORS = ("drop_mask", "first_item", "swap_args", "skip_reset", "reverse_sort")
RESETS = {"clear", "cache_clear", "invalidate", "pop", "popitem", "discard", "unlink", "rmtree", "remove"}
HELPER = "_dataflow_first"
HELPER_SRC = f"""
def {HELPER}(xs):
    xs = list(xs)
    return [xs[0]] * len(xs) if xs else xs
"""


@dataclass(frozen=True)
class Mutant:
    operator: str
    index: int  # the index-th candidate of this operator in the module's walk order
    line: int
    before: str
    after: str
    end_line: int = 0  # the last line of the changed node (the loop's body, for first_item)

    @property
    def name(self) -> str:
        return f"{self.operator}#{self.index}@{self.line}"


def _is_mask(node: ast.AST) -> bool:
    """A subscript's index that selects rows by a condition."""
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        return not isinstance(node.ops[0], (ast.Is, ast.IsNot))
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.BitAnd, ast.BitOr)):
        return _is_mask(node.left) or _is_mask(node.right)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Invert):
        return True
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.attr in {"isin", "notna", "isna", "notnull", "isnull", "between", "duplicated"}
    if isinstance(node, ast.Name):
        n = node.id.lower()
        return any(w in n for w in ("mask", "keep", "kept", "valid", "sel", "include", "train", "test", "ok"))
    return False


# Names of handles (a context, a workspace, options) that no call takes in another place:
# swapping one with a value fails at once, a trivially killed mutant that says nothing.
HANDLES = {"ctx", "self", "cls", "db", "ws", "root", "store", "con", "unit", "opts", "options", "p", "params"}


MODULE_ALIASES = {"np", "pd", "pa", "pq", "torch", "math", "json", "os", "re", "time", "sys"}


def _swappable(node: ast.AST) -> bool:
    """An argument that may be confused with another of the same kind: a plain name or an
    attribute that is not a handle."""
    if isinstance(node, ast.Name):
        return node.id not in HANDLES
    if isinstance(node, ast.Attribute):
        module = isinstance(node.value, ast.Name) and (node.value.id in MODULE_ALIASES or node.attr.isupper())
        return node.attr not in HANDLES and not module
    return False


def _uses_target(loop: ast.For) -> bool:
    """The loop's body reads its variable (`for _ in range(n)` repeats: reusing the first
    item there changes nothing, an equivalent mutant)."""
    names = {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)} - {"_"}
    body = ast.Module(loop.body + loop.orelse, [])
    reads = (n for n in ast.walk(body) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load))
    return any(n.id in names for n in reads)


def _candidates(tree: ast.AST, op: str) -> Iterator[ast.AST]:
    """The nodes `op` can change, in a fixed walk order."""
    for node in ast.walk(tree):
        if op == "drop_mask":
            if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
                s = node.slice
                if isinstance(s, ast.Tuple) and s.elts and _is_mask(s.elts[0]):
                    yield node
                elif _is_mask(s):
                    yield node
            elif isinstance(node, ast.comprehension) and node.ifs:
                yield node
        elif op == "first_item":
            loop = isinstance(node, ast.For) and isinstance(node.target, (ast.Name, ast.Tuple))
            if loop and _uses_target(node):
                yield node
        elif op == "swap_args":
            if isinstance(node, ast.Call) and len(node.args) >= 2:
                a, b = node.args[:2]
                if _swappable(a) and _swappable(b) and ast.dump(a) != ast.dump(b):
                    yield node
        elif op == "skip_reset":
            if isinstance(node, ast.Delete):
                yield node
            elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
                f = node.value.func
                if isinstance(f, ast.Attribute) and f.attr in RESETS:
                    yield node
        elif op == "reverse_sort":
            if isinstance(node, ast.Call):
                f = node.func
                kws = {k.arg for k in node.keywords}
                if isinstance(f, ast.Name) and f.id == "sorted" and "reverse" not in kws:
                    yield node
                elif isinstance(f, ast.Attribute) and f.attr == "sort_values" and "ascending" not in kws:
                    yield node
                elif isinstance(f, ast.Attribute) and f.attr == "argsort" and not node.keywords:
                    yield node


class _Apply(ast.NodeTransformer):
    """Changes the one target node (found by identity in the copied tree)."""

    def __init__(self, op: str, target: ast.AST):
        self.op, self.target = op, target
        self.result: ast.AST | None = None

    def visit(self, node):
        if node is not self.target:
            return self.generic_visit(node)
        self.result = self._change(node)
        return self.result

    def _change(self, node):
        op = self.op
        if op == "drop_mask":
            if isinstance(node, ast.comprehension):
                node.ifs = []
                return node
            s = node.slice
            if isinstance(s, ast.Tuple):  # .loc[cond, cols] -> .loc[:, cols]
                node.slice = ast.Tuple([ast.Slice(), *s.elts[1:]], ast.Load())
                return node
            v = node.value
            if isinstance(v, ast.Attribute) and v.attr in ("loc", "iloc"):  # df.loc[cond] -> df
                return v.value
            return v
        if op == "first_item":
            node.iter = ast.Call(ast.Name(HELPER, ast.Load()), [node.iter], [])
            return node
        if op == "swap_args":
            node.args[0], node.args[1] = node.args[1], node.args[0]
            return node
        if op == "skip_reset":
            return ast.Pass()
        if op == "reverse_sort":
            f = node.func
            if isinstance(f, ast.Name):
                node.keywords.append(ast.keyword("reverse", ast.Constant(True)))
                return node
            if f.attr == "sort_values":
                node.keywords.append(ast.keyword("ascending", ast.Constant(False)))
                return node
            return ast.Subscript(node, ast.Slice(None, None, ast.Constant(-1)), ast.Load())
        raise ValueError(op)


def _with_helper(tree: ast.Module) -> None:
    """The `first_item` helper, after the module's docstring and `from __future__` imports."""
    at = 0
    for i, stmt in enumerate(tree.body):
        doc = i == 0 and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
        future = isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__"
        if doc or future:
            at = i + 1
    tree.body[at:at] = ast.parse(HELPER_SRC).body


def _short(node) -> str:
    text = node if isinstance(node, str) else ast.unparse(node).splitlines()[0]
    return text if len(text) <= 100 else text[:97] + "..."


def mutants(source: str, operators=OPERATORS) -> list[tuple[Mutant, str]]:
    """Every data-flow mutant of `source`: (Mutant, the mutated module's source)."""
    tree = ast.parse(source)
    out = []
    for op in operators:
        for i, node in enumerate(list(_candidates(tree, op))):
            t = copy.deepcopy(tree)
            target = list(_candidates(t, op))[i]
            before = _short(target)
            apply = _Apply(op, target)
            t = apply.visit(t)
            if op == "first_item":
                _with_helper(t)
            ast.fix_missing_locations(t)
            line = getattr(node, "lineno", None) or getattr(getattr(node, "target", None), "lineno", 0)
            end = getattr(node, "end_lineno", None) or getattr(node.iter, "end_lineno", line)
            out.append((Mutant(op, i, line, before, _short(apply.result), end), ast.unparse(t)))
    return out


def scratch(work: Path) -> Path:
    """A copy of what the tests import (sources, tests, pages, components, app) and the demo, linked."""
    d = work / "tree"
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "artifacts", ".*")
    for name in ("conceptlens", "tests", "components", "pages", "participant", "tools"):
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, d / name, ignore=ignore)
    for name in ("app.py", "pyproject.toml", "Makefile", "requirements.txt", "README.md"):
        if (ROOT / name).exists():
            shutil.copy2(ROOT / name, d / name)
    for name in ("data", "docs", ".streamlit", "bench"):
        if (ROOT / name).exists():
            (d / name).symlink_to(ROOT / name, target_is_directory=True)
    return d


def run_tests(
    tree: Path, tests: list[str], timeout: float, marker: str, extra: tuple[str, ...] = (), env_extra=None
) -> tuple[str, float]:
    threads = {v: "1" for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
    env = {
        **os.environ,
        **threads,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "PYTHONPATH": str(tree),
        **(env_extra or {}),
    }
    args = ["-x", "-q", "-p", "no:cacheprovider", "-m", marker, *extra, *tests]
    if _FORK and not extra and not env_extra:
        return _forked_pytest(tree, args, timeout, env)
    cmd = [sys.executable, "-m", "pytest", *args]
    t0 = time.time()
    try:
        r = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timeout", time.time() - t0
    status = {0: "survived", 5: "no tests"}.get(r.returncode, "killed")
    return status, time.time() - t0


# Each mutant's pytest is a fork of this process, made after the heavy third-party modules
# were imported once (numpy, pandas, duckdb, scikit-learn, torch, pytest and its plugins):
# a fresh interpreter pays 2-6 s importing them, often more than the chosen tests take.
# ConceptLens itself is never imported here, so each fork imports the mutated module.
_FORK = hasattr(os, "fork")
_PRELOAD = (
    "numpy",
    "pandas",
    "pyarrow",
    "pyarrow.parquet",
    "duckdb",
    "scipy",
    "scipy.stats",
    "scipy.spatial",
    "sklearn",
    "sklearn.cluster",
    "sklearn.neighbors",
    "sklearn.metrics",
    "sklearn.linear_model",
    "sklearn.model_selection",
    "sklearn.decomposition",
    "matplotlib",
    "matplotlib.pyplot",
    "plotly",
    "plotly.graph_objects",
    "plotly.io",
    "torch",
    "faiss",
    "hypothesis",
    "hypothesis.extra.numpy",
    "PIL.Image",
    "umap",
    "streamlit",
    "streamlit.testing.v1",
    "pytest",
    "_pytest",
    "pytest_cov",
)
_PRELOADED = False


def _preload(env: dict) -> None:
    """Import what every fork would import, with the environment the tests run under."""
    global _PRELOADED
    if _PRELOADED:
        return
    threads = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
    for k in (*threads, "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        os.environ[k] = env[k]
    os.environ.setdefault("MPLBACKEND", "Agg")
    import importlib

    for name in _PRELOAD:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - an optional module missing only means a slower fork
            pass
    leaked = [m for m in sys.modules if m == "conceptlens" or m.startswith("conceptlens.")]
    if leaked:  # a preloaded module imported ours: the forks would not see the mutant
        raise RuntimeError(f"preloading imported {leaked[0]}; run with --no-fork")
    _PRELOADED = True


def _forked_pytest(tree: Path, args: list[str], timeout: float, env: dict) -> tuple[str, float]:
    _preload(env)
    t0 = time.time()
    pid = os.fork()
    if pid == 0:  # the child: the tree's sources first on the path, output discarded
        code = 3
        try:
            os.setpgid(0, 0)
            os.environ.clear()
            os.environ.update(env)
            os.chdir(tree)
            sys.path.insert(0, str(tree))
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)
            os.dup2(null, 2)
            import pytest

            code = int(pytest.main(args))
        finally:
            os._exit(code)
    deadline = t0 + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.time() > deadline:
            try:
                os.killpg(pid, 9)
            except ProcessLookupError:
                pass
            os.waitpid(pid, 0)
            return "timeout", time.time() - t0
        time.sleep(0.05)
    rc = os.waitstatus_to_exitcode(status)
    return {0: "survived", 5: "no tests"}.get(rc, "killed"), time.time() - t0


_BASELINES: dict[tuple, tuple[str, float, Path]] = {}
_DURATIONS: dict[str, float] = {}  # test id -> seconds it took on the unmutated module


def _junit_durations(path: Path) -> dict[str, float]:
    """{test id: seconds} from pytest's JUnit XML (classname `tests.test_x`, name `test_y[p]`)."""
    import xml.etree.ElementTree as ET

    if not path.exists():
        return {}
    out = {}
    for case in ET.parse(path).iter("testcase"):
        cls = case.get("classname", "")
        file = cls.replace(".", "/") + ".py"
        out[f"{file}::{case.get('name')}"] = float(case.get("time") or 0)
    return out


def covering_tests(tree: Path, module: str, tests: list[str], marker: str) -> tuple[str, float, dict]:
    """The unmutated module's tests, run once under coverage with one context per test:
    (status, seconds, {line: the test ids that executed it}). A mutant then runs only the
    tests that execute a line it changed, which is what makes a module of 50 mutants fit a
    shared 2-core machine; a mutant whose lines no test executes in-process (only through a
    subprocess, say) runs the module's whole list."""
    package = str(Path(module).parent).replace("/", ".")
    key = (package, tuple(tests), marker)
    data_file = tree.parent / f".coverage.dataflow.{len(_BASELINES)}"
    if key in _BASELINES:  # the modules of one package with the same tests share one run
        status, seconds, data_file = _BASELINES[key]
    else:
        if data_file.exists():
            data_file.unlink()
        junit = data_file.with_suffix(".xml")
        extra = (
            f"--cov={package}",
            "--cov-context=test",
            "--cov-report=",
            "-p",
            "pytest_cov",
            f"--junitxml={junit}",
        )
        status, seconds = run_tests(
            tree, tests, timeout=3600, marker=marker, extra=extra, env_extra={"COVERAGE_FILE": str(data_file)}
        )
        _BASELINES[key] = (status, seconds, data_file)
        _DURATIONS.update(_junit_durations(junit))
    lines: dict[int, set[str]] = {}
    if status == "survived" and data_file.exists():
        import coverage

        data = coverage.CoverageData(basename=str(data_file))
        data.read()
        target = str((tree / module).resolve())
        for f in data.measured_files():
            if str(Path(f).resolve()) == target:
                for line, contexts in (data.contexts_by_lineno(f) or {}).items():
                    ids = {c.rsplit("|", 1)[0] for c in contexts if c}
                    lines[line] = ids
    return status, seconds, lines


def tests_for(m: Mutant, lines: dict[int, set[str]], tests: list[str]) -> list[str]:
    """The test ids that execute a line of the mutant, fastest first (with `-x`, a mutant a
    fast test catches is done in seconds)."""
    ids: set[str] = set()
    for line in range(m.line, max(m.line, m.end_line) + 1):
        ids |= lines.get(line, set())
    if not ids:
        return tests
    return sorted(ids, key=lambda t: (_DURATIONS.get(t, 1e9), t))


def run_module(
    module: str,
    tests: list[str],
    work: Path,
    sample: int,
    seed: int,
    marker: str,
    timeout: float = 0,
    select: bool = True,
    only: set[str] | None = None,
) -> dict:
    source = (ROOT / module).read_text()
    made = mutants(source)
    if only:
        made = [(m, code) for m, code in made if m.name in only]
    if sample and sample < len(made):
        rng = random.Random(seed)
        made = [made[i] for i in sorted(rng.sample(range(len(made)), sample))]
    tree = scratch(work)
    target = tree / module
    if select:
        baseline, seconds, lines = covering_tests(tree, module, tests, marker)
    else:
        (baseline, seconds), lines = run_tests(tree, tests, timeout=3600, marker=marker), {}
    if baseline != "survived":
        return {"module": module, "error": f"the tests fail ({baseline}) on the unmutated module"}
    # A mutant that makes the tests loop is killed by its timeout: by default three times
    # what the unmutated module's tests took, and at least a minute.
    limit = timeout or max(60.0, 3 * seconds + 30)
    results = []
    try:
        for m, code in made:
            target.write_text(code)
            chosen = tests_for(m, lines, tests) if select else tests
            status, took = run_tests(tree, chosen, timeout=limit, marker=marker)
            results.append((m, status))
            print(f"   {m.name}: {status} ({took:.0f}s, {len(chosen)} tests)", flush=True)
    finally:
        target.write_text(source)
    by_op: dict[str, dict] = {}
    for m, status in results:
        c = by_op.setdefault(m.operator, {"mutants": 0, "killed": 0})
        c["mutants"] += 1
        c["killed"] += status in ("killed", "timeout")
    survivors = [(m, s) for m, s in results if s in ("survived", "no tests")]
    out_dir = work / "dataflow"
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / (module.replace("/", "__") + ".survivors.txt")).write_text(
        "".join(f"## {m.name} ({s})\n- {m.before}\n+ {m.after}\n\n" for m, s in survivors)
    )
    killed = sum(c["killed"] for c in by_op.values())
    return {
        "module": module,
        "mutants": len(results),
        "sampled": bool(sample),
        "killed": killed,
        "kill_rate": round(killed / len(results), 4) if results else None,
        "by_operator": by_op,
        "survivors": [f"{m.name}: {m.before}" for m, _ in survivors],
        # Counted as killed; a loaded machine can time out a mutant its tests do not catch.
        "timeouts": [m.name for m, s in results if s == "timeout"],
        "ran": [m.name for m, _ in results],
        "tests": tests,
    }


def merged(prev: dict, rerun: dict) -> dict:
    """A full run's result updated by a re-run of some of its mutants (`--only`, after new
    tests): a re-run mutant now killed leaves the survivors; the counts follow."""
    ran = set(rerun["ran"])
    name = lambda s: s.split(":", 1)[0]  # noqa: E731
    still = [s for s in prev["survivors"] if name(s) not in ran] + rerun["survivors"]
    by_op = {op: dict(c) for op, c in prev["by_operator"].items()}
    for op, c in by_op.items():
        survived = sum(1 for s in still if name(s).startswith(op + "#"))
        c["killed"] = c["mutants"] - survived
    killed = sum(c["killed"] for c in by_op.values())
    return {
        **prev,
        "killed_before_new_tests": prev.get("killed_before_new_tests", prev["killed"]),
        "killed": killed,
        "kill_rate": round(killed / prev["mutants"], 4) if prev["mutants"] else None,
        "by_operator": by_op,
        "survivors": still,
        "timeouts": sorted(
            {t for t in prev.get("timeouts", []) if t not in ran} | set(rerun.get("timeouts", []))
        ),
        "ran": prev.get("ran", []),
        "tests": sorted(set(prev["tests"]) | set(rerun["tests"])),
    }


def main(argv=None) -> int:
    sys.path.insert(0, str(ROOT / "tools"))
    from mutate import MARKERS, MODULES

    # tools/mutate.py lists the registered analyses by importing conceptlens from ROOT: forget
    # it, so that each fork imports the scratch tree's (mutated) copy.
    for name in [m for m in sys.modules if m == "conceptlens" or m.startswith("conceptlens.")]:
        del sys.modules[name]

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("modules", nargs="*", help="modules to mutate (default: all of tools/mutate.py MODULES)")
    p.add_argument("--work", type=Path, default=ROOT / "build" / "mutate", help="scratch folder")
    p.add_argument("--sample", type=int, default=0, help="test only this many random mutants per module")
    p.add_argument("--seed", type=int, default=0, help="random_state of --sample")
    p.add_argument("--list", action="store_true", help="print the mutants, run nothing")
    p.add_argument("--tests", nargs="+", help="tests to run instead of tools/mutate.py's list")
    p.add_argument("--timeout", type=float, default=0, help="seconds per mutant (default: 3x baseline + 30)")
    p.add_argument(
        "--no-select",
        action="store_true",
        help="run all the module's tests on each mutant, not only those covering it",
    )
    p.add_argument(
        "--no-fork",
        action="store_true",
        help="run each mutant's tests in a fresh interpreter (default: a fork of a preloaded one)",
    )
    p.add_argument("--only", nargs="+", help="run only these mutants (names as printed: drop_mask#0@187)")
    args = p.parse_args(argv)
    global _FORK
    _FORK = _FORK and not args.no_fork
    unknown = [m for m in args.modules if m not in MODULES and not args.tests]
    if unknown:
        p.error(f"unknown module(s) {', '.join(unknown)}; choose from {', '.join(MODULES)}")
    modules = args.modules or list(MODULES)
    if args.list:
        for m in modules:
            for mut, _ in mutants((ROOT / m).read_text()):
                print(f"{m}:{mut.line} {mut.operator}#{mut.index}: {mut.before}  ->  {mut.after}")
        return 0
    summary_path = args.work / "summary.json"
    for m in modules:
        print(f"data-flow mutants of {m} ...", flush=True)
        r = run_module(
            m,
            args.tests or MODULES[m],
            args.work,
            args.sample,
            args.seed,
            MARKERS.get(m, "not browser and not slow"),
            timeout=args.timeout,
            select=not args.no_select,
            only=set(args.only) if args.only else None,
        )
        summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
        prev = summary.get(m, {}).get("dataflow")
        if args.only and prev and "error" not in prev and "error" not in r:
            r = merged(prev, r)
        summary.setdefault(m, {"module": m})["dataflow"] = r
        args.work.mkdir(parents=True, exist_ok=True)
        summary_path.write_text(json.dumps(summary, indent=2) + "\n")
        done = r.get("error") or f"{r['killed']}/{r['mutants']} killed ({r['kill_rate']:.0%})"
        print(f"   {m}: {done}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
