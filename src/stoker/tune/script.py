"""``stoker tune -- python train.py``: each trial runs the user's script, its own loop, for a few steps.

A trial starts the command with ``inject.py``'s hooks (:data:`~stoker.tune.inject.HOOKS`, run there by
``stoker.boot``) and ``STOKER_TUNE_TRIAL`` naming the setting, the result file and how the trial
ends. Inside the script (``inject.py``) the setting's keywords replace the
ones the script gives its stoker loaders, the script's first busy loader is timed through the
observer hook, and the script is ended (``SystemExit`` from the loader, so its ``finally`` blocks
run) once the rate is stable. The trial's rate is the script's own: rows per second of its loop,
step and data wait together.

A trial whose script crashes, is killed (out of memory), ends before its steps or runs past
``timeout`` is a failed trial with the reason and the end of the script's stderr. A script that
iterates a torch ``DataLoader`` before any stoker loader is refused (:class:`ConfigError`): its
settings are the DataLoader's, which stoker tune does not set; the message says how to switch.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from stoker.boot import child_env
from stoker.errors import ConfigError
from stoker.tune.inject import HOOKS, TRIAL_ENV
from stoker.tune.trial import Ending, Trial

TAIL = 600  # characters of the script's stderr kept in a failed trial's error


@dataclass(frozen=True)
class ScriptTrials:
    """How each trial of a script runs: the command, when its timed steps end (an
    :class:`~stoker.tune.trial.Ending`), and ``timeout``, the bound on the whole run of the script
    (start-up, imports and building its data included) in seconds.
    """

    argv: tuple[str, ...]
    ending: Ending
    timeout: float = 300.0

    def __post_init__(self) -> None:
        if not self.argv:
            raise ConfigError(
                "give the command to run after '--', e.g. stoker tune -- python train.py", option="command"
            )
        if not isinstance(self.timeout, (int, float)) or isinstance(self.timeout, bool) or self.timeout <= 0:
            raise ConfigError(f"timeout must be a number of seconds > 0, got {self.timeout!r}", option="timeout")

    def spec(self, setting: dict[str, Any], out: str) -> dict[str, Any]:
        return {"setting": setting, "out": out, "ending": asdict(self.ending)}


@dataclass(frozen=True)
class ScriptRun:
    """One run of the script: the trial, and what the script's loaders were (for the report)."""

    trial: Trial
    loader: dict[str, Any] | None  # the timed loader's options as built (after the setting)
    given: list[dict[str, Any]]  # per stoker loader built: the script's own values of the set keywords


def run_script(trials: ScriptTrials, setting: dict[str, Any]) -> ScriptRun:
    """Run the script once with ``setting`` put into its stoker loaders; its trial (failed or not)."""
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="stoker-tune-") as tmp:
        out = os.path.join(tmp, "trial.json")
        env = child_env({when: [f"stoker.tune.inject:{hook}"] for when, hook in HOOKS.items()})
        env[TRIAL_ENV] = json.dumps(trials.spec(setting, out))
        err_path = Path(tmp) / "stderr"
        with open(err_path, "w+b") as err, open(os.devnull, "wb") as devnull:
            try:
                proc = subprocess.Popen(list(trials.argv), env=env, stdout=devnull, stderr=err)
            except OSError as exc:
                raise ConfigError(
                    f"cannot start {trials.argv[0]!r}: {exc.strerror}; check the command after '--'", option="command"
                ) from exc
            code, timed_out = _wait(proc, trials.timeout)
        seconds = time.perf_counter() - t0
        stderr = err_path.read_bytes().decode("utf-8", "replace")
        found = json.loads(Path(out).read_text(encoding="utf-8")) if os.path.exists(out) else None
    return _outcome(trials, setting, found, code, timed_out, stderr, seconds)


def _wait(proc: subprocess.Popen[bytes], timeout: float) -> tuple[int, bool]:
    """Wait for the script; past ``timeout``, SIGINT, then SIGKILL 10 s later. (exit code, timed out)."""
    try:
        return proc.wait(timeout=timeout), False
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)
        try:
            return proc.wait(timeout=10), True
        except subprocess.TimeoutExpired:
            proc.kill()
            return proc.wait(), True
    except KeyboardInterrupt:  # the script got the SIGINT too; end it, then stop the search
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        raise


def _outcome(
    trials: ScriptTrials,
    setting: dict[str, Any],
    found: dict[str, Any] | None,
    code: int,
    timed_out: bool,
    stderr: str,
    seconds: float,
) -> ScriptRun:
    command = " ".join(trials.argv)
    if found is not None and found.get("torch_dataloader"):
        d = found["torch_dataloader"]
        raise ConfigError(
            f"{command!r} reads a torch DataLoader({d['dataset']}) (num_workers={d['num_workers']}, "
            f"batch_size={d['batch_size']}, prefetch_factor={d['prefetch_factor']}, pin_memory={d['pin_memory']}) "
            "before any stoker loader: stoker tune sets the options of stoker loaders only. Build the loader as "
            "stoker.Loader(dataset, batch_size, shuffle=True) (the same keywords) and tune again, or run "
            f"'stoker doctor -- {command}' for advice on the DataLoader's settings",
            option="command",
        )
    given = list(found.get("given", [])) if found else []
    loader = found.get("loader") if found else None
    if found is not None and found.get("done"):
        trial = Trial(
            setting,
            found["rows_per_s"],
            found["wait_share"],
            seconds,
            rows=int(found["rows"]),
            batch_bytes=int(found["batch_bytes"]),
        )
        return ScriptRun(trial, loader, given)
    error = _why(trials, found, code, timed_out, stderr)
    return ScriptRun(Trial(setting, None, None, seconds, error=error), loader, given)


def _why(trials: ScriptTrials, found: dict[str, Any] | None, code: int, timed_out: bool, stderr: str) -> str:
    """Why a trial gave no rate, in words, with the end of the script's stderr."""
    end = trials.ending
    need = end.warmup + end.batches
    got = int(found["batches"]) if found else 0
    tail = stderr.strip()[-TAIL:]
    after = f"; its stderr ends: {tail}" if tail else ""
    if timed_out:
        return f"the script ran past the trial's {trials.timeout:g} s bound after {got} batches (ended){after}"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        oom = " (SIGKILL: maybe the out-of-memory killer)" if -code == signal.SIGKILL else ""
        return f"the script was killed by {name}{oom} after {got} batches{after}"
    if code != 0:
        return f"the script exited with code {code} after {got} batches{after}"
    if found is None:
        return (
            "the script ended without building a stoker loader in an instrumented Python (run it with a Python "
            f"that has stoker installed, e.g. 'stoker tune -- python train.py'){after}"
        )
    if got == 0:
        return "the script built no stoker loader that handed out a batch"
    if got < need:
        return (
            f"the script ended after {got} batches of its first stoker loader; a trial needs {need} "
            "(lower --trial-batches, or let the script run longer)"
        )
    cap = f" (or {end.max_seconds:g} s)" if end.max_seconds else ""
    stable = f" and a rate known within {end.stable:.0%}{cap}" if end.stable else ""
    return (
        f"the script ended after {got} batches of its first stoker loader, before the trial's end: "
        f"{end.batches} timed batches over at least {end.min_seconds:g} s{stable} (lower --trial-seconds, "
        "pass --stable 0, or let the script run longer)"
    )
