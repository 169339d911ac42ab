"""stoker's entry point: an OSError that no library code wrapped is one line and exit code 1, not a traceback."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np

from stoker.cli.main import EXIT_ERROR, EXIT_USAGE, main


def test_a_store_path_under_a_file_is_one_error_line(tmp_path, capsys):
    np.savez(tmp_path / "x.npz", x=np.arange(6, dtype=np.int64))
    blocker = tmp_path / "file.txt"
    blocker.write_text("not a directory\n")
    code = main(["convert", "arrays", str(tmp_path / "x.npz"), str(blocker / "store")])
    err = capsys.readouterr().err
    assert code == EXIT_ERROR
    assert err.startswith("stoker: error: ") and err.count("\n") == 1
    assert str(blocker) in err and "choose another path" in err
    assert not (blocker.parent / "store").exists()


def test_a_closed_pipe_is_not_reported_as_an_error(tmp_path):
    """A BrokenPipeError is an OSError too: it still ends quietly (exit 1, nothing on stderr). The JSON of
    160 shards is longer than stdout's buffer, so the pipe breaks inside the command, not at the exit."""
    np.savez(tmp_path / "x.npz", x=np.arange(20_000, dtype=np.int64))
    argv = ["convert", "arrays", str(tmp_path / "x.npz"), str(tmp_path / "s"), "--no-progress", "--shard-size", "1KB"]
    assert main(argv) == 0
    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "stoker.cli.main", "inspect", str(tmp_path / "s"), "--json"],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=300,  # a hang bound, not a speed
        )
    finally:
        os.close(write)
    assert proc.returncode == EXIT_ERROR and proc.stderr == "", proc.stderr


def test_a_removed_command_says_what_replaced_it(capsys):
    code = main(["bench", "stores/photos"])
    err = capsys.readouterr().err
    assert code == EXIT_USAGE
    assert (
        err.startswith("stoker: error: 'stoker bench' was removed") and "stoker tune STORE --grid --only workers" in err
    )
