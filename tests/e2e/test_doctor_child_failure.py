"""`stoker doctor` on a command that fails: it names the interpreter that ran, and for a failed import the Python to use."""

from __future__ import annotations

import json
import os
import subprocess
import sys

HANG_S = 300  # a bound for a hung run, not a speed

MISSING = "import stoker_h10_no_such_module\n"  # what `import torch` does in a Python without torch


def _doctor(tmp_path, env, *command):
    out = tmp_path / "report"
    argv = [sys.executable, "-m", "stoker.cli.main", "doctor", "--no-html", "--no-trace", "--out", str(out), "--"]
    proc = subprocess.run([*argv, *command], capture_output=True, text=True, timeout=HANG_S, cwd=tmp_path, env=env)
    return proc, json.loads((out / "report.json").read_text())


def test_an_import_error_under_another_python_names_it_and_the_python_to_use(tmp_path):
    (tmp_path / "train.py").write_text(MISSING)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # a bare `python` found on PATH that is not stoker's Python (as from a venv that is not activated)
    (bin_dir / "python").symlink_to(os.path.realpath(sys.executable))
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc, report = _doctor(tmp_path, env, "python", "train.py")
    assert proc.returncode == 1
    assert "ModuleNotFoundError" in proc.stderr  # the script's own stderr still reaches the user
    note = report["note"]
    assert f"the command ran {bin_dir / 'python'}" in note
    assert "No module named 'stoker_h10_no_such_module'" in note
    assert f"stoker doctor -- {sys.executable} train.py" in note  # the doctor's own Python: stoker's environment
    assert "lacks the script's packages" in note
    assert "the command ran" in proc.stdout  # printed with the report


def test_a_script_without_loader_names_the_interpreter_and_no_import_advice(tmp_path):
    (tmp_path / "train.py").write_text("print('nothing to load')\n")
    proc, report = _doctor(tmp_path, dict(os.environ), sys.executable, "train.py")
    assert proc.returncode == 0 and report["verdict"] == "no data loader seen"
    assert report["note"].startswith(f"the command ran {sys.executable}")
    assert "import" not in report["note"]


def test_the_note_for_stokers_own_python_says_to_install_the_package():
    from stoker.doctor.run import failed_child_note

    tail = "Traceback (most recent call last):\n  ...\nModuleNotFoundError: No module named 'torch'\n"
    note = failed_child_note([sys.executable, "train.py"], None, tail)
    assert "No module named 'torch'" in note and "install the missing package" in note
    assert "stoker doctor --" not in note
