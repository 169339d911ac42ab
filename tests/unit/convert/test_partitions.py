"""The plan of a Ray conversion, without Ray: default partition counts in whole waves of the task slots, text
ranges ending at newlines with the header put before each (``convert/partitions.py``, ``on_ray.waves``)."""

from __future__ import annotations

from stoker.convert.inputs import TextFiles
from stoker.convert.on_ray import waves
from stoker.convert.partitions import materialize, plan_text


def test_default_partitions_fill_whole_waves_of_the_slots():
    assert waves(1, 2) == 2  # at least one per slot
    assert waves(1_700, 1_600) == 3_200  # a second wave, full: half-size partitions, not a 6 %-full wave
    assert waves(3_200, 1_600) == 3_200
    assert waves(149_012, 1_600) == 150_400


def test_text_ranges_end_at_newlines_and_carry_the_header(tmp_path):
    src = tmp_path / "c.tsv"
    src.write_text("label\ttext\n" + "".join(f"a\tline {i}\n" for i in range(50)))
    parts = plan_text(TextFiles.of(src), 4)
    assert len(parts) == 4 and parts[0].header == 0 and all(p.header == 11 for p in parts[1:])
    body = b""
    for p in parts:
        path, newlines, _, ends = materialize(TextFiles.of(src), p, tmp_path)
        data = path.read_bytes()
        assert ends and data.endswith(b"\n") and (p.header == 0 or data.startswith(b"label\ttext\n"))
        body += data[p.header :]
    assert body == src.read_bytes()
