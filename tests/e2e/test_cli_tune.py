"""``stoker tune`` as a user runs it: the trials, the best setting's call, JSON, bad input, Ctrl-C."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import numpy as np
import pytest

import stoker

FAST = ["--batch-size", "16", "--trial-batches", "2", "--trial-seconds", "0"]


def run(*args):
    cmd = [sys.executable, "-m", "stoker.cli.main", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)  # a hang bound, not a speed
    return proc.returncode, proc.stdout, proc.stderr


@pytest.fixture
def store(tmp_path):
    rng = np.random.default_rng(1)
    path = tmp_path / "s"
    stoker.write(path, {"x": rng.random((300, 16), dtype=np.float32), "y": np.arange(300)}, shard_size=4096)
    return path


def test_tune_prints_trials_best_call_and_limits_and_writes_json(store, tmp_path):
    out_json = tmp_path / "tune.json"
    code, out, err = run("tune", str(store), "--step-ms", "1", *FAST, "--json", str(out_json))
    assert code == 0, err
    assert "trial 1: num_workers=" in out and "rows/s" in out
    assert "best" in out and "stoker.Loader(stoker.open(" in out and "limits" in out and "of the limit" in out
    assert "pin_memory" in out and "CUDA" in out  # skipped on the CPU, and said
    obj = json.loads(out_json.read_text())
    assert obj["kind"] == "plain" and obj["step_ms"] == 1.0 and obj["best"]["rows_per_s"] > 0
    assert len(obj["trials"]) >= 3 and obj["call"] in out
    assert obj["limits"]["step_rows_per_s"] == pytest.approx(16000)


def test_unknown_setting_is_an_error_naming_it(store):
    code, out, err = run("tune", str(store), "--only", "workers,foo", *FAST)
    assert code == 1 and "'foo'" in err and "num_workers" in err and "Traceback" not in err
    assert "trial 1" not in out


def test_help_says_what_is_searched_and_how_a_script_is_run():
    code, out, _ = run("tune", "--help")
    assert code == 0 and "--step-ms" in out and "-- python train.py" in out and "torch DataLoader" in out


def test_a_script_is_tuned_through_its_own_loop(store, tmp_path):
    script = tmp_path / "train.py"
    script.write_text(
        "import sys\nimport stoker\nloader = stoker.Loader(sys.argv[1], 16, num_workers=0)\n"
        "while True:\n    for batch in loader:\n        pass\n"
    )
    out_json = tmp_path / "tune.json"
    cmd = ["--only", "workers", "--trial-batches", "3", "--trial-seconds", "0", "--json", str(out_json)]
    code, out, err = run("tune", *cmd, "--", sys.executable, str(script), str(store))
    assert code == 0, err
    assert "trial 1: num_workers=0:" in out and "the script's stoker.Loader" in out and "(it gives num_workers=0" in out
    obj = json.loads(out_json.read_text())
    assert obj["kind"] == "script" and obj["command"] == [sys.executable, str(script), str(store)]
    assert (
        obj["best"]["rows_per_s"] > 0
        and obj["call"].startswith("num_workers=")
        and "# in the script's stoker.Loader(" in obj["call"]
    )


def test_a_store_and_a_script_together_or_script_only_flags_are_refused(store):
    code, _, err = run("tune", str(store), "--", sys.executable, "train.py")
    assert code == 1 and "not both" in err
    code, _, err = run("tune", "--step-ms", "3", "--", sys.executable, "train.py")
    assert code == 1 and "--step-ms do not apply with a script" in err
    code, _, err = run("tune")
    assert code == 1 and "give a store" in err


def _ctrl_c_as_in_a_terminal():
    """In the child before it runs: SIGINT's default action, so that Python installs its KeyboardInterrupt handler.

    A test run started in the background by a non-interactive shell (``make test &``, a CI step) inherits
    SIGINT ignored, and Python keeps an ignored SIGINT ignored: the search then ran to its end and exited 0.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_prints_the_best_setting_so_far(store):
    # --grid: 32 trials of 5 s at least (--stable 0: each runs full length), so the search is
    # still running when the signal comes, however late this process reads the first line
    cmd = [sys.executable, "-m", "stoker.cli.main", "tune", str(store), "--batch-size", "16", "--stable", "0"]
    cmd += ["--trial-seconds", "5", "--grid"]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_ctrl_c_as_in_a_terminal
    )
    try:
        first = proc.stdout.readline()  # blocks until the first trial's line is printed (flushed)
        assert first.startswith("trial 1: "), first
        proc.send_signal(signal.SIGINT)  # during the second trial, which runs 5 s at least
        rest, err = proc.communicate(timeout=600)  # a hang bound, not a speed
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert "best so far (interrupted)" in rest and "stoker.Loader(" in rest and "interrupted" in err
