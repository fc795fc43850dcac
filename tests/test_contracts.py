"""Contract tests come from the declarations: adding an analysis adds its cases.

An analysis declares its options (`Analysis.options`), its tables (`Analysis.tables`), its
page (`components/nav.py`'s `PageSpec`) and its figures (`conceptlens/figures/specs/`). The
shared tests derive their cases from those (scikit-learn's `check_estimator` in spirit):
tests/test_analysis_options.py the options' valid and invalid values and the recompute
case, tests/malformed.py a broken value per rule each table's columns declare (run by
tests/test_validate.py), harness/factory.py valid rows of any table from its declaration,
tests/test_page_tables.py every page on a workspace that holds its tables, and
tests/test_figure_specs.py every catalogue figure.

The test below adds a real analysis, `mean_norm` (tests/fixture_analysis/: one table, one
option, one page, one figure), to a copy of the product exactly as docs/architecture.md's
recipe says, and runs those tests there: they pass and hold cases named after it, while the
addition touched only new files and the two shared one-line edits the recipe names (and the
generated docs/workspace.md), no file under tests/.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from conceptlens import schema
from conceptlens.validate import format_problems, validate
from harness.factory import make_workspace, write_declared
from tests.conftest import ROOT

FIXTURE = Path(__file__).parent / "fixture_analysis"
# What docs/architecture.md's recipe copies in: the product, its tests and docs.
PRODUCT = (
    "conceptlens",
    "components",
    "pages",
    "participant",
    "tools",
    "bench",
    "harness",
    "tests",
    "docs",
    ".streamlit",
    "app.py",
    "serve.py",
    "pyproject.toml",
)
# The recipe's shared edits, one line each: (file, the line it follows, the line added).
EDITS = (
    ("conceptlens/analysis/__init__.py", '    "aligned_projections",\n', '    "mean_norm",\n'),
    (
        "components/nav.py",
        '        ("concept_labels", "concepts"),\n    ),\n',  # the last PageSpec of PAGES
        '    PageSpec("mean_norm", "pages/mean_norm.py", "Mean norm", ":material/straighten:", '
        '("mean_norm",)),\n',
    ),
)
GENERATED = ("docs/workspace.md",)  # python -m conceptlens.schema docs/workspace.md
# The contract tests run in the copy: those derived from the declarations (the new
# analysis' cases by name) and the whole-registry checks a new analysis could break.
CONTRACT_FILES = (
    "tests/test_analysis_options.py",
    "tests/test_validate.py",
    "tests/test_page_tables.py",
    "tests/test_figure_specs.py",
    "tests/test_imports.py",
    "tests/test_docs.py",
    "tests/test_random_streams.py",  # an option whose help says "bootstrap resamples"
    "tests/test_run_scope.py",  # every analysis gets its Scope, never an option smuggled in
)
WHOLE_REGISTRY = (
    "test_every_analysis_has_a_case",
    "test_registry_covers_the_format",
    "test_valid_workspace_exits_0",
    "test_every_step_is_shown_by_a_page",
    "test_spec_modules_are_found_without_a_list",
    "test_the_factory_draws_most_figures",
    "test_workspace_doc_matches_schema",
    "test_every_table_and_column_documented",
    "test_who_writes_a_table",
    "test_analysis_modules_import_only_base_common_and_metrics",
    "test_imports",
    "test_run_scope",
    "test_the_analyses_that_resample_are_found",
)
# Per file: the test functions that must hold a case of the new analysis.
DERIVED = {
    "tests/test_analysis_options.py": (
        "test_an_option_accepts_every_value_its_declaration_allows",
        "test_an_option_rejects_every_value_its_declaration_rules_out",
        "test_an_option_that_changes_the_result_recomputes_and_threads_do_not",
    ),
    "tests/test_validate.py": ("test_malformation_is_reported",),
    "tests/test_random_streams.py": (
        "test_every_stream_follows_the_runs_seed",
        "test_no_two_quantities_of_a_unit_share_a_stream",
        "test_the_same_seed_gives_bit_identical_tables",
        "test_another_seed_changes_every_interval",
    ),
    "tests/test_page_tables.py": ("test_page_reads_only_the_tables_its_spec_declares",),
    "tests/test_figure_specs.py": (
        "test_a_figure_declares_what_its_page_shows_and_reads_nothing_else",
        "test_page_draws_the_catalogue_build",
    ),
}


def test_the_factory_makes_valid_rows_of_every_analysis_table_from_its_declaration(tmp_path):
    """Every table an analysis writes, its hand-made rows replaced by rows made from its
    declaration alone, is valid: a new analysis' table gets factory data without an edit
    to harness/factory.py. (A cluster's size in cluster_metrics is its count of images in
    clusters, a rule between tables no column declares: those two keep their hand-made rows.)"""
    from conceptlens.analysis import registered

    ws = make_workspace(tmp_path / "ws", derived=True)
    names = list(dict.fromkeys(t for a in registered() for t in a.writes))
    across_tables = {"clusters", "cluster_metrics"}
    for name in names:
        if name in across_tables:
            continue
        for f in ws.files(name):
            f.unlink()
        write_declared(ws, schema.TABLES_BY_NAME[name])
        assert ws.files(name), name
    problems = validate(ws.root, deep=False)
    assert problems == [], format_problems(problems)
    assert len(names) - len(across_tables) >= 20


def _product_copy(dst: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "artifacts", ".pytest_cache", ".hypothesis")
    for name in PRODUCT:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dst / name, ignore=ignore)
        elif src.exists():
            shutil.copy2(src, dst / name)
    # The committed demo (tests' demo_ws hard-links it, read only): shared, not copied.
    (dst / "data").symlink_to(ROOT / "data", target_is_directory=True)


def _tree(root: Path) -> dict[str, bytes]:
    out = {}
    for name in PRODUCT:
        p = root / name
        for f in [p] if p.is_file() else sorted(p.rglob("*")) if p.is_dir() else []:
            if f.is_file() and "__pycache__" not in f.parts:
                out[str(f.relative_to(root))] = f.read_bytes()
    return out


def _add_the_analysis(copy: Path) -> None:
    """The recipe: the new files, the two one-line edits, the generated table docs."""
    for f in sorted(FIXTURE.rglob("*.py")):
        target = copy / f.relative_to(FIXTURE)
        assert not target.exists(), f"{target.relative_to(copy)}: the fixture would replace a product file"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, target)
    for rel, after, line in EDITS:
        p = copy / rel
        text = p.read_text()
        assert text.count(after) == 1, f"{rel}: the recipe's anchor {after!r} is not there once"
        p.write_text(text.replace(after, after + line))
    python = ROOT / ".venv" / "bin" / "python"
    subprocess.run(
        [str(python if python.exists() else sys.executable), "-m", "conceptlens.schema", "docs/workspace.md"],
        cwd=copy,
        check=True,
        env=_env(copy),
    )


def _env(copy: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "COV_"))}
    return {**env, "PYTHONPATH": str(copy), "PYTHONDONTWRITEBYTECODE": "1"}


def test_a_new_analysis_touches_new_files_and_two_shared_lines_and_the_contract_tests_cover_it(tmp_path):
    copy = tmp_path / "product"
    _product_copy(copy)
    before = _tree(copy)
    _add_the_analysis(copy)
    after = _tree(copy)

    new = sorted(set(after) - set(before))
    edited = sorted(f for f in set(after) & set(before) if after[f] != before[f])
    assert not set(before) - set(after), "the recipe removes no file"
    # Recorded: what adding one analysis with a table, an option, a page and a figure touches.
    assert new == [
        "conceptlens/analysis/mean_norm.py",
        "conceptlens/figures/specs/mean_norm.py",
        "conceptlens/views/mean_norm.py",
        "pages/mean_norm.py",
    ]
    assert edited == sorted([rel for rel, _, _ in EDITS] + list(GENERATED))
    by_hand = [f for f in edited if f not in GENERATED]
    assert len(by_hand) <= 2, by_hand
    assert not [f for f in new + edited if f.startswith("tests/")], "no test file is edited or added"

    python = ROOT / ".venv" / "bin" / "python"
    python = str(python if python.exists() else sys.executable)
    where = subprocess.run(
        [python, "-c", "import conceptlens, components; print(conceptlens.__file__, components.__file__)"],
        cwd=copy,
        env=_env(copy),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert all(Path(w).is_relative_to(copy) for w in where), f"the copy imports the repo's code: {where}"

    report = tmp_path / "contract.xml"
    selected = " or ".join(("mean_norm", *WHOLE_REGISTRY))
    r = subprocess.run(
        [python, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider", "-m", ""]
        + ["-n", "4", "--dist", "loadfile", "-k", selected, f"--junitxml={report}", *CONTRACT_FILES],
        cwd=copy,
        env=_env(copy),
        capture_output=True,
        text=True,
        timeout=600,
    )
    tail = (r.stdout + r.stderr)[-6000:]
    assert r.returncode == 0, tail

    cases = [
        (c.get("classname", "").replace(".", "/") + ".py", c.get("name", ""), [x.tag for x in c])
        for c in ET.parse(report).iter("testcase")
    ]
    assert not [c for c in cases if "skipped" in c[2] or "failure" in c[2] or "error" in c[2]], tail
    for file, functions in DERIVED.items():
        ours = [name for f, name, _ in cases if f == file and "mean_norm" in name]
        for fn in functions:
            assert any(name.startswith(fn + "[") for name in ours), (
                f"{file}: no case of {fn} for the new analysis among {ours}"
            )
    passed = {f for f, _, _ in cases}
    assert set(CONTRACT_FILES) <= passed, set(CONTRACT_FILES) - passed


def test_the_recipe_in_the_docs_names_the_files_the_test_touches():
    """docs/architecture.md says what adding an analysis touches: the same shared edits."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    recipe = text[text.index("## Adding an analysis and its page") :]
    recipe = recipe[: recipe.index("\n## ", 1)]
    for rel, _, _ in EDITS:
        assert rel in recipe, rel
    assert "tests/test_contracts.py" in recipe and "**two**" in recipe
