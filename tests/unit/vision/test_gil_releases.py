"""How often the threaded image reader gives the GIL up and takes it back, counted (not timed).

Each release is a point where a worker thread may wait up to the switch interval (5 ms) for a
training step that holds the GIL, so the count per image is what the threads engine pays beside a
Python-heavy step. ``benchmarks/gil_meter.py`` counts them with a preloaded wrapper of
``PyEval_SaveThread``; the count depends on the code only, not on the machine's load.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import stoker

BENCHMARKS = Path(__file__).resolve().parents[3] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
import gil_meter  # noqa: E402

CHILD = """
import sys, threading
import numpy as np
sys.path.insert(0, sys.argv[2])
from gil_meter import GilMeter
from stoker import vision
from stoker.pipeline.threads import one_torch_thread_here

src = vision.ImageSource(sys.argv[1], vision.train_transforms(24, normalize=False))
meter, out = GilMeter(), []

def run():
    one_torch_thread_here()  # as in a loader's worker thread
    idx = np.arange(len(src))
    src.read_batch(idx)  # warm: imports, per-thread scratch rows
    before = meter.read()
    for _ in range(4):
        src.read_batch(idx)
    after = meter.read()
    out.append((after.releases - before.releases - 2) / 4)  # per batch; 2: the meter's own second read

worker = threading.Thread(target=run)
worker.start()
worker.join()
print(out[0])
"""


def test_the_threaded_reader_takes_the_gil_back_at_most_six_times_per_image(folder, tmp_path):
    """Per image: the decode (2), torch.from_numpy (2), the resample kernel (1), the flip/layout copy (1);
    per batch a few more. Old code: 85 per batch of 12 (7 per image: simplejpeg's header call too). The
    batch's random numbers are numpy operations kept under numpy's 500-element release threshold."""
    lib = gil_meter.build(str(tmp_path))
    if lib is None:
        pytest.skip("no C compiler to build benchmarks/gil_meter.py's wrapper")
    store = stoker.convert.images(folder, tmp_path / "enc").path
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(store), str(BENCHMARKS)],
        env=gil_meter.preload_env(lib),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    per_batch, images = float(done.stdout.strip().splitlines()[-1]), len(stoker.open(store))
    assert 5 * images <= per_batch <= 6 * images + 5, per_batch / images  # + a few per batch (buffers, labels)
