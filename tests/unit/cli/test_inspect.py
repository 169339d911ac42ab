"""stoker.cli.inspect: ``stoker inspect --shards --verify`` names each shard's checksum and catches an altered one."""

from __future__ import annotations

from stoker.cli.main import main


def test_cli_verify_catches_an_altered_shard(mixed_store, capsys):
    assert main(["inspect", str(mixed_store), "--verify", "--shards"]) == 0
    assert "xxh3_128:" in capsys.readouterr().out
    shard = mixed_store / "shard-00000.arrow"
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, valid Arrow: only the checksum can tell
    shard.write_bytes(bytes(data))
    assert main(["inspect", str(mixed_store), "--verify"]) == 1
    assert "xxh3_128" in capsys.readouterr().err


def test_cli_inspect_without_verify_says_checksums_were_not_checked(mixed_store, capsys):
    assert main(["inspect", str(mixed_store)]) == 0
    assert "checksums not checked: --verify" in capsys.readouterr().out
    assert main(["inspect", str(mixed_store), "--verify"]) == 0
    out = capsys.readouterr().out
    assert "verified: all" in out and "not checked" not in out
