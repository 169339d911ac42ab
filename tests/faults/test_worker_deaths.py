"""A worker process that dies (crash, ``os._exit``, a SIGKILL as the OOM killer sends) is a WorkerError
naming the batch and the exit code; nothing is left in /dev/shm or in the process tree. A user error
in a worker process keeps its type and gets notes naming the row and the stage (issue 14, Bad input).

Nothing here asserts a time: the thread join (60 s, ``in_thread``) only keeps a hang from hanging
the suite.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import subprocess
import sys
import time

import numpy as np
import psutil
import pytest
import torch

import stoker
from stoker.errors import WorkerError

pytestmark = pytest.mark.faults

DEATHS = {
    # faulthandler (on under pytest) would print the worker's stack into the test output
    "segfault": (lambda: (faulthandler.disable(), os.kill(os.getpid(), signal.SIGSEGV)), ["SIGSEGV", "exit code -11"]),
    "os._exit(3)": (lambda: os._exit(3), ["exited with code 3"]),
    "SIGKILL (as an OOM kill)": (lambda: os.kill(os.getpid(), signal.SIGKILL), ["SIGKILL", "exit code -9"]),
}


class Dies(torch.utils.data.Dataset):
    """Rows of 1,000 floats; reading row ``at`` runs ``death`` in the worker."""

    def __init__(self, death, at: int = 21, n: int = 64) -> None:
        self.death, self.at, self.n = death, at, n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> np.ndarray:
        if i == self.at:
            self.death()
        return np.full(1_000, i, dtype=np.float32)


class Raises(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 64

    def __getitem__(self, i: int) -> np.ndarray:
        if i == 13:
            raise KeyError(f"no label for row {i}")
        return np.full(4, i)


def _segments() -> list[str]:
    return [f for f in os.listdir("/dev/shm") if f.startswith(f"stoker_{os.getpid()}_")]


def _children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True) if p.status() != psutil.STATUS_ZOMBIE}


@pytest.mark.parametrize("how", list(DEATHS))
@pytest.mark.parametrize("persistent", [False, True])
def test_a_dead_worker_is_an_error_naming_the_batch_and_its_exit_code(how, persistent, in_thread):
    death, words = DEATHS[how]
    before = _children()
    loader = stoker.Loader(Dies(death), batch_size=8, num_workers=2, engine="processes", persistent_workers=persistent)
    got: list[int] = []

    def run() -> None:
        for batch in loader:
            got.append(int(batch[0, 0]))

    err = in_thread(run)
    assert isinstance(err, WorkerError), err
    message = str(err)
    assert "batch 2 of this pass (epoch 0)" in message, message  # row 21 is in batch 2 (rows 16-23)
    assert all(w in message for w in words), message
    assert err.batch == 2 and err.stage == "read"
    assert got == [0, 8][: len(got)]  # batches finished before the death are handed out in order
    loader.close()
    assert _segments() == []
    assert _children() - before == set()


def test_a_worker_death_while_the_user_holds_batches_leaves_nothing_behind(in_thread):
    before = _children()
    loader = stoker.Loader(Dies(DEATHS["segfault"][0], at=50), batch_size=4, num_workers=2, engine="processes")
    kept = []
    err = in_thread(lambda: [kept.append(b) for b in loader])
    assert isinstance(err, WorkerError) and "batch 12 of this pass" in str(err), err
    assert len(kept) >= 8 and [int(b[0, 0]) for b in kept] == list(range(0, 4 * len(kept), 4))
    assert all(bool((b == b[:, :1]).all()) for b in kept)  # held batches still read right
    assert _segments() == []  # their slots were unlinked; the memory lives on while they are held
    assert _children() - before == set()


def test_a_dataset_error_in_a_worker_keeps_its_type_with_notes_naming_row_and_stage(in_thread):
    loader = stoker.Loader(Raises(), batch_size=8, num_workers=2, engine="processes")
    err = in_thread(lambda: list(loader))
    assert isinstance(err, KeyError) and "no label for row 13" in str(err)
    notes = "\n".join(getattr(err, "__notes__", []))
    assert "dataset[13] raised this" in notes  # the row
    assert "stage 'read'" in notes and "batch 1 of this pass (epoch 0)" in notes  # the stage and batch
    assert _segments() == []


class BadTransformSource(stoker.BatchSource):
    """A source whose per-batch transform fails on row 30 with the row in its own note."""

    def __len__(self) -> int:
        return 64

    def read(self, chunk):
        out = []
        for idx in chunk:
            for row in idx.tolist():
                if row == 30:
                    exc = ZeroDivisionError("brightness factor 0")
                    exc.add_note(f"row {row}")
                    raise exc
            out.append({"x": np.asarray(idx)})
        return out


def test_a_transform_error_in_a_worker_process_is_the_same_as_in_a_thread(in_thread):
    errors = {}
    for engine in ("threads", "processes"):
        loader = stoker.Loader(BadTransformSource(), batch_size=8, num_workers=2, engine=engine)
        errors[engine] = in_thread(lambda loader=loader: list(loader))
    for engine, err in errors.items():
        assert isinstance(err, ZeroDivisionError), (engine, err)
        notes = "\n".join(err.__notes__)
        assert "row 30" in notes and "stage 'read'" in notes, (engine, notes)
    assert _segments() == []


def test_no_room_in_dev_shm_is_an_error_naming_it_not_a_sigbus(tmp_path):
    """A slot's space is reserved when it is made; without room that is a WorkerError saying what to do.
    (A file size limit stands in for a full /dev/shm: both make the reservation fail.)"""
    script = tmp_path / "full.py"
    script.write_text(
        "import os, resource, signal\n"
        "from stoker.pipeline.segments import map_segment\n"
        "from stoker.errors import WorkerError\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))\n"
        "name = f'stoker_{os.getpid()}_full_s1'\n"
        "try:\n"
        "    map_segment(name, 8 << 20, True)\n"
        "except WorkerError as exc:\n"
        "    print('refused:', exc)\n"
        "print('left:', os.path.exists('/dev/shm/' + name))\n"
    )
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "refused: cannot reserve 8.0 MiB in /dev/shm" in proc.stdout and "--shm-size" in proc.stdout
    assert "left: False" in proc.stdout


class _Interrupted(torch.utils.data.Dataset):
    def __len__(self):
        return 16

    def __getitem__(self, i):
        if i == 5:
            # SIGINT's Python handler, as in a terminal: a suite started in the background by a non-interactive
            # shell inherits SIGINT ignored (POSIX), the worker too, and the kill below did nothing
            signal.signal(signal.SIGINT, signal.default_int_handler)
            os.kill(
                os.getpid(), signal.SIGINT
            )  # this worker alone, as a stray SIGINT or a KeyboardInterrupt raised there
            time.sleep(5)
        return torch.tensor([i])


def test_a_worker_interrupted_by_sigint_is_said_so_not_an_exit_code(shm_clean):
    """Issue 36 item 9: it was reported as "exited with code 1 (did ... call sys.exit?)"."""
    loader = stoker.Loader(_Interrupted(), batch_size=4, num_workers=2, engine="processes", timeout=60)
    with pytest.raises(WorkerError, match=r"interrupted: KeyboardInterrupt \(SIGINT\)") as err:
        list(loader)
    assert "sys.exit" not in str(err.value)
