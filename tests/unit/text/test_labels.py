"""Label names get the same ids in every file: sorted names, or a map the user gives (text/labels.py)."""

import numpy as np
import pytest

import stoker
import stoker.convert
import stoker.text
from stoker.errors import ConfigError, InputError
from stoker.text import TextSource
from stoker.text.labels import label_map


def tsv(path, rows):
    path.write_text("label\ttext\n" + "".join(f"{label}\t{text}\n" for label, text in rows))
    return path


@pytest.fixture
def splits(tmp_path):
    train = tsv(tmp_path / "train.tsv", [("neg", "a bad film"), ("pos", "a good film"), ("neg", "dull")])
    val = tsv(tmp_path / "val.tsv", [("pos", "lovely"), ("neg", "awful"), ("pos", "great fun")])
    return train, val


def labels_of(loader):
    return np.concatenate([b["labels"].numpy() for b in loader]).tolist()


def test_train_and_val_number_the_names_alike_on_the_fly_and_from_a_store(tmp_path, splits):
    train, val = splits
    for data in (train, val, stoker.convert.text(val, tmp_path / "val_store", max_length=16)):
        loader = stoker.text.Loader(data, batch_size=8, bucketing=False)
        assert loader.label_names == ("neg", "pos")
        assert loader.source.class_to_idx == {"neg": 0, "pos": 1}
    assert labels_of(stoker.text.Loader(val, batch_size=8, bucketing=False)) == [1, 0, 1]
    stored = stoker.text.Loader(tmp_path / "val_store", batch_size=8, bucketing=False)
    assert labels_of(stored) == [1, 0, 1]
    assert stoker.open(tmp_path / "val_store").metadata["stoker.text"]["label_names"] == ["neg", "pos"]


def test_a_given_map_numbers_the_labels_and_a_label_outside_it_names_file_and_line(tmp_path, splits):
    train, val = splits
    loader = stoker.text.Loader(val, batch_size=8, bucketing=False, label_names=["pos", "neg"])
    assert loader.label_names == ("pos", "neg") and labels_of(loader) == [0, 1, 0]
    source = TextSource(val, class_to_idx={"neg": 1, "pos": 0})
    assert source.label_names == ("pos", "neg") and source.rows.labels.tolist() == [0, 1, 0]
    store = stoker.convert.text(val, tmp_path / "s", label_names=["pos", "neg", "neutral"])
    assert stoker.text.Loader(store, batch_size=8).label_names == ("pos", "neg", "neutral")
    with pytest.raises(InputError, match=r"val.tsv, line 3: label 'neg' is not in label_names") as err:
        stoker.text.Loader(val, batch_size=8, label_names=["pos"])
    assert err.value.line == 3 and err.value.path == val
    with pytest.raises(InputError, match=r"val.tsv, line 3: label 'neg'"):
        stoker.convert.text(val, tmp_path / "s2", label_names=["pos"])
    assert not (tmp_path / "s2").exists()
    with pytest.raises(InputError, match=r"a list of 2 examples, row 1: label 7 is not"):
        TextSource([("a", 3), ("b", 7)], label_names=["3"])


def test_a_store_refuses_another_map_than_its_own(tmp_path, splits):
    store = stoker.convert.text(splits[0], tmp_path / "s")
    assert stoker.text.Loader(store, batch_size=4, label_names=["neg", "pos"]).label_names == ("neg", "pos")
    with pytest.raises(ConfigError, match=r"differ from the store's \['neg', 'pos'\]"):
        stoker.text.Loader(store, batch_size=4, label_names=["pos", "neg"])


def test_numbers_stay_numbers_and_a_map_without_labels_is_refused(tmp_path):
    loader = stoker.text.Loader({"text": ["a", "b", "c"], "label": [10, 2, 7]}, batch_size=4, bucketing=False)
    assert loader.label_names is None and labels_of(loader) == [10, 2, 7]
    with pytest.raises(ConfigError, match="has no labels") as err:
        stoker.text.Loader(["a", "b"], batch_size=2, label_names=["x"])
    assert err.value.option == "label_names"


def test_bad_maps_are_refused_naming_the_option():
    assert label_map(["b", "a"]) == ("b", "a") and label_map(None, {"b": 1, "a": 0}) == ("a", "b")
    assert label_map(["a", "b"], {"a": 0, "b": 1}) == ("a", "b")
    for names, mapping, option in [
        ("ab", None, "label_names"),
        (["a", "a"], None, "label_names"),
        (None, {"a": 0, "b": 2}, "class_to_idx"),
        (None, {"a": 0, "b": 0}, "class_to_idx"),
        (["b", "a"], {"a": 0, "b": 1}, "class_to_idx"),
    ]:
        with pytest.raises(ConfigError) as err:
            label_map(names, mapping)
        assert err.value.option == option


def test_whole_numbers_among_float_labels_convert_as_floats_in_every_block(tmp_path):
    # The converter codes labels block by block (8,192 rows); a first block of whole numbers once
    # came out int64 and the float block after it was refused by the int64 column.
    n = stoker.text.inputs.BLOCK_ROWS + 10
    labels = [i % 3 for i in range(n - 10)] + [0.5] * 10
    data = {"text": [f"line {i}" for i in range(n)], "label": labels}
    store = stoker.convert.text(data, tmp_path / "store", max_length=8)
    stored = labels_of(stoker.text.Loader(store, batch_size=4096, shuffle=False, bucketing=False))
    on_the_fly = labels_of(stoker.text.Loader(data, batch_size=4096, shuffle=False, bucketing=False, max_length=8))
    assert stored == on_the_fly == [float(v) for v in labels]
    assert stoker.text.Loader(store, batch_size=2).source.label_names is None


@pytest.mark.parametrize("kind", ["numpy", "torch", "pandas"])
def test_array_label_columns_read_as_plain_values_without_a_check_per_label(kind, monkeypatch):
    import stoker.text.labels as labels_module
    from stoker.text.inputs import TextColumns, read_table

    calls = []
    real = labels_module.label_kind
    monkeypatch.setattr(labels_module, "label_kind", lambda v: calls.append(v) or real(v))
    ints, floats = np.arange(1000) % 7, (np.arange(1000) % 7 / 2).astype(np.float32)
    if kind == "torch":
        import torch

        ints, floats = torch.from_numpy(ints), torch.from_numpy(floats)
    elif kind == "pandas":
        import pandas

        index = np.random.default_rng(0).permutation(1000)  # positions, not index labels, line up with the texts
        ints, floats = pandas.Series(ints, index=index), pandas.Series(floats, index=index)
    texts = [f"text {i}" for i in range(1000)]
    coded = read_table({"text": texts, "label": ints}, TextColumns())
    assert coded.labels.dtype == np.int64 and coded.labels.tolist() == (np.arange(1000) % 7).tolist()
    coded = read_table({"text": texts[:-1] + [" "], "label": floats}, TextColumns(keep_empty=False))
    assert coded.labels.dtype == np.float32 and np.array_equal(
        coded.labels, (np.arange(999) % 7 / 2).astype(np.float32)
    )
    assert len(calls) < 10  # one C-level pass over the values, not a Python check of each of the 2,000
