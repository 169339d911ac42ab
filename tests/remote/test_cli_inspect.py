"""``stoker inspect URL``: a remote store is named by its URL, not by the local cache directory it is read through."""

from __future__ import annotations

import json

import numpy as np

import stoker
from stoker.cli.main import main


def test_inspect_names_a_remote_store_by_its_url(s3, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("STOKER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("COLUMNS", "300")  # the store line is not wrapped
    url = f"s3://{s3.bucket()}/store"
    stoker.write(url, {"x": np.arange(10)})

    assert main(["inspect", url]) == 0
    out = capsys.readouterr().out
    assert url in out
    assert str(tmp_path / "cache") not in out

    assert main(["inspect", url, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["path"] == url
