"""What the doctor learns of a Dataset: random transforms, random __getitem__, importable name, image folder."""

import random

import numpy as np
import torch

from stoker.doctor.dataset_facts import draws_randomly, image_root, importable_ref, random_transforms, same


class RandomResizedCrop:
    def __call__(self, x):
        return x


class Normalize:
    def __call__(self, x):
        return x


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms


class Crops(torch.utils.data.Dataset):
    """Draws a random crop of a fixed image per call, as torchvision's RandomCrop does."""

    def __init__(self, transform=None):
        self.image = torch.arange(64.0).reshape(8, 8)
        self.transform = transform

    def __len__(self):
        return 4

    def __getitem__(self, i):
        y, x = torch.randint(0, 5, (2,)).tolist()
        return self.image[y : y + 4, x : x + 4] + i, i


class Fixed(torch.utils.data.Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        return {"x": np.full(3, float(i)), "y": torch.tensor([i, np.nan])}


class NeedsArgs(torch.utils.data.Dataset):
    def __init__(self, n):
        self.n = n


module_level_set = NeedsArgs(3)


def test_random_transforms_are_found_in_nested_attributes():
    ds = Crops(Compose([Compose([RandomResizedCrop()]), Normalize()]))
    assert random_transforms(ds) == ("RandomResizedCrop",)
    assert random_transforms(Crops(Compose([Normalize()]))) == ()


def test_a_random_getitem_is_told_and_the_random_streams_are_restored():
    torch.manual_seed(0)
    random.seed(1)
    np.random.seed(2)
    expected = (torch.rand(1), random.random(), np.random.rand())
    torch.manual_seed(0)
    random.seed(1)
    np.random.seed(2)
    assert draws_randomly(Crops(), 0) is True
    assert (torch.rand(1), random.random(), np.random.rand()) == expected  # the script draws what it would have


def test_a_deterministic_getitem_is_told_even_with_nan():
    assert draws_randomly(Fixed(), 1) is False


def test_a_getitem_that_raises_is_unknown():
    assert draws_randomly(Fixed(), "no such row") is None


def test_same_compares_containers_and_refuses_mismatched_types():
    assert same((torch.ones(2), 1), (torch.ones(2), 1)) is True
    assert same([np.zeros(2)], [np.ones(2)]) is False
    assert same({"a": 1}, {"b": 1}) is False
    assert same(torch.ones(2), np.ones(2)) is False


def test_importable_ref_prefers_a_module_level_name_then_a_class_without_arguments():
    assert importable_ref(module_level_set) == (f"{__name__}:module_level_set", "")
    assert importable_ref(Fixed()) == (f"{__name__}:Fixed", "")
    ref, note = importable_ref(NeedsArgs(1))
    assert ref == "" and "NeedsArgs() needs arguments" in note


def test_image_root_from_a_folder_attribute_or_a_list_of_samples(tmp_path):
    for cls in ("cat", "dog"):
        (tmp_path / "photos" / cls).mkdir(parents=True)
        (tmp_path / "photos" / cls / "1.jpg").write_bytes(b"\xff\xd8")
    ds = Fixed()
    ds.root = str(tmp_path / "photos")
    assert image_root(ds) == str(tmp_path / "photos")
    listed = Fixed()
    listed.samples = [(tmp_path / "photos" / c / "1.jpg", i) for i, c in enumerate(("cat", "dog"))]
    assert image_root(listed) == str(tmp_path / "photos")
    empty = Fixed()
    empty.root = str(tmp_path)  # images two levels down only: not a folder stoker convert images reads
    assert image_root(empty) == ""
