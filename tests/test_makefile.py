"""The Makefile's install steps: without room on the disk they stop before pip, with a clear line.

`PY=/bin/true` stands in for the venv's Python, so no test here installs anything.
"""

import subprocess

from tests.conftest import ROOT


def _make(target, venv, **limits):
    args = [f"{k}={v}" for k, v in limits.items()]
    return subprocess.run(
        ["make", "-C", str(ROOT), str(venv / target), f"VENV={venv}", "PY=/bin/true", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_no_room_stops_before_pip_and_says_how_much(tmp_path):
    venv = tmp_path / "venv"
    venv.mkdir()
    for target, limit in ((".app-deps", "APP_GB"), (".dev-deps", "DEV_GB")):
        r = _make(target, venv, **{limit: 1_000_000})
        assert r.returncode != 0, target
        assert f"installing into {venv} needs about 1000000 GB free on its disk" in r.stderr
        assert "pip install" not in r.stdout and not (venv / target).exists()


def test_room_enough_goes_on_to_pip(tmp_path):
    venv = tmp_path / "venv"
    venv.mkdir()
    r = _make(".dev-deps", venv, DEV_GB=0)
    assert r.returncode == 0, r.stderr
    assert "-m pip install" in r.stdout and (venv / ".dev-deps").exists() and (venv / ".app-deps").exists()


def test_a_venv_with_torch_needs_little_room(tmp_path):
    # Updating the extras of a venv that holds torch must not ask for torch's gigabytes again.
    venv = tmp_path / "venv"
    (venv / "lib/python3.11/site-packages/torch").mkdir(parents=True)
    r = _make(".dev-deps", venv, DEV_GB=1_000_000)
    assert r.returncode == 0, r.stderr
    assert (venv / ".dev-deps").exists()
