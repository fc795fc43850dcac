"""tools/dataflow_mutants.py makes the data-flow bugs issue 29 names, one at a time, and each
mutated module still runs: a mutant that does not compile would count as killed and inflate
the rate."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
import dataflow_mutants as D  # noqa: E402

SOURCE = '''"""A module."""
from __future__ import annotations

import numpy as np
import pandas as pd


def kept_mean(df, col):
    d = df[df["is_catch"] == False]  # noqa: E712
    return float(d[col].mean())


def weighted(xs, ws):
    return [x * w for x, w in zip(xs, ws) if w > 0]


def running(xs):
    out = []
    for x in xs:
        out.append(x + 1)
    return out


def diff(a, b):
    return a - b


def call_diff(a, b):
    return diff(a, b)


CACHE = {"k": 1}


def reset():
    CACHE.clear()
    return len(CACHE)


def order(xs):
    return sorted(xs), list(np.argsort(np.asarray(xs)))


def top(df):
    return df.sort_values("v").iloc[0]["v"]
'''


def _module(code: str) -> dict:
    env: dict = {}
    exec(compile(code, "<mutant>", "exec"), env)
    return env


def test_each_operator_makes_its_bug_and_the_mutant_runs():
    made = D.mutants(SOURCE)
    by = {(m.operator, m.before): code for m, code in made}
    ops = {m.operator for m, _ in made}
    assert ops == set(D.OPERATORS)
    df = pd.DataFrame({"is_catch": [False, True], "v": [1.0, 9.0]})
    original = _module(SOURCE)
    assert original["kept_mean"](df, "v") == 1.0

    dropped = _module(by[("drop_mask", "df[df['is_catch'] == False]")])
    assert dropped["kept_mean"](df, "v") == 5.0  # the catch row is no longer filtered out
    comp = next(c for (op, b), c in by.items() if op == "drop_mask" and "zip(xs, ws)" in b)
    assert _module(comp)["weighted"]([1, 2], [0, 3]) == [0, 6]

    first = _module(next(c for (op, b), c in by.items() if op == "first_item"))
    assert original["running"]([1, 5, 7]) == [2, 6, 8]
    assert first["running"]([1, 5, 7]) == [2, 2, 2]

    swapped = _module(by[("swap_args", "diff(a, b)")])
    assert swapped["call_diff"](5, 2) == -3

    reset = _module(next(c for (op, b), c in by.items() if op == "skip_reset"))
    assert original["reset"]() == 0 and reset["reset"]() == 1

    rev = [c for (op, b), c in by.items() if op == "reverse_sort"]
    assert len(rev) == 3  # sorted, argsort, sort_values
    outs = [(_module(c)["order"]([3, 1, 2]), _module(c)["top"](df)) for c in rev]
    assert original["order"]([3, 1, 2]) == ([1, 2, 3], [1, 2, 0])
    assert ([3, 2, 1], [1, 2, 0]) in [o for o, _ in outs]
    assert ([1, 2, 3], [0, 2, 1]) in [o for o, _ in outs]
    assert 9.0 in [t for _, t in outs]


def test_handles_and_modules_are_not_swapped():
    src = "def f(ctx, ds, x, y):\n    g(ctx, ds)\n    np.asarray(x, np.float32)\n    h(x, y)\n"
    swaps = [m.before for m, _ in D.mutants(src, ("swap_args",))]
    assert swaps == ["h(x, y)"]


def test_every_module_of_the_real_list_parses_and_yields_compiling_mutants():
    """On two real modules: every mutant compiles (the helper is placed after the
    `from __future__` import, which must stay first)."""
    root = Path(D.ROOT)
    for module in ("conceptlens/analysis/similarity.py", "conceptlens/metrics/compare.py"):
        made = D.mutants((root / module).read_text())
        assert len(made) > 10
        for m, code in made:
            compile(code, f"{module}:{m.name}", "exec")


def test_a_rerun_after_new_tests_updates_the_counts_and_keeps_the_rest():
    """`--only` re-runs some survivors: those now killed leave the survivors, the others and
    the mutants not re-run stay as they were, and the rate follows."""
    prev = {
        "module": "m.py",
        "mutants": 4,
        "killed": 1,
        "kill_rate": 0.25,
        "by_operator": {"drop_mask": {"mutants": 2, "killed": 0}, "swap_args": {"mutants": 2, "killed": 1}},
        "survivors": ["drop_mask#0@3: x[ok]", "drop_mask#1@5: y[ok]", "swap_args#1@9: f(a, b)"],
        "tests": ["tests/a.py"],
    }
    rerun = {
        "survivors": ["drop_mask#1@5: y[ok]"],
        "ran": ["drop_mask#0@3", "drop_mask#1@5"],
        "tests": ["tests/b.py"],
    }
    got = D.merged(prev, rerun)
    assert got["killed"] == 2 and got["kill_rate"] == 0.5 and got["killed_before_new_tests"] == 1
    assert got["survivors"] == ["swap_args#1@9: f(a, b)", "drop_mask#1@5: y[ok]"]
    assert got["by_operator"] == {
        "drop_mask": {"mutants": 2, "killed": 1},
        "swap_args": {"mutants": 2, "killed": 1},
    }
    assert got["tests"] == ["tests/a.py", "tests/b.py"]


def test_a_mutant_runs_the_tests_that_execute_its_lines_fastest_first(monkeypatch):
    """Only tests that executed a changed line run, the fastest first; a mutant whose lines
    no test executed (in this process) runs the module's whole list."""
    m = D.Mutant("first_item", 0, 10, "for x in xs:", "...", end_line=12)
    lines = {10: {"t.py::slow"}, 12: {"t.py::fast"}, 20: {"t.py::other"}}
    monkeypatch.setattr(D, "_DURATIONS", {"t.py::slow": 5.0, "t.py::fast": 0.1})
    assert D.tests_for(m, lines, ["t.py"]) == ["t.py::fast", "t.py::slow"]
    assert D.tests_for(D.Mutant("swap_args", 0, 30, "", "", end_line=30), lines, ["t.py"]) == ["t.py"]


def test_the_report_leaves_out_only_equivalents_whose_line_is_unchanged(tmp_path, capsys):
    """An equivalent mutant is named with the text of the line it changed: after that line
    changes, the same name is another mutant and counts as a survivor again. The score per
    area is killed / (mutants - equivalent), summed over the area's modules."""
    import json

    import mutate as MU

    eq_file = tmp_path / "eq.json"
    eq_file.write_text(
        json.dumps(
            [
                {
                    "module": "conceptlens/studies/a.py",
                    "mutant": "swap_args#0@3",
                    "before": "min(a, b)",
                    "why": "min",
                },
                # The same name, but the line now says something else: not this mutant.
                {
                    "module": "conceptlens/studies/a.py",
                    "mutant": "drop_mask#1@9",
                    "before": "x[old]",
                    "why": "-",
                },
            ]
        )
    )
    df = lambda k, n, surv: {"killed": k, "mutants": n, "kill_rate": k / n, "survivors": surv}  # noqa: E731
    summary = {
        "conceptlens/studies/a.py": {
            "dataflow": df(8, 10, ["swap_args#0@3: min(a, b)", "drop_mask#1@9: x[new]"])
        },
        "conceptlens/studies/b.py": {"dataflow": df(10, 10, [])},
        "conceptlens/validate.py": {"dataflow": df(3, 4, ["first_item#0@2: for f in files"])},
    }
    MU.report(summary, MU.equivalents(eq_file))
    out = capsys.readouterr().out
    studies = next(line for line in out.splitlines() if line.startswith("studies/"))
    # 18 of 20 killed, 1 equivalent, 1 left: 18 / 19.
    assert studies.split() == ["studies/", "18/20", "90%", "1", "1", "94.7%"]
    validate = next(line for line in out.splitlines() if line.startswith("validate.py"))
    assert validate.split()[-3:] == ["0", "1", "75.0%"]
    assert MU.area("conceptlens/metrics/selection.py") == "metrics/"
