import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
import torch

import stoker
from stoker.errors import ConfigError, EmptyDatasetError, StateError


def labels_of(loader):
    return np.concatenate([b["label"].numpy() for b in loader])


def test_batches_are_tensors_with_padded_sequences(mixed_store, mixed_columns):
    loader = stoker.Loader(mixed_store, batch_size=32, num_workers=2)
    batch = next(iter(loader))
    assert batch["image"].dtype == torch.uint8 and batch["image"].shape == (32, 4, 5, 3)
    assert batch["ids"].shape[0] == 32 and batch["ids"].dtype == torch.int32
    lengths = batch["ids_lengths"].numpy()
    assert batch["ids"].shape[1] == lengths.max()
    for row, n, label in zip(batch["ids"].numpy(), lengths, batch["label"].numpy()):
        np.testing.assert_array_equal(row[:n], mixed_columns["ids"][label])
        assert (row[n:] == 0).all()
    assert isinstance(batch["text"], list) and batch["text"][0] == mixed_columns["text"][int(batch["label"][0])]


def test_epoch_covers_every_row_once(mixed_store):
    loader = stoker.Loader(mixed_store, batch_size=32, shuffle=True, num_workers=2)
    assert len(loader) == 10
    first = labels_of(loader)
    second = labels_of(loader)
    assert sorted(first) == sorted(second) == list(range(300))
    assert not np.array_equal(first, second)
    assert loader.epoch == 2


def test_rows_in_a_batch_come_in_the_samplers_order(mixed_store):
    loader = stoker.Loader(mixed_store, batch_size=32, shuffle=True, seed=3)
    expected = list(loader.batch_sampler.batches(0))
    for batch, idx in zip(loader, expected):
        np.testing.assert_array_equal(batch["label"].numpy(), idx)  # as a torch DataLoader gives them


def test_pad_to_multiple_and_columns(mixed_store):
    loader = stoker.Loader(mixed_store, batch_size=16, columns=["ids", "label"], pad_to_multiple_of=8, pad_value=-1)
    for batch in loader:
        assert set(batch) == {"ids", "ids_lengths", "label"}
        assert batch["ids"].shape[1] % 8 == 0
        assert (batch["ids"][0, batch["ids_lengths"][0] :] == -1).all()


@pytest.mark.parametrize("workers_before,workers_after", [(2, 0), (0, 2), (1, 2)])
def test_resume_mid_epoch_with_other_worker_count(mixed_store, workers_before, workers_after):
    full = stoker.Loader(mixed_store, batch_size=16, shuffle=True, seed=9, num_workers=workers_before)
    it = iter(full)
    head = [next(it)["label"].numpy() for _ in range(7)]
    state = full.state_dict()
    tail = [b["label"].numpy() for b in it]
    resumed = stoker.Loader(mixed_store, batch_size=16, shuffle=True, seed=9, num_workers=workers_after)
    resumed.load_state_dict(state)
    again = [b["label"].numpy() for b in resumed]
    assert len(again) == len(tail) == len(full) - 7
    assert all(np.array_equal(a, b) for a, b in zip(again, tail))
    assert sorted(np.concatenate(head + again)) == list(range(300))


def test_state_after_a_whole_epoch_starts_the_next(mixed_store):
    loader = stoker.Loader(mixed_store, batch_size=50, shuffle=True)
    list(loader)
    state = loader.state_dict()
    assert state["epoch"] == 1 and state["batches_done"] == 0
    other = stoker.Loader(mixed_store, batch_size=50, shuffle=True)
    other.load_state_dict(state)
    np.testing.assert_array_equal(labels_of(other), labels_of(loader))


def test_load_state_refuses_another_order(mixed_store):
    state = stoker.Loader(mixed_store, batch_size=50, shuffle=True, seed=1).state_dict()
    with pytest.raises(StateError, match="seed"):
        stoker.Loader(mixed_store, batch_size=50, shuffle=True, seed=2).load_state_dict(state)
    with pytest.raises(StateError, match="batch_size"):
        stoker.Loader(mixed_store, batch_size=40, shuffle=True, seed=1).load_state_dict(state)
    with pytest.raises(StateError):
        stoker.Loader(mixed_store, batch_size=50).load_state_dict({"epoch": 1})


def test_ranks_partition_the_epoch(mixed_store):
    parts = [labels_of(stoker.Loader(mixed_store, batch_size=7, shuffle=True, rank=r, world_size=3)) for r in range(3)]
    lens = {len(stoker.Loader(mixed_store, batch_size=7, shuffle=True, rank=r, world_size=3)) for r in range(3)}
    assert len(lens) == 1
    assert sorted(np.concatenate(parts)) == list(range(300))


def test_collate_fn_on_store_batches(mixed_store):
    loader = stoker.Loader(
        mixed_store, batch_size=10, columns=["label"], collate_fn=lambda b: (b["label"] * 2, b["label"])
    )
    doubled, plain = next(iter(loader))
    assert torch.equal(doubled, plain * 2)


def test_set_epoch_and_len(mixed_store):
    loader = stoker.Loader(mixed_store, batch_size=64, shuffle=True, drop_last=True)
    assert len(loader) == 4
    loader.set_epoch(5)
    a = labels_of(loader)
    loader.set_epoch(5)
    np.testing.assert_array_equal(a, labels_of(loader))


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(batch_size=0), "batch_size"),
        (dict(batch_size=-3), "batch_size"),
        (dict(num_workers=-1), "num_workers"),
        (dict(prefetch_factor=0), "prefetch_factor"),
        (dict(shuffle="maybe"), "shuffle"),
        (dict(timeout=-1), "timeout"),
        (dict(bogus=1), "unknown loader option"),
        (dict(device="tpu9"), "device"),
    ],
)
def test_invalid_options(mixed_store, kwargs, match):
    with pytest.raises(ConfigError, match=match):
        stoker.Loader(mixed_store, **kwargs)


def test_cuda_without_gpu_is_a_clear_error(mixed_store):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(ConfigError, match="sees no CUDA device"):
        stoker.Loader(mixed_store, device="cuda")


def test_pin_memory_without_cuda_warns_and_copies_nothing(mixed_store):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.warns(UserWarning, match="pin_memory=True needs CUDA"):
        loader = stoker.Loader(mixed_store, batch_size=8, pin_memory=True, num_workers=0)
    assert next(iter(loader))["label"].shape == (8,)


def test_empty_cases(tmp_path, mixed_store):
    with pytest.raises(EmptyDatasetError, match="drop_last"):
        stoker.Loader(mixed_store, batch_size=1000, drop_last=True)

    class Empty(torch.utils.data.Dataset):
        def __len__(self):
            return 0

        def __getitem__(self, i):
            raise IndexError(i)

    with pytest.raises(EmptyDatasetError, match="no rows"):
        stoker.Loader(Empty())


def test_iterable_and_odd_data_are_refused():
    class Stream(torch.utils.data.IterableDataset):
        def __iter__(self):
            yield 1

    with pytest.raises(ConfigError, match="map-style"):
        stoker.Loader(Stream())
    with pytest.raises(ConfigError, match="cannot load from int"):
        stoker.Loader(5)


def test_cpu_batches_are_not_copied_twice(mixed_store):
    """The gathered buffer is the tensor's memory: no copy between the read and the user."""
    loader = stoker.Loader(mixed_store, batch_size=300, columns=["image"], num_workers=0)
    batch = next(iter(loader))
    pool_buffers = [b for bufs in loader.transfer.pool._free.values() for b in bufs]
    assert any(batch["image"].data_ptr() == b.ctypes.data for b in pool_buffers)


def test_small_batches_are_views_of_one_recycled_chunk_buffer(mixed_store):
    """Batches read together as a chunk share one pooled buffer (pinned on CUDA), recycled later.

    Chunks grow (1, 2, 4, ... batches): the fourth batch is the first of the third chunk, 4 batches."""
    loader = stoker.Loader(mixed_store, batch_size=10, columns=["image", "label"], num_workers=1)
    assert 10 * 7 <= len(loader.source)  # the third chunk holds batches 3-6

    def buffers() -> list[np.ndarray]:
        return [b for bufs in loader.transfer.pool._free.values() for b in bufs if b.shape[1:] == (4, 5, 3)]

    it = iter(loader)
    fourth = [next(it) for _ in range(4)][3]
    ptr = fourth["image"].data_ptr()
    holding = [b for b in buffers() if b.ctypes.data <= ptr < b.ctypes.data + b.nbytes]
    assert len(holding) == 1 and len(holding[0]) == 40  # one buffer for the chunk's 4 batches
    it.close()
    del fourth, holding
    for _ in range(3):
        for _ in loader:
            pass
    shapes = [b.shape for b in buffers()]
    assert max(shapes.count(s) for s in shapes) <= 4  # each chunk size's buffers recycled, pass after pass


def test_a_duck_typed_source_is_told_to_subclass_batchsource():
    class Duck:
        def __len__(self):
            return 3

        def read(self, chunk):
            return [{"x": np.asarray(c)} for c in chunk]

    with pytest.raises(stoker.errors.ConfigError, match="subclass stoker.BatchSource"):
        stoker.Loader(Duck(), batch_size=2)


def test_batch_sources_fill_from_the_loader_buffers(mixed_store):
    class Source(stoker.BatchSource):
        pool = None

        def __len__(self):
            return 20

        def use_buffers(self, pool):
            self.pool = pool

        def read(self, chunk):
            out = []
            for idx in chunk:
                buf = self.pool.get("x", (len(idx),), np.int64)
                buf[:] = idx
                out.append({"x": buf})
            return out

    source = Source()
    loader = stoker.Loader(source, batch_size=5, num_workers=0)
    assert source.pool is loader.transfer.pool
    batches = [b["x"] for b in loader]
    assert torch.equal(torch.cat(batches), torch.arange(20))


def test_held_batches_are_never_overwritten(mixed_store):
    loader = stoker.Loader(mixed_store, batch_size=100, columns=["image", "label"], shuffle=True, num_workers=2)
    kept = [(b["label"].clone(), b["image"]) for b in loader]
    kept += [(b["label"].clone(), b["image"]) for b in loader]
    ds = stoker.open(mixed_store)
    for labels, images in kept:
        np.testing.assert_array_equal(images.numpy(), ds.gather(labels.numpy(), ["image"])["image"])


def test_break_and_drop_leave_no_threads(mixed_store):
    loader = stoker.Loader(mixed_store, batch_size=8, num_workers=2)
    for i, _ in enumerate(loader):
        if i == 2:
            break
    it = iter(loader)
    next(it)
    del it
    assert [t for t in threading.enumerate() if t.name.startswith("stoker-")] == []


class Squares(torch.utils.data.Dataset):
    def __init__(self, n=100, fail_at=None):
        self.n, self.fail_at = n, fail_at

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == self.fail_at:
            raise ValueError(f"cannot read sample {i}")
        return {"x": torch.full((2, 2), float(i)), "y": i * i, "name": f"s{i}"}


@pytest.mark.parametrize("workers", [0, 2])
def test_torch_dataset_drop_in(workers, shm_clean):
    loader = stoker.Loader(Squares(), batch_size=16, shuffle=True, num_workers=workers)
    seen = []
    for batch in loader:
        assert batch["x"].shape[1:] == (2, 2) and batch["x"].dtype == torch.float32
        assert torch.equal(batch["y"], (batch["x"][:, 0, 0] ** 2).long())
        assert batch["name"] == [f"s{int(v)}" for v in batch["x"][:, 0, 0]]
        seen += batch["x"][:, 0, 0].long().tolist()
    assert sorted(seen) == list(range(100))


def test_dataset_error_names_the_index(shm_clean):
    loader = stoker.Loader(Squares(fail_at=37), batch_size=10, num_workers=2)
    with pytest.raises(ValueError, match="cannot read sample 37") as info:
        list(loader)
    assert any("dataset[37]" in n for n in info.value.__notes__)


def test_dataset_with_user_collate(shm_clean):
    def collate(samples):
        return torch.stack([s["x"] for s in samples]).sum(dim=(1, 2)), [s["name"] for s in samples]

    sums, names = next(iter(stoker.Loader(Squares(), batch_size=4, num_workers=2, collate_fn=collate)))
    assert sums.tolist() == [0.0, 4.0, 8.0, 12.0] and names == ["s0", "s1", "s2", "s3"]


def test_dataset_break_leaves_no_processes_or_segments(shm_clean):
    import multiprocessing as mp

    loader = stoker.Loader(Squares(1000), batch_size=10, num_workers=2, prefetch_factor=4)
    for i, _ in enumerate(loader):
        if i == 3:
            break
    assert [p for p in mp.active_children() if p.name.startswith("stoker-")] == []


def test_ctrl_c_cleans_up(tmp_path):
    """SIGINT in a training loop: the script exits, nothing remains in /dev/shm."""
    script = tmp_path / "train.py"
    script.write_text(
        textwrap.dedent(
            """
            import os, signal, sys, time, torch, stoker
            # Ctrl-C as in a terminal: a script started in the background by a shell inherits SIGINT
            # ignored, and Python then installs no KeyboardInterrupt handler
            signal.signal(signal.SIGINT, signal.default_int_handler)
            class Slow(torch.utils.data.Dataset):
                def __len__(self): return 10_000
                def __getitem__(self, i):
                    time.sleep(0.001)
                    return torch.zeros(1000)
            try:
                for i, b in enumerate(stoker.Loader(Slow(), batch_size=8, num_workers=2)):
                    if i == 5:
                        os.kill(os.getpid(), signal.SIGINT)
                        time.sleep(5)
            except KeyboardInterrupt:
                print("interrupted", flush=True)
                sys.exit(3)
            """
        )
    )
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=600)  # a hang bound
    assert proc.returncode == 3, err
    assert "interrupted" in out
    # the script's own segments (named by its pid): other processes on this machine may hold theirs
    assert [f for f in os.listdir("/dev/shm") if f.startswith(f"stoker_{proc.pid}_")] == []


def test_persistent_workers_serve_many_epochs(shm_clean):
    import multiprocessing as mp

    with stoker.Loader(Squares(64), batch_size=8, shuffle=True, num_workers=2, persistent_workers=True) as loader:
        pids = set()
        for _ in range(3):
            seen = sorted(int(v) for b in loader for v in b["x"][:, 0, 0])
            assert seen == list(range(64))
            pids.add(tuple(p.pid for p in loader._executor._pool._procs))
        assert len(pids) == 1  # the same processes every epoch
        for i, _ in enumerate(loader):  # leave an epoch early: the next one is still whole and right
            if i == 1:
                break
        loader.set_epoch(7)
        assert sorted(int(v) for b in loader for v in b["x"][:, 0, 0]) == list(range(64))
    assert [p for p in mp.active_children() if p.name.startswith("stoker-")] == []


def test_persistent_pool_is_closed_when_the_loader_is_dropped(shm_clean):
    import gc
    import multiprocessing as mp

    loader = stoker.Loader(Squares(32), batch_size=8, num_workers=2, persistent_workers=True)
    next(iter(loader))
    del loader
    gc.collect()
    assert [p for p in mp.active_children() if p.name.startswith("stoker-") and p.is_alive()] == []


def test_default_workers_read_small_batches_inline(tmp_path):
    from stoker.pipeline.schedule import usable_cores

    stoker.write(tmp_path / "small", {"x": np.zeros((100, 8), np.uint8)})
    stoker.write(tmp_path / "big", {"x": np.zeros((20, 256, 256), np.uint8)})
    assert stoker.Loader(tmp_path / "small", batch_size=10).num_workers == 0
    assert stoker.Loader(tmp_path / "big", batch_size=20).num_workers == usable_cores()
    assert stoker.Loader(tmp_path / "big", batch_size=20, num_workers=0).num_workers == 0
    assert stoker.Loader(Squares(), batch_size=4).num_workers == usable_cores()


def test_ragged_samples_get_a_collate_hint(shm_clean):
    class Ragged(torch.utils.data.Dataset):
        def __len__(self):
            return 8

        def __getitem__(self, i):
            return {"ids": torch.arange(i + 1), "y": i}

    with pytest.raises(ValueError, match=r"sample\['ids'\].*shapes differ.*collate_fn"):
        list(stoker.Loader(Ragged(), batch_size=4, num_workers=2))


class _StageLog(stoker.Observer):
    """An observer that records the stages it wraps (and which thread ran them) and the batches handed out."""

    def __init__(self):
        import contextlib
        import threading

        self.seen = []
        self.infos = []
        self.waits = []
        self._cm = contextlib.nullcontext()
        self._threading = threading

    def loader(self, info):
        self.infos.append(info)

    def span(self, info, stage):
        self.seen.append((stage, self._threading.get_ident()))
        return self._cm

    def batch(self, info, requested, ready, batch):
        self.waits.append(ready - requested)


def test_an_observer_times_every_stage_of_a_store(mixed_store):
    import threading

    loader = stoker.Loader(mixed_store, batch_size=64, num_workers=2, collate_fn=lambda b: b, columns=("label",))
    log = _StageLog()
    loader.register_observer(log)
    labels = np.concatenate([b["label"].numpy() for b in loader])
    assert sorted(labels.tolist()) == list(range(300))
    stages = [s for s, _ in log.seen]
    assert {"read", "collate", "transfer", "h2d_wait"} <= set(stages)
    assert stages.count("h2d_wait") == len(loader) == len(log.waits)
    assert all(w >= 0 for w in log.waits)
    main = threading.get_ident()
    assert all(t != main for s, t in log.seen if s == "read") and all(t == main for s, t in log.seen if s == "h2d_wait")
    (info,) = log.infos
    assert (
        info.loader_id == loader.observers.info.loader_id
        and info.store
        and info.engine == "threads"
        and info.num_workers == 2
    )


def test_an_observer_on_a_dataset_read_inline():
    class Squares:
        def __len__(self):
            return 10

        def __getitem__(self, i):
            return {"x": np.int64(i * i)}

    loader = stoker.Loader(Squares(), batch_size=4, num_workers=0)
    log = _StageLog()
    loader.register_observer(log)
    assert sum(len(b["x"]) for b in loader) == 10
    assert [s for s, _ in log.seen].count("read") == 3 and [s for s, _ in log.seen].count("collate") == 3
    assert log.infos[0].engine == "processes" and log.infos[0].source.endswith("Squares")


def test_a_registered_observer_sees_every_loader_built_after_it_until_removed(mixed_store):
    log = _StageLog()
    handle = stoker.register_observer(log)
    try:
        first = stoker.Loader(mixed_store, batch_size=100)
    finally:
        handle.remove()
    second = stoker.Loader(mixed_store, batch_size=100)
    list(first), list(second)
    assert [i.loader_id for i in log.infos] == [first.observers.info.loader_id]
    assert len(log.waits) == len(first)


def test_loader_ids_are_never_reused(mixed_store):
    seen = set()
    for _ in range(50):  # dropped at once: id() would hand the same address out again
        seen.add(stoker.Loader(mixed_store, batch_size=8).observers.info.loader_id)
    assert len(seen) == 50


def test_two_observers_each_time_every_stage_their_spans_nested(mixed_store):
    import contextlib

    events = []

    class Nested(stoker.Observer):
        def __init__(self, name):
            self.name = name

        @contextlib.contextmanager
        def span(self, info, stage):
            events.append((self.name, "enter", stage))
            yield
            events.append((self.name, "exit", stage))

    loader = stoker.Loader(mixed_store, batch_size=100, num_workers=0)
    loader.register_observer(Nested("a"))
    loader.register_observer(Nested("b"))
    list(loader)
    assert events[:4] == [("a", "enter", "read"), ("b", "enter", "read"), ("b", "exit", "read"), ("a", "exit", "read")]
    assert len(events) % 4 == 0 and [e for e in events if e[0] == "a"] == [
        ("a",) + e[1:] for e in events if e[0] == "b"
    ]


def test_no_observer_by_default(mixed_store):
    assert not stoker.Loader(mixed_store, batch_size=8).observers


def test_observers_must_subclass_observer(mixed_store):
    with pytest.raises(TypeError, match="stoker.Observer"):
        stoker.Loader(mixed_store, batch_size=8).register_observer(object())


def test_a_tensordataset_is_read_batch_level_in_threads():
    from stoker.pipeline.columns import ArrayColumns

    x, y = torch.arange(600 * 3, dtype=torch.float32).reshape(600, 3), torch.arange(600)
    loader = stoker.Loader(torch.utils.data.TensorDataset(x, y), batch_size=64, shuffle=True, num_workers=2)
    assert isinstance(loader.source, ArrayColumns)
    seen = []
    for xb, yb in loader:
        assert torch.equal(xb, x[yb]) and xb.dtype == torch.float32
        seen.append(yb)
    assert loader.engine == "threads" and loader._executor is None  # no worker processes were started
    assert sorted(torch.cat(seen).tolist()) == list(range(600))


def test_tensordatasets_that_need_their_own_getitem_keep_the_process_path():
    x, y = torch.arange(40, dtype=torch.float32).reshape(20, 2), torch.arange(20)

    class Doubled(torch.utils.data.TensorDataset):
        def __getitem__(self, i):
            a, b = super().__getitem__(i)
            return a * 2, b

    plain = torch.utils.data.TensorDataset(x, y)
    for data, kwargs in (
        (Doubled(x, y), {}),
        (plain, {"collate_fn": lambda s: s}),
        (torch.utils.data.TensorDataset(x.bfloat16()), {}),
    ):
        loader = stoker.Loader(data, batch_size=5, num_workers=0, **kwargs)
        assert loader.source.dataset is data and loader.engine == "processes"
    xb, yb = next(iter(stoker.Loader(Doubled(x, y), batch_size=5, num_workers=0)))
    assert torch.equal(xb, x[yb] * 2)


def test_the_engine_switch_gives_the_same_batches(mixed_store, shm_clean):
    def run(data, **kw):
        return [b["label"].tolist() for b in stoker.Loader(data, batch_size=32, shuffle=True, seed=5, **kw)]

    on_threads = run(mixed_store, num_workers=2, columns=["label"])
    assert run(mixed_store, num_workers=2, columns=["label"], engine="processes") == on_threads

    class Rows(torch.utils.data.Dataset):
        def __len__(self):
            return 300

        def __getitem__(self, i):
            return {"label": i}

    # a store batch and a Dataset batch both come in the sampler's order
    assert run(Rows(), num_workers=2, engine="threads") == run(Rows(), num_workers=2) == on_threads


def test_an_unknown_engine_is_refused(mixed_store):
    with pytest.raises(stoker.errors.ConfigError, match="engine"):
        stoker.Loader(mixed_store, batch_size=8, engine="gpu")


@pytest.mark.parametrize("option", [{"columns": ["x"]}, {"pad_value": -1}, {"pad_to_multiple_of": 8}])
def test_store_options_for_a_source_that_is_not_a_store_are_refused(option):
    data = stoker.sources.Arrays(np.arange(10))
    with pytest.raises(stoker.errors.ConfigError, match=next(iter(option))):
        stoker.Loader(data, batch_size=2, **option)


def test_a_batch_sampler_must_subclass_batchsampler(mixed_store):
    with pytest.raises(stoker.errors.ConfigError, match="BatchSampler"):
        stoker.Loader(mixed_store, batch_sampler=[np.arange(3)])


class _EpochRows(stoker.BatchSource):
    """Rows whose values depend on the epoch, as augmentation does."""

    engine = "processes"

    def __init__(self):
        self.epoch = 0

    def __len__(self):
        return 12

    def set_epoch(self, epoch):
        self.epoch = epoch

    def read(self, chunk):
        return [{"x": np.asarray(idx) + 1000 * self.epoch} for idx in chunk]


@pytest.mark.parametrize("persistent", [False, True])
def test_worker_processes_learn_each_epoch(persistent, shm_clean):
    with stoker.Loader(_EpochRows(), batch_size=4, num_workers=2, persistent_workers=persistent) as loader:
        epochs = [sorted(int(v) // 1000 for b in loader for v in b["x"]) for _ in range(3)]
    assert epochs == [[0] * 12, [1] * 12, [2] * 12]


def _labels(batches):
    return [b["label"].tolist() for b in batches]


def test_a_peek_does_not_shift_the_epoch(mixed_store):
    def make():
        return stoker.Loader(mixed_store, batch_size=64, columns=["label"], shuffle=True, seed=1)

    reference = make()
    epochs = [_labels(reference), _labels(reference)]
    loader = make()
    next(iter(loader))  # a peek before training: it used up epoch 0
    assert _labels(loader) == epochs[1]  # the whole of the next epoch, from its first batch
    assert loader.epoch == 2


def test_passes_cut_short_each_get_a_new_order(mixed_store):
    loader = stoker.Loader(mixed_store, batch_size=16, columns=["label"], shuffle=True, seed=1)
    firsts = []
    for _ in range(3):
        for step, batch in enumerate(loader):  # a steps-per-epoch loop
            if step == 2:
                break
            firsts.append(batch["label"].tolist())
    assert len({str(b) for b in firsts}) == len(firsts)  # no pass replays another's batches
    loader.set_epoch(0)
    assert next(iter(loader))["label"].tolist() == firsts[0]  # set_epoch picks the epoch of the next pass


def test_an_eval_loop_that_breaks_sees_the_same_rows_each_time(mixed_store):
    loader = stoker.Loader(mixed_store, batch_size=32, columns=["label"])
    seen = []
    for _ in range(3):
        for i, batch in enumerate(loader):
            if i == 2:
                break
            seen.append(batch["label"].tolist())
    assert seen[0:2] == seen[2:4] == seen[4:6] and seen[0][0] == 0


def test_only_the_iteration_after_load_state_dict_continues_mid_epoch(mixed_store):
    def make():
        return stoker.Loader(mixed_store, batch_size=64, columns=["label"], shuffle=True, seed=1)

    full = _labels(make())
    first = make()
    it = iter(first)
    next(it), next(it)
    state = first.state_dict()
    it.close()
    resumed = make()
    resumed.load_state_dict(state)
    assert _labels(resumed) == full[2:]  # continues after the saved batches
    assert resumed.epoch == 1
    again = make()
    again.load_state_dict(state)
    for _ in zip(range(1), again):
        pass  # one batch of the resumed pass, then a break
    reference = make()
    list(reference)
    assert _labels(again) == _labels(reference)  # the next pass is the whole of the next epoch
