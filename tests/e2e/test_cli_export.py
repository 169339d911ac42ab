"""``stoker export STORE DIR``: the store as Arrow IPC files other tools open; an existing DIR needs --overwrite."""

from __future__ import annotations

import pyarrow.dataset as pds

from stoker.cli.main import main
from stoker.store.interop import tensor


def test_export_writes_ipc_files_and_refuses_an_existing_directory(mixed_store, mixed_columns, tmp_path, capsys):
    out = tmp_path / "exported"
    assert main(["export", str(mixed_store), str(out)]) == 0
    assert f"to {out}" in capsys.readouterr().out
    table = pds.dataset(out, format="arrow").to_table()
    assert (tensor(table, "image") == mixed_columns["image"]).all()
    assert main(["export", str(mixed_store), str(out), "--format", "parquet"]) == 1
    assert "--overwrite" in capsys.readouterr().err
    assert main(["export", str(mixed_store), str(out), "--format", "parquet", "--overwrite"]) == 0
    assert pds.dataset(out, format="parquet").count_rows() == 300
