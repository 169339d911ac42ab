"""How a worker process ended, in words: its exit code or signal, and the likely cause only where
there is evidence (a SIGKILL is put down to the out-of-memory killer only if this cgroup's count
of OOM kills rose while the pool ran)."""

from __future__ import annotations

import os
import signal


def exit_words(code: int | None, oom_before: int | None = None) -> str:
    """How a worker process ended, in words, with the likely cause only where there is evidence.

    ``oom_before`` is this cgroup's count of out-of-memory kills when the pool started (see
    :func:`oom_kills`): a SIGKILL is put down to the OOM killer only if that count rose since.
    """
    if code is None:
        return "is gone"
    if code >= 0:
        return f"exited with code {code} (did the dataset or collate_fn call sys.exit or os._exit?)"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    words = f"was killed by {name} (exit code {code})"
    if -code == signal.SIGKILL:
        now = oom_kills()
        if oom_before is not None and now is not None:
            if now > oom_before:
                return (
                    f"{words}: the kernel's out-of-memory killer ended {now - oom_before} process(es) of this "
                    "cgroup since the pool started (memory.events), so memory ran out: use fewer workers or "
                    "smaller batches, or give the job more memory"
                )
            return f"{words}: the out-of-memory kill count of this cgroup did not rise, so the OOM killer is unlikely; something else sent SIGKILL"
        return f"{words}: something sent SIGKILL; the kernel's out-of-memory killer is one possible cause (see dmesg)"
    if -code in (signal.SIGSEGV, signal.SIGBUS, signal.SIGILL, signal.SIGFPE, signal.SIGABRT):
        return f"{words}: a crash in native code (a C extension or library the dataset calls)"
    return words


def oom_kills() -> int | None:
    """This process's cgroup count of out-of-memory kills (v2 ``memory.events``, v1
    ``memory.oom_control``), or None where it cannot be read."""
    try:
        with open("/proc/self/cgroup") as f:
            lines = [line.strip().split(":", 2) for line in f]
    except OSError:
        return None
    v2 = next((p for h, _, p in lines if h == "0"), "/")
    v1 = next((p for _, c, p in lines if "memory" in c.split(",")), "/")
    for path in (
        os.path.join("/sys/fs/cgroup", v2.lstrip("/"), "memory.events"),
        os.path.join("/sys/fs/cgroup/memory", v1.lstrip("/"), "memory.oom_control"),
        "/sys/fs/cgroup/memory.events",
        "/sys/fs/cgroup/memory/memory.oom_control",
    ):
        try:
            with open(path) as f:
                for line in f:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value)
        except (OSError, ValueError):
            continue
    return None


__all__ = ["exit_words", "oom_kills"]
