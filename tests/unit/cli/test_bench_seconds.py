"""stoker bench: a measuring time that is no time is refused, not measured as a table of zeros."""

from __future__ import annotations

import numpy as np
import pytest

from stoker.cli.main import EXIT_ERROR, main


@pytest.mark.parametrize("seconds", ["-1", "0", "nan"])
def test_seconds_must_be_positive(tmp_path, capsys, seconds):
    np.savez(tmp_path / "a.npz", x=np.arange(10))
    assert main(["convert", "arrays", str(tmp_path / "a.npz"), str(tmp_path / "s"), "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["bench", str(tmp_path / "s"), "--workers", "0", "--seconds", seconds]) == EXIT_ERROR
    captured = capsys.readouterr()
    assert "--seconds must be a time > 0" in captured.err and "samples/s" not in captured.out
