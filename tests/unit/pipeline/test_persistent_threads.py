"""persistent_workers=True keeps a loader's worker threads between passes, until close()."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import torch

import stoker
from stoker.errors import WorkerError
from stoker.pipeline.autotune import AutoTuner


def _stoker_threads():
    return [t for t in threading.enumerate() if t.name.startswith("stoker-") and t.is_alive()]


@pytest.fixture
def store(tmp_path):
    return stoker.write(
        tmp_path / "s", {"x": np.arange(200, dtype=np.float32).reshape(100, 2), "label": np.arange(100)}
    )


def _epoch(loader):
    return np.concatenate([b["label"].numpy() for b in loader])


def test_threads_serve_every_pass_and_end_with_close(store):
    """Before, persistent_workers applied to worker processes only: each pass started and joined its
    threads (about 0.5 ms a pass, which short epochs feel)."""
    kept = stoker.Loader(store, batch_size=8, shuffle=True, num_workers=2, persistent_workers=True)
    fresh = stoker.Loader(store, batch_size=8, shuffle=True, num_workers=2)
    first = _epoch(kept)
    serving = _stoker_threads()
    assert len(serving) == 2
    second = _epoch(kept)
    assert _stoker_threads() == serving  # the same threads served the second pass
    np.testing.assert_array_equal(first, _epoch(fresh))  # the same batches as without
    np.testing.assert_array_equal(second, _epoch(fresh))
    assert sorted(second) == list(range(100))
    kept.close()
    assert not _stoker_threads()  # and the loader without persistent_workers left none after its passes


def test_a_pass_left_with_break_does_not_disturb_the_next(store):
    loader = stoker.Loader(store, batch_size=4, shuffle=True, num_workers=2, persistent_workers=True)
    for i, _ in enumerate(loader):
        if i == 3:
            break
    rows = _epoch(loader)
    assert sorted(rows) == list(range(100))
    loader.close()
    assert not _stoker_threads()


def test_threads_resized_by_the_online_tuner_are_kept_too(store):
    """Before, a loader with an "auto" setting started and joined its threads every pass."""
    kept = stoker.Loader(
        store,
        batch_size=8,
        shuffle=True,
        num_workers=2,
        prefetch_factor="auto",
        persistent_workers=True,
        engine="threads",
    )
    fresh = stoker.Loader(store, batch_size=8, shuffle=True, num_workers=2)
    first = _epoch(kept)
    serving = _stoker_threads()
    assert len(serving) == 2
    second = _epoch(kept)
    assert _stoker_threads() == serving
    np.testing.assert_array_equal(first, _epoch(fresh))
    np.testing.assert_array_equal(second, _epoch(fresh))
    kept.close()
    assert not _stoker_threads()


def test_a_pass_the_tuner_reads_inline_leaves_the_kept_threads_idle(store, monkeypatch):
    monkeypatch.setattr(AutoTuner, "step", lambda self, m: None)  # no decision inside a pass: set between them
    loader = stoker.Loader(
        store,
        batch_size=8,
        shuffle=True,
        num_workers="auto",
        prefetch_factor="auto",
        persistent_workers=True,
        engine="threads",
    )
    fresh = stoker.Loader(store, batch_size=8, shuffle=True, num_workers=0)
    loader._tuner._set(0, 2)
    np.testing.assert_array_equal(_epoch(loader), _epoch(fresh))
    assert not _stoker_threads()  # started inline: no thread yet
    loader._tuner._set(1, 2)
    np.testing.assert_array_equal(_epoch(loader), _epoch(fresh))
    serving = _stoker_threads()
    assert len(serving) == 1
    loader._tuner._set(0, 2)
    np.testing.assert_array_equal(_epoch(loader), _epoch(fresh))  # read inline, the kept thread idle
    assert _stoker_threads() == serving
    loader._tuner._set(2, 2)
    np.testing.assert_array_equal(_epoch(loader), _epoch(fresh))
    assert len(_stoker_threads()) == 2 and serving[0] in _stoker_threads()  # grown, not restarted
    loader.close()
    assert not _stoker_threads()


class _Stuck(torch.utils.data.Dataset):
    """A Dataset whose first read blocks for ``stall`` seconds."""

    def __init__(self, stall: float) -> None:
        self.stall = stall
        self.first = threading.Event()

    def __len__(self) -> int:
        return 16

    def __getitem__(self, i: int) -> dict:
        if not self.first.is_set():
            self.first.set()
            time.sleep(self.stall)
        return {"x": torch.tensor([float(i)])}


def test_a_timed_out_pool_is_not_reused():
    data = _Stuck(2.5)  # well past the timeout; the timeout well past a batch's read on a loaded machine
    loader = stoker.Loader(data, 4, num_workers=2, engine="threads", persistent_workers=True, timeout=1.0)
    with pytest.raises(WorkerError, match="not ready after timeout"):
        _epoch_x(loader)
    rows = _epoch_x(loader)  # a fresh pool: the stuck thread is not waited for
    assert sorted(rows) == [float(i) for i in range(16)]
    loader.close()
    for t in _stoker_threads():
        t.join(5)  # the stuck thread ends once its sleep does
    assert not _stoker_threads()


def _epoch_x(loader):
    return np.concatenate([b["x"].numpy().ravel() for b in loader]).tolist()
