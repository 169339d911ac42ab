"""A loader across fork(): the child's copy of a pass raises, the parent's pass goes on (issue 36 item 6)."""

from __future__ import annotations

import os
import signal

import pytest
import torch

import stoker

pytestmark = pytest.mark.faults


class Rows(torch.utils.data.Dataset):
    def __len__(self):
        return 96

    def __getitem__(self, i):
        return torch.tensor([i])


def _in_child(body) -> str:
    """Run ``body()`` in a fork()ed child; what it returned (or the error it raised), as text."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        os.close(read)
        try:
            words = str(body())
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            words = f"{type(exc).__name__}: {exc}"
        os.write(write, words.encode()[:4000])
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as f:
        words = f.read().decode()
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    return words


@pytest.mark.parametrize("persistent", [False, True])
def test_a_forked_child_cannot_take_the_parents_batches_and_the_parent_goes_on(persistent, shm_clean):
    loader = stoker.Loader(Rows(), batch_size=8, num_workers=2, engine="processes", persistent_workers=persistent)
    it = iter(loader)
    first = next(it)

    def stuck(*_):
        raise TimeoutError("the parent waited 120 s for a batch: the child took it")

    old = signal.signal(signal.SIGALRM, stuck)
    signal.alarm(120)  # the old code left the parent waiting forever for the batch the child took
    try:
        said = _in_child(lambda: next(it))
        assert said.startswith("ConcurrentIterationError") and "fork()" in said and str(os.getpid()) in said
        # the child may start a pass of its own (its own workers), and closing its copy leaves the parent's
        fresh = _in_child(lambda: sorted(int(v) for b in loader for v in b.flatten()) == list(range(96)))
        assert fresh == "True"
        _in_child(loader.close)
        rest = [int(v) for b in it for v in b.flatten()]
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    assert [int(v) for v in first.flatten()] + rest == list(range(96))
    assert sorted(int(v) for b in loader for v in b.flatten()) == list(range(96))  # the next pass too
    loader.close()
