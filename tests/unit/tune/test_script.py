"""``stoker tune -- python train.py``: trials that run a real script's own loop (tune/script.py, tune/inject.py).

Each test runs a tiny training script in a child Python under the doctor's instrumentation: the
trial's setting must reach the script's loader (and nothing else change), the script must be
ended cleanly after the trial's steps, and failures and torch DataLoaders must be reported.
"""

from __future__ import annotations

import json
import sys
import textwrap

import numpy as np
import pytest

import stoker
from stoker.errors import ConfigError
from stoker.tune import tune_script
from stoker.tune.script import ScriptTrials, run_script
from stoker.tune.trial import Ending

TRAIN = """
import json, sys
import stoker

loader = stoker.Loader(sys.argv[1], 16, shuffle=True, num_workers=0, seed=3)
seen = []
try:
    if loader.num_workers == 4:
        raise MemoryError("no room for 4 workers")
    while True:
        for batch in loader:
            seen.append(len(batch["x"]))  # no step: the loop waits for data most of its time
finally:
    with open(sys.argv[2], "w") as f:
        json.dump({"num_workers": loader.num_workers, "engine": loader.engine,
                   "prefetch": loader.config.prefetch_factor, "batch_size": loader.config.batch_size,
                   "seed": loader.config.seed, "batches": len(seen)}, f)
"""


@pytest.fixture
def script(tmp_path):
    rng = np.random.default_rng(0)
    store = tmp_path / "store"
    stoker.write(store, {"x": rng.random((400, 8), dtype=np.float32), "y": np.arange(400)})
    path = tmp_path / "train.py"
    path.write_text(TRAIN)
    return [sys.executable, str(path), str(store), str(tmp_path / "ended.json")], tmp_path / "ended.json"


def short(argv, **kw):
    return ScriptTrials(tuple(argv), Ending(5, warmup=2), **kw)


def test_the_setting_reaches_the_scripts_loader_and_the_script_ends_cleanly(script):
    argv, ended = script
    run = run_script(short(argv), {"num_workers": 2, "engine": "threads", "prefetch_factor": 4})
    assert run.trial.ok and run.trial.rate > 0 and 0 <= run.trial.wait_share <= 1, run.trial.error
    assert run.trial.rows >= 5 * 16 and run.trial.batch_bytes > 0
    assert run.loader["num_workers"] == 2 and run.loader["prefetch_factor"] == 4 and run.loader["batch_size"] == 16
    assert run.given == [{"num_workers": 0}]  # the script's own keyword, replaced
    # written by the script's finally: it was ended, not killed, after 2 + 5 batches (the 7th is not handed out)
    own = json.loads(ended.read_text())
    assert own == {"num_workers": 2, "engine": "threads", "prefetch": 4, "batch_size": 16, "seed": 3, "batches": 6}


def test_a_crashing_trial_is_failed_with_the_scripts_error_and_the_search_goes_on(script):
    argv, _ = script
    run = run_script(short(argv), {"num_workers": 4})
    assert not run.trial.ok and "exited with code 1" in run.trial.error and "no room for 4 workers" in run.trial.error
    seen = []
    result = tune_script(
        argv, trial_batches=5, trial_seconds=0.1, stable=None, space={"num_workers": [0, 4]}, on_trial=seen.append
    )
    assert result.kind == "script" and result.command == argv and seen == result.trials
    assert result.trials[0].setting == {"num_workers": 0} == result.defaults_setting
    failed = [t for t in result.trials if not t.ok]
    assert [t.setting for t in failed] == [{"num_workers": 4}] and "MemoryError" in failed[0].error
    assert result.best.setting == {"num_workers": 0} and "num_workers=0" in result.call
    assert any("replacing the script's own keywords (it gives num_workers=0" in n for n in result.notes)


def test_a_script_that_hardly_waits_for_data_is_not_searched_further(script):
    argv, _ = script
    slow = argv[1].replace("train.py", "slow_train.py")
    with open(slow, "w") as f:  # a 20 ms step per batch of 16 rows read inline: the loader is never the bottleneck
        f.write(TRAIN.replace("# no step", "; __import__('time').sleep(0.02)  #"))
    result = tune_script([argv[0], slow, *argv[2:]], trial_batches=5, trial_seconds=0.1, stable=None)
    assert result.trials[0].ok and result.trials[0].wait_share < 0.03
    assert [t.setting for t in result.trials] == [result.defaults_setting] * 2  # its own settings, confirmed
    assert any("the script waits for data" in n and "search stopped" in n for n in result.notes)


def test_a_script_that_ends_before_the_trial_is_a_failed_trial_saying_so(tmp_path, script):
    _, _ = script
    path = tmp_path / "short.py"
    path.write_text(
        textwrap.dedent(f"""
        import stoker
        for batch in stoker.Loader({str(tmp_path / "store")!r}, 200):
            pass
        """)
    )
    run = run_script(short([sys.executable, str(path)]), {})
    assert not run.trial.ok and "ended after 2 batches" in run.trial.error and "needs 7" in run.trial.error


def test_a_script_with_the_batches_but_not_the_seconds_is_told_the_seconds(tmp_path, script):
    # 8 batches of 50 rows come at once; the trial also wants 1000 s of them: the batch count is not the reason
    _, _ = script
    path = tmp_path / "fast.py"
    path.write_text(
        textwrap.dedent(f"""
        import stoker
        for batch in stoker.Loader({str(tmp_path / "store")!r}, 50):
            pass
        """)
    )
    trials = ScriptTrials((sys.executable, str(path)), Ending(5, warmup=2, min_seconds=1000.0))
    run = run_script(trials, {})
    assert not run.trial.ok and "ended after 8 batches" in run.trial.error
    assert "at least 1000 s" in run.trial.error and "--trial-seconds" in run.trial.error
    assert "needs 7" not in run.trial.error


def test_a_torch_dataloader_is_refused_with_its_settings(tmp_path):
    path = tmp_path / "torch_train.py"
    path.write_text(
        textwrap.dedent("""
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        data = TensorDataset(torch.arange(64.0))
        while True:
            for batch in DataLoader(data, batch_size=8, num_workers=0):
                pass
        """)
    )
    with pytest.raises(ConfigError, match=r"torch DataLoader\(TensorDataset\) \(num_workers=0, batch_size=8") as err:
        tune_script([sys.executable, str(path)], trial_batches=5, trial_seconds=0.1)
    assert "stoker.Loader(dataset" in str(err.value) and "stoker doctor --" in str(err.value)


def test_bad_script_arguments_are_config_errors(script):
    argv, _ = script
    with pytest.raises(ConfigError):
        tune_script([], trial_batches=5)
    with pytest.raises(ConfigError) as err:
        tune_script(argv, trial_batches=1)
    assert err.value.option == "trial_batches"
    with pytest.raises(ConfigError) as err:
        run_script(short(["/no/such/python"]), {})
    assert err.value.option == "command"


def test_a_script_killed_by_sigkill_is_a_failed_trial_naming_the_oom_killer_and_the_search_goes_on(script):
    argv, _ = script
    killed = argv[1].replace("train.py", "killed_train.py")
    with open(killed, "w") as f:  # 4 workers: the process is killed as the out-of-memory killer does it
        f.write(
            TRAIN.replace('raise MemoryError("no room for 4 workers")', "os.kill(os.getpid(), 9)").replace(
                "import json, sys", "import json, os, sys"
            )
        )
    result = tune_script(
        [argv[0], killed, *argv[2:]], trial_batches=5, trial_seconds=0.1, stable=None, space={"num_workers": [0, 4]}
    )
    failed = [t for t in result.trials if not t.ok]
    assert [t.setting for t in failed] == [{"num_workers": 4}]
    assert "killed by SIGKILL (SIGKILL: maybe the out-of-memory killer)" in failed[0].error
    assert result.best.setting == {"num_workers": 0}
