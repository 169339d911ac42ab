"""Bucketed text on the fly: batches handed out while the corpus is still being tokenized."""

import inspect
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest
import torch
from text_samples import SENTENCES

import stoker
import stoker.text
from stoker.text import LengthBuckets, TextSource
from stoker.text.spill import MEMORY_ENV, PREFIX

TEXTS = [f"{s} {i}" for i, s in enumerate(SENTENCES * 20)]
ROWS = {"text": TEXTS, "label": list(range(len(TEXTS)))}  # labels = row numbers: batches show their rows
OPTIONS = dict(batch_size=4, max_length=32, shuffle=True, seed=9, bucket_window=2)  # windows of 8 rows: 30 windows


class Gate:
    """Wraps the tokenizer of a loader: its first ``encode`` (one block of rows) passes, later ones
    wait for ``open`` (so the test decides when the background tokenization may go on)."""

    def __init__(self, loader):
        tok = loader.source.rows.tokenizer
        real = tok.encode
        self.calls = 0
        self.open, self.blocked = threading.Event(), threading.Event()

        def encode(*args, **kwargs):
            self.calls += 1
            if self.calls > 1:
                self.blocked.set()
                self.open.wait()
            return real(*args, **kwargs)

        object.__setattr__(tok, "encode", encode)


def labels(batches):
    return [b["labels"].numpy() for b in batches]


def eager_epoch(epoch=0):
    """The batches of the same sampler given every length up front."""
    lengths = TextSource(ROWS, max_length=32).lengths()
    buckets = LengthBuckets(lengths, 4, None, True, 9, 2, round_to=8)
    return buckets.epoch_batches(epoch)


def test_the_first_batch_comes_before_the_background_tokenization_ends():
    loader = stoker.text.Loader(ROWS, **OPTIONS)
    gate = Gate(loader)
    it = iter(loader)
    first = next(it)
    cache = loader.source.rows.cache
    assert not cache.complete and gate.calls >= 1  # the rest of the corpus waits at the gate
    gate.open.set()
    got = labels([first, *it])
    want = eager_epoch()
    assert len(got) == len(want) == len(loader) and all(np.array_equal(a, b) for a, b in zip(got, want))
    assert cache.complete and gate.blocked.is_set()


def test_the_first_batchs_rows_are_tokenized_by_the_thread_waiting_for_them():
    # no thread start and hand-off before the first batch: the background thread starts after it, for the rest
    loader = stoker.text.Loader(ROWS, **OPTIONS)
    tok = loader.source.rows.tokenizer
    real, callers = tok.encode, []

    def encode(*args, **kwargs):
        callers.append(threading.current_thread().name)
        return real(*args, **kwargs)

    object.__setattr__(tok, "encode", encode)
    got = labels(loader)
    assert callers[0] != "stoker-text-tokenize" and "stoker-text-tokenize" in callers[1:]
    want = eager_epoch()
    assert len(got) == len(want) and all(np.array_equal(a, b) for a, b in zip(got, want))


def test_the_streamed_epoch_equals_the_sampler_with_every_length_known():
    streamed = stoker.text.Loader(ROWS, **OPTIONS)
    got = labels(streamed)
    want = eager_epoch()
    assert all(np.array_equal(a, b) for a, b in zip(got, want)) and len(got) == len(want)
    assert all(np.array_equal(a, b) for a, b in zip(labels(streamed), eager_epoch(1)))  # from the cache


def test_len_is_known_before_the_corpus_is_tokenized():
    loader = stoker.text.Loader(ROWS, **OPTIONS)
    assert len(loader) == -(-len(TEXTS) // 4) and not loader.source.rows.cache.complete


def test_state_dict_mid_first_epoch_while_tokenizing_resumes_exactly():
    whole = labels(stoker.text.Loader(ROWS, **OPTIONS))
    loader = stoker.text.Loader(ROWS, **OPTIONS)
    gate = Gate(loader)
    it = iter(loader)
    seen = [next(it)["labels"].numpy()]  # the next batch may need a window behind the gate
    saved = {}
    saver = threading.Thread(target=lambda: saved.update(loader.state_dict()))
    saver.start()
    saver.join(0.2)
    assert saver.is_alive() and not saved  # its fingerprint covers every length: it waits for the gate
    gate.open.set()
    saver.join()
    assert saved["batches_done"] == 1 and saved["epoch"] == 0
    resumed = stoker.text.Loader(ROWS, **OPTIONS)
    resumed.load_state_dict(saved)
    tail = labels(resumed)
    got = seen + tail
    assert len(got) == len(whole) and all(np.array_equal(a, b) for a, b in zip(got, whole))


def test_resume_mid_first_epoch_on_a_fresh_loader_before_any_tokenization():
    whole = labels(stoker.text.Loader(ROWS, **OPTIONS))
    saved = stoker.text.Loader(ROWS, **OPTIONS)
    it = iter(saved)
    for _ in range(7):
        next(it)
    state = saved.state_dict()
    resumed = stoker.text.Loader(ROWS, **OPTIONS)
    resumed.load_state_dict(state)
    assert all(np.array_equal(a, b) for a, b in zip(labels(resumed), whole[7:]))


def docstring_texts():
    """Real English prose present wherever stoker runs: the docstrings of numpy, torch and some of
    the standard library (about 2,600 documents of up to thousands of tokens)."""
    import collections
    import json
    import logging
    import pathlib
    import typing
    import unittest

    import torch.nn.functional

    modules = (np, np.ma, np.linalg, np.random, torch, torch.nn, torch.nn.functional, torch.Tensor)
    docs, seen = [], set()
    for module in (*modules, collections, json, logging, pathlib, subprocess, tempfile, threading, typing, unittest):
        for _, obj in inspect.getmembers(module):
            try:
                doc = inspect.getdoc(obj) if callable(obj) or inspect.isclass(obj) else None
            except Exception:  # noqa: BLE001 - a member whose __doc__ cannot be read: not prose
                doc = None
            if doc and len(doc) > 40 and doc not in seen:
                seen.add(doc)
                docs.append(doc)
    return docs


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.filterwarnings("ignore::stoker.text.long_lines.LongLineWarning")
@pytest.mark.parametrize("kind", ["short lines", "long documents"])
def test_bucketed_padding_stays_under_5_percent_on_real_text(kind):
    docs = docstring_texts()
    if kind == "short lines":
        texts = sorted({line.strip() for d in docs for line in d.split("\n") if len(line.strip()) > 3})
        max_length = 128
    else:
        texts, max_length = docs, 512
    assert len(texts) > 2000
    loader = stoker.text.Loader(texts, batch_size=32, max_length=max_length, shuffle=True, pad_to_multiple_of=1)
    for _ in loader:
        pass
    report = loader.report()
    assert report.examples == len(texts) and report.padded_fraction <= 0.05


def test_spilled_ids_equal_the_in_memory_ones_and_go_on_close(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    memory = [b["input_ids"] for b in stoker.text.Loader(ROWS, **OPTIONS)]
    monkeypatch.setenv(MEMORY_ENV, "0")  # every byte to a file
    loader = stoker.text.Loader(ROWS, **OPTIONS)
    spilled = [b["input_ids"] for b in loader]
    spill = loader.source.rows.cache.spill_dir
    assert spill is not None and Path(spill).parent == tmp_path and Path(spill, "input_ids.bin").is_file()
    assert all(torch.equal(a, b) for a, b in zip(memory, spilled)) and len(memory) == len(spilled)
    again = [b["input_ids"] for b in loader]  # the second epoch reads the mapped file
    assert len(again) == len(memory)
    loader.close()
    assert not Path(spill).exists() and not list(tmp_path.iterdir())


def test_spilled_ids_go_when_a_loader_left_mid_epoch_is_collected(tmp_path, monkeypatch):
    import gc

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setenv(MEMORY_ENV, "0")
    loader = stoker.text.Loader(ROWS, **OPTIONS)
    for _ in loader:
        break
    spill = loader.source.rows.cache.spill_dir
    assert spill is not None and Path(spill).is_dir()
    del loader
    gc.collect()
    assert not Path(spill).exists()


def test_spill_files_of_a_killed_process_are_swept_by_the_next_cache(tmp_path):
    child = textwrap.dedent(
        f"""
        import sys, time, stoker.text
        loader = stoker.text.Loader({TEXTS!r}, batch_size=4, max_length=32, shuffle=True)
        it = iter(loader)
        next(it)
        print(loader.source.rows.cache.spill_dir, flush=True)
        time.sleep(600)
        """
    )
    env = {**os.environ, "TMPDIR": str(tmp_path), MEMORY_ENV: "0"}
    proc = subprocess.Popen([sys.executable, "-c", child], env=env, stdout=subprocess.PIPE, text=True)
    try:
        spill = Path(proc.stdout.readline().strip())
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert spill.is_dir() and spill.name.startswith(f"{PREFIX}{proc.pid}-")  # left behind by the kill
    survivor = subprocess.run(
        [sys.executable, "-c", "import stoker.text as t; list(t.Loader(['a b c'] * 50, batch_size=4, shuffle=True))"],
        env=env,
        check=True,
    )
    assert survivor.returncode == 0 and not spill.exists()


def test_an_error_in_the_background_tokenization_reaches_the_consumer():
    loader = stoker.text.Loader(ROWS, **OPTIONS)
    tok = loader.source.rows.tokenizer
    real, calls = tok.encode, []

    def encode(*args, **kwargs):
        calls.append(1)
        if len(calls) > 1:
            raise RuntimeError("tokenizer exploded")
        return real(*args, **kwargs)

    object.__setattr__(tok, "encode", encode)
    with pytest.raises(RuntimeError, match="tokenizer exploded") as err:
        list(loader)
    assert any("background tokenization" in note for note in getattr(err.value, "__notes__", []))


def test_the_first_batch_does_not_import_numpy_ma():
    # a plain np.unique imports numpy.ma (50-120 ms on 2 loaded cores): none on the path to the first batch
    child = textwrap.dedent(
        """
        import sys
        import stoker.text
        loader = stoker.text.Loader([f"w{i} " * (i % 9 + 1) for i in range(2000)], batch_size=4, shuffle=True)
        next(iter(loader))
        print("numpy.ma" in sys.modules)
        """
    )
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
