"""Measure how long threads hold the GIL, in CPU time, by counting every release.

C extensions (numpy, torch's bindings, Cython's ``with nogil``, pybind11's ``gil_scoped_release``)
give the GIL up through ``PyEval_SaveThread`` and take it back through ``PyEval_RestoreThread``.
A tiny shared library, compiled here with the system C compiler and loaded with ``LD_PRELOAD``,
wraps those two functions: it counts the releases and adds up the CPU time the process spends
between each release and the next re-acquisition (``CLOCK_THREAD_CPUTIME_ID`` of the releasing
thread, so waiting for the GIL and time other processes take from the cores are not counted).
Then, over any stretch of work:

    GIL-held CPU = process CPU (all threads) - CPU spent with the GIL released

which depends on the work only, not on the machine's load (a wall-clock measure on a shared
2-core box moves by tens of percent). Calls that libpython makes to itself (its own ``time.sleep``
or file reads) bypass the wrapper and count as held, which errs on the side of a larger share.

Use: ``preload_env()`` gives the environment for a child process; inside it, ``GilMeter()`` reads
the counters (``available`` is False when the library is not loaded).
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass

SOURCE = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <time.h>
#include <stdatomic.h>

typedef void *(*save_fn)(void);
typedef void (*restore_fn)(void *);
static save_fn real_save;
static restore_fn real_restore;
static atomic_llong released_ns, releases;
static __thread long long started;

static long long cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

void *PyEval_SaveThread(void) {
    if (!real_save) real_save = (save_fn)dlsym(RTLD_NEXT, "PyEval_SaveThread");
    void *state = real_save();
    atomic_fetch_add(&releases, 1);
    started = cpu_ns();
    return state;
}

void PyEval_RestoreThread(void *state) {
    if (!real_restore) real_restore = (restore_fn)dlsym(RTLD_NEXT, "PyEval_RestoreThread");
    atomic_fetch_add(&released_ns, cpu_ns() - started);
    real_restore(state);
}

long long gil_meter_released_ns(void) { return atomic_load(&released_ns); }
long long gil_meter_releases(void) { return atomic_load(&releases); }
"""

_ENV = "STOKER_BENCH_GIL_METER"


def build(directory: str | None = None) -> str | None:
    """Compile the wrapper library; its path, or None without a C compiler."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return None
    directory = directory or tempfile.mkdtemp(prefix="stoker-gil-meter-")
    src, lib = os.path.join(directory, "libgilmeter.c"), os.path.join(directory, "libgilmeter.so")
    with open(src, "w") as f:
        f.write(SOURCE)
    done = subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", lib, src, "-ldl"], capture_output=True, text=True)
    return lib if done.returncode == 0 else None


def preload_env(lib: str) -> dict[str, str]:
    """The environment of a child process whose GIL releases the library counts."""
    env = dict(os.environ)
    env["LD_PRELOAD"] = f"{lib} {env['LD_PRELOAD']}" if env.get("LD_PRELOAD") else lib
    env[_ENV] = lib
    return env


@dataclass(frozen=True)
class Reading:
    cpu_s: float  # CPU of every thread of this process
    released_s: float  # CPU spent with the GIL released
    releases: int

    def __sub__(self, other: Reading) -> Reading:
        return Reading(self.cpu_s - other.cpu_s, self.released_s - other.released_s, self.releases - other.releases)

    @property
    def held_s(self) -> float:
        return self.cpu_s - self.released_s


class GilMeter:
    """The counters of the preloaded library in this process."""

    def __init__(self) -> None:
        self.lib = None
        if os.environ.get(_ENV):
            try:
                self.lib = ctypes.CDLL(os.environ[_ENV])
            except OSError:
                self.lib = None
        if self.lib is not None:
            self.lib.gil_meter_released_ns.restype = ctypes.c_longlong
            self.lib.gil_meter_releases.restype = ctypes.c_longlong

    @property
    def available(self) -> bool:
        return self.lib is not None

    def read(self) -> Reading:
        if self.lib is None:
            raise RuntimeError("the GIL meter is not loaded: run under preload_env(build())")
        return Reading(time.process_time(), self.lib.gil_meter_released_ns() / 1e9, self.lib.gil_meter_releases())
