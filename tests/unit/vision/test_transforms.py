from __future__ import annotations

import enum

import numpy as np
import pytest

from stoker.errors import ConfigError
from stoker.vision import compose as C
from stoker.vision import transforms as T
from stoker.vision.errors import ImageError


def rng(i: int = 0) -> np.random.Generator:
    return np.random.default_rng((0, 0, i))


def test_resize_int_sizes_the_shorter_side_like_torchvision():
    view = C.Compose((T.Resize(256),)).plan(375, 500, None)
    assert (view.height, view.width) == (256, 341)  # int(256 * 500 / 375)
    view = C.Compose((T.Resize(256),)).plan(500, 375, None)
    assert (view.height, view.width) == (341, 256)
    assert (view.left, view.top, view.right, view.bottom) == (0, 0, 375, 500)


def test_resize_then_center_crop_maps_back_to_source_pixels():
    view = C.Compose((T.Resize(100), T.CenterCrop(50))).plan(200, 400, None)
    assert (view.height, view.width) == (50, 50)
    # 200x400 -> 100x200; center 50x50 is x 75..125, y 25..75; in source pixels x2
    assert (view.left, view.top, view.right, view.bottom) == (150, 50, 250, 150)


def test_random_resized_crop_stays_inside_and_follows_scale_and_ratio():
    op = T.RandomResizedCrop(64, scale=(0.2, 0.5), ratio=(0.75, 1.333))
    for i in range(200):
        v = C.Compose((op,)).plan(300, 400, rng(i))
        assert (v.height, v.width) == (64, 64)
        assert 0 <= v.left < v.right <= 400 and 0 <= v.top < v.bottom <= 300
        area = (v.right - v.left) * (v.bottom - v.top) / (300 * 400)
        assert 0.19 <= area <= 0.51
        assert 0.74 <= (v.right - v.left) / (v.bottom - v.top) <= 1.34


def test_random_resized_crop_falls_back_to_a_central_crop_on_extreme_images():
    v = C.Compose((T.RandomResizedCrop(32, scale=(0.9, 1.0), ratio=(1.0, 1.0)),)).plan(10, 1000, rng())
    assert (v.right - v.left, v.bottom - v.top) == (10, 10)
    assert v.left == (1000 - 10) // 2


def test_same_rng_same_plan_different_rows_differ():
    c = C.train_transforms(224)
    plans = [c.plan(375, 500, rng(i)) for i in range(20)]
    assert c.plan(375, 500, rng(3)) == plans[3]
    assert len(set(plans)) > 15


def test_flip_mirrors_a_later_crop():
    c = C.Compose((T.RandomHorizontalFlip(p=1.0), T.RandomCrop((10, 20))))
    v = c.plan(10, 100, np.random.default_rng(5))
    unflipped = C.Compose((T.RandomCrop((10, 20)),)).plan(10, 100, _after_one_draw(5))
    assert v.flip and v.left == 100 - unflipped.right


def _after_one_draw(seed: int) -> np.random.Generator:
    g = np.random.default_rng(seed)
    g.random()
    return g


def test_flip_probability():
    c = C.Compose((T.RandomHorizontalFlip(0.3),))
    flips = np.mean([c.plan(8, 8, rng(i)).flip for i in range(2000)])
    assert 0.25 < flips < 0.35


def test_center_crop_larger_than_image_is_an_image_error():
    with pytest.raises(ImageError, match="smaller than the 64x64 crop"):
        C.Compose((T.CenterCrop(64),)).plan(32, 100, None)


def test_out_size_is_declared_before_running():
    assert C.train_transforms(224).out_size() == (224, 224)
    assert C.eval_transforms(224).out_size() == (224, 224)
    assert C.Compose((T.Resize(256),)).out_size() is None
    assert C.Compose((T.Resize((30, 40)),)).out_size() == (30, 40)
    assert C.Compose((T.RandomHorizontalFlip(),)).out_size((5, 6)) == (5, 6)


def test_torchvision_interpolation_mode_values_are_accepted():
    class InterpolationMode(enum.Enum):  # what torchvision.transforms.InterpolationMode looks like
        BICUBIC = "bicubic"

    assert T.Resize(10, interpolation=InterpolationMode.BICUBIC).interpolation == "bicubic"
    with pytest.raises(ConfigError):
        T.Resize(10, interpolation="lanczos-ish")


@pytest.mark.parametrize(
    "bad",
    [
        lambda: T.Resize(0),
        lambda: T.CenterCrop((1, 2, 3)),
        lambda: T.RandomResizedCrop(8, scale=(0.5, 0.1)),
        lambda: T.RandomHorizontalFlip(1.5),
        lambda: T.Normalize((0.5, 0.5), (1, 1, 1)),
        lambda: C.Compose((T.Normalize(), T.CenterCrop(3))),
        lambda: C.Compose((object(),)),
    ],
)
def test_bad_options_are_config_errors(bad):
    with pytest.raises(ConfigError):
        bad()


def test_normalize_expands_one_value_to_three_channels():
    n = T.Normalize((0.5,), (0.25,))
    assert n.mean == (0.5, 0.5, 0.5) and n.std == (0.25, 0.25, 0.25)


def test_as_compose_takes_lists_and_compose_like_objects():
    class TorchvisionCompose:
        transforms = [T.CenterCrop(4)]

    assert C.as_compose([T.CenterCrop(4)]).out_size() == (4, 4)
    assert C.as_compose(TorchvisionCompose()).out_size() == (4, 4)
    assert C.as_compose(None).transforms == ()


def test_compose_survives_pickling_and_compares_by_its_transforms():
    import pickle
    import random

    from stoker.vision import RandomHorizontalFlip, RandomResizedCrop
    from stoker.vision.compose import Compose

    c = Compose((RandomResizedCrop(32, interpolation="bicubic"), RandomHorizontalFlip()))
    back = pickle.loads(pickle.dumps(c))
    assert back == c and hash(back) == hash(c)
    assert back.geometric == c.geometric and back.interpolation == "bicubic"
    assert back.plan(100, 80, random.Random(3)) == c.plan(100, 80, random.Random(3))
