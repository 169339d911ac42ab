"""The doctor's records and their wire format: every record round-trips, in either hot-path form."""

import importlib.util
import json
import sys
from dataclasses import FrozenInstanceError
from pathlib import Path

import pytest

import stoker.doctor.events as events
from stoker.doctor.events import (
    BatchDesc,
    BatchSeen,
    DeviceStep,
    LoaderDesc,
    LoaderSeen,
    Meta,
    Probe,
    StageSpan,
    Step,
    TensorDesc,
    as_json,
    decode_line,
    encode_line,
    from_wire,
    to_wire,
)
from stoker.pipeline.observe import LoaderInfo

DESC = LoaderDesc(
    kind="torch",
    name="DataLoader(Toy)",
    source="Toy",
    source_id=7,
    num_workers=2,
    batch_size=32,
    variable="train_loader",
    dataset_ref="train:train_set",
    image_root="/data/photos",
    random_transforms=("RandomResizedCrop", "ColorJitter"),
)
BATCH = BatchDesc("dict", (TensorDesc("input_ids", "int64", (32, 128), "cpu"),), padding=0.25)
RECORDS = [
    LoaderSeen(1, DESC),
    Step(1, 2.0, 2.5),
    StageSpan(1, "read", 123, 2.0, 2.25),
    StageSpan(7, "fetch", 123, 2.0, 2.25, 32),
    BatchSeen(1, BATCH),
    Probe(7, True, 0),
    Probe(7, None, 3),
    Meta(pid=10, ppid=1, start=0.5),
    Meta(argv=("train.py", "--epochs", "1")),
    Meta(pid=11, ppid=10, start=0.75, forked=True),
    Meta(pid=11, end=9.5, cost_s=0.25),
    DeviceStep(1, 2.5, 2.75, 2, 1, 2, 4096, 0.002, 1, 0.004, (".item()",)),
]


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: type(r).__name__)
def test_every_record_round_trips_through_the_wire(record):
    wire = json.loads(json.dumps(to_wire(record)))
    assert wire[0] == type(record).TAG
    assert from_wire(wire) == record


def test_the_wire_is_the_tag_then_the_fields_with_nested_records_as_objects():
    assert to_wire(Step(1, 2.0, 2.5)) == ["step", 1, 2.0, 2.5]
    assert to_wire(StageSpan(1, "read", 123, 2.0, 2.25)) == ["stage", 1, "read", 123, 2.0, 2.25, 1]
    assert to_wire(StageSpan(7, "fetch", 5, 2.0, 2.25, 32))[-1] == 32  # the samples of one fetch
    assert from_wire(["stage", 1, "read", 123, 2.0, 2.25]).items == 1  # a line written before items existed
    loader = to_wire(LoaderSeen(1, DESC))
    assert loader[:2] == ["loader", 1] and loader[2]["source"] == "Toy" and loader[2]["kind"] == "torch"
    assert to_wire(Meta(pid=3, end=9.0)) == ["meta", 3, None, None, 9.0, None, False, None, None]


def test_the_hot_path_tuple_encodes_as_its_record():
    assert to_wire((Step, 1, 2.0, 2.5)) == to_wire(Step(1, 2.0, 2.5))
    assert to_wire((StageSpan, 1, "read", 5, 2.0, 2.25, 1)) == to_wire(StageSpan(1, "read", 5, 2.0, 2.25))


def test_a_line_holds_many_events_and_a_torn_or_foreign_line_is_refused():
    line = encode_line([(Step, 1, 0.0, 1.0), *RECORDS])
    assert line.endswith("\n") and line.count("\n") == 1
    assert decode_line(line) == [Step(1, 0.0, 1.0), *RECORDS]
    with pytest.raises(ValueError):
        decode_line(line[:20])
    with pytest.raises(ValueError, match="not a doctor event"):
        decode_line('[["tick", 1]]')


def test_records_of_a_copy_loaded_by_path_encode_the_same():
    # child.py loads events.py by path before the script imports stoker; the instrumentation's
    # records come from the package module, and the recorder of the copy must encode them.
    spec = importlib.util.spec_from_file_location("_copy_of_doctor_events", Path(events.__file__))
    copy = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = copy
    try:
        spec.loader.exec_module(copy)
        assert copy.Step is not Step
        line = copy.encode_line([Step(1, 0.0, 1.0), (StageSpan, 1, "read", 5, 0.0, 0.5), LoaderSeen(1, DESC)])
        assert decode_line(line) == [Step(1, 0.0, 1.0), StageSpan(1, "read", 5, 0.0, 0.5), LoaderSeen(1, DESC)]
    finally:
        del sys.modules[spec.name]


def test_a_stoker_loader_description_reuses_the_loader_info_fields():
    shared = {"name": "stoker.Loader(Squares)", "source": "Squares", "source_id": 5, "engine": "processes"}
    shared.update(
        num_workers=2,
        batch_size=None,
        prefetch_factor=4,
        pin_memory=True,
        device="cuda:0",
        store=False,
        persistent_workers=True,
    )
    desc = LoaderDesc.from_info(LoaderInfo(loader_id=99, **shared))
    assert desc == LoaderDesc(kind="stoker", **shared)
    with pytest.raises(FrozenInstanceError):
        desc.num_workers = 3  # type: ignore[misc]


def test_meta_records_merge_what_each_knows():
    start = Meta(pid=10, ppid=1, start=0.0)
    merged = start.merged(Meta(argv=("train.py",))).merged(Meta(pid=10, end=5.0))
    assert merged == Meta(pid=10, ppid=1, start=0.0, end=5.0, argv=("train.py",))


def test_as_json_is_the_report_form():
    assert as_json(BATCH) == {
        "type": "dict",
        "tensors": [{"path": "input_ids", "dtype": "int64", "shape": [32, 128], "device": "cpu"}],
        "padding": 0.25,
    }
    assert as_json(DESC)["source_id"] == 7
