"""The store fuzzer, bounded for CI: every byte of a small store's first shard and manifest flipped,
every manifest edit, then random truncations, insertions and flips, with a fixed seed.

Goals (issue 15): 0 aborts, 0 hangs, 0 exceptions that are not StokerError, and with
``verify=True`` 0 silently wrong values (for a manifest nobody re-signed). Full length:
``benchmarks/fuzz_store.py --mutations 100000``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import storefuzz  # noqa: E402

pytestmark = pytest.mark.faults


def test_fuzzed_stores_fail_cleanly_or_read_right(tmp_path):
    report = storefuzz.run(4500, seed=15, workdir=tmp_path)
    assert report.mutations == 4500
    assert report.total("abort") == 0, report.details
    assert report.total("hang") == 0, report.details
    assert report.total("other_error") == 0, report.details
    verified = report.counts["verify=True,resigned=False"]
    assert verified["wrong"] == 0, report.details
    assert verified["stoker_error"] > 0 and report.total("equal") > 0  # the fuzzer damaged, and left some harmless


def test_the_fuzzer_counts_an_abort(tmp_path, monkeypatch):
    # a reader that dies must be counted (and the run go on), not take the test process down
    monkeypatch.setenv("STOKER_FUZZ_ABORT_AT", "2")
    report = storefuzz.run(5, seed=0, workdir=tmp_path)
    assert report.total("abort") == 1
    assert sum(sum(c.values()) for c in report.counts.values()) == 4 * 2 + 1
