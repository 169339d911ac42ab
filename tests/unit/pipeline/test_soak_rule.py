"""The soak run's pass rule (``benchmarks/soak.py``): a warm-up that settles passes, growth after it
fails, a descriptor left open per epoch fails, and the band it judges by is the one it prints."""

import importlib.util
from pathlib import Path

SOAK = Path(__file__).resolve().parents[3] / "benchmarks" / "soak.py"
_spec = importlib.util.spec_from_file_location("soak", SOAK)
soak = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(soak)

MIB = 2**20


def run(owned_mib, fds=None):
    """A run of one sample per epoch with these anon+shm PSS figures (MiB) and epoch-end fd counts."""
    epochs = len(owned_mib)
    fds = fds or [5] * epochs
    samples = [{"epoch": e, "owned": int(m * MIB)} for e, m in enumerate(owned_mib)]
    ends = [{"epoch": e, "fds": fds[e], "threads": 3, "shm": 0} for e in range(epochs)]
    return {"epochs": epochs, "samples": samples, "ends": ends, "checksums": ["64:abc"] * epochs}


def verdict(r, tolerance=0.02, floor_mib=4.0, warmup=0.25):
    return soak.verdict(r, tolerance, int(floor_mib * MIB), soak.warmup_epochs(r, warmup))


def test_a_warm_up_that_settles_passes_and_growth_after_it_fails():
    ramp = [314.7, 319.8, 324.2, 325.8, 327.2] + [327.0, 325.4, 324.3, 328.5, 324.3] * 3  # images, measured
    assert verdict(run(ramp)) == []
    leak = [326.4 + 0.8 * e for e in range(20)]  # 0.8 MiB more every epoch
    assert any(v.startswith("owned left") for v in verdict(run(leak)))


def test_the_band_is_the_warm_up_range_widened_by_the_tolerance_and_the_floor():
    r = run([100, 104] + [103] * 6)
    low, high = soak.band(r, "owned", 0.02, 4 * MIB, soak.warmup_epochs(r, 0.25))
    assert (low, high) == (100 * MIB * 0.98 - 4 * MIB, 104 * MIB * 1.02 + 4 * MIB)
    assert verdict(run([100, 104] + [103] * 5 + [110.1])) != []  # above 110.08 MiB


def test_a_descriptor_left_open_every_epoch_fails_and_a_first_epoch_without_a_sample_fails():
    r = run([300.0] * 8, fds=[5, 5, 6, 7, 8, 9, 10, 11])
    assert any("fds not flat at epoch ends" in v for v in verdict(r))
    r = run([300.0] * 8)
    r["samples"] = r["samples"][2:]
    assert any("warm-up needs one" in v for v in verdict(r))
