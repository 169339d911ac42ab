"""The batched device ops (ColorJitter, RandomErasing, MixUp, CutMix) against references computed here."""

from __future__ import annotations

import colorsys
import random

import numpy as np
import pytest
import torch

from stoker.errors import ConfigError
from stoker.vision.batch_ops import ColorJitter, CutMix, Draw, MixUp, RandomErasing


def batch(n: int = 4, h: int = 6, w: int = 5, seed: int = 0) -> torch.Tensor:
    """Float pixel values 0..255, NCHW, as ``apply`` sees them before Normalize."""
    return torch.from_numpy(np.random.default_rng(seed).integers(0, 256, (n, 3, h, w)).astype(np.float32))


def rngs(n: int, seed: int = 0) -> list[random.Random]:
    return [random.Random(f"{seed}:{i}") for i in range(n)]


def run(op, x: torch.Tensor, labels=None, seed: int = 0):
    drawn = op.draw(rngs(len(x) if op.per_row else 1, seed), x.shape[2], x.shape[3])
    return apply(op, x, drawn, labels)


def apply(op, x: torch.Tensor, drawn: Draw, labels=None):
    rows = None if drawn.rows is None else torch.from_numpy(drawn.rows)
    return op.apply(x.clone(), labels, rows, drawn.host)


def gray(x: torch.Tensor) -> torch.Tensor:
    return (0.2989 * x[:, 0] + 0.587 * x[:, 1] + 0.114 * x[:, 2]).unsqueeze(1)


def test_color_jitter_factor_one_is_the_identity():
    x = batch()
    out, _ = run(ColorJitter(brightness=(1, 1), contrast=(1, 1), saturation=(1, 1), hue=(0, 0)), x)
    assert torch.equal(out, x)
    out, _ = run(ColorJitter(hue=(0.0, 0.0), brightness=(1.0, 1.0)), x)
    assert torch.equal(out, x)


def test_brightness_contrast_saturation_blend_as_torchvision_defines_them():
    x = batch()
    out, _ = run(ColorJitter(brightness=(0.5, 0.5)), x)
    assert torch.allclose(out, x * 0.5)
    out, _ = run(ColorJitter(brightness=(3.0, 3.0)), x)
    assert torch.allclose(out, (x * 3).clamp(0, 255))
    out, _ = run(ColorJitter(contrast=(0.25, 0.25)), x)
    mean = gray(x).mean(dim=(1, 2, 3), keepdim=True)
    assert torch.allclose(out, (0.25 * x + 0.75 * mean).clamp(0, 255), atol=1e-4)
    out, _ = run(ColorJitter(saturation=(0.0, 0.0)), x)
    assert torch.allclose(out, gray(x).expand_as(x), atol=1e-4)


def test_hue_rotates_like_colorsys():
    x = batch(n=2, h=3, w=4, seed=3)
    shift = 0.2
    out, _ = run(ColorJitter(hue=(shift, shift)), x)
    ref = np.empty_like(x.numpy())
    for n, yy, xx in np.ndindex(2, 3, 4):
        h, s, v = colorsys.rgb_to_hsv(*(x[n, :, yy, xx].numpy() / 255))
        ref[n, :, yy, xx] = np.array(colorsys.hsv_to_rgb((h + shift) % 1, s, v)) * 255
    assert np.allclose(out.numpy(), ref, atol=1e-3)
    red = torch.tensor([255.0, 0, 0]).view(1, 3, 1, 1)
    cyan, _ = run(ColorJitter(hue=(0.5, 0.5)), red)
    assert torch.allclose(cyan.flatten(), torch.tensor([0.0, 255, 255]))


def test_color_jitter_factors_are_drawn_per_image_within_their_ranges():
    drawn = ColorJitter(brightness=0.4, hue=0.1).draw(rngs(200), 8, 8)
    params = drawn.rows
    assert sorted(params[:, 0].tolist()) == list(range(200))  # every row once, grouped by order
    assert 0.6 <= params[:, 1].min() < params[:, 1].max() <= 1.4
    assert (params[:, 2] == 1).all() and (params[:, 3] == 1).all()  # contrast, saturation off
    assert -0.1 <= params[:, 4].min() < params[:, 4].max() <= 0.1
    groups = [drawn.host[g : g + 6] for g in range(0, len(drawn.host), 6)]
    assert 10 < len(groups) <= 24  # the order of the four parts varies per image
    assert groups[0][0] == 0 and groups[-1][1] == 200
    assert all(sorted(g[2:]) == [0, 1, 2, 3] and a[1] == b[0] for a, b, g in zip(groups, groups[1:], groups))


def test_each_image_gets_its_own_order_of_the_four_parts():
    x = batch(n=40, seed=2)
    op = ColorJitter(brightness=(0.3, 0.3), saturation=(2.0, 2.0))
    drawn = op.draw(rngs(40), x.shape[2], x.shape[3])
    out, _ = apply(op, x, drawn)
    bright_first = (x * 0.3).clamp(0, 255)
    bright_first = (2.0 * bright_first - gray(bright_first)).clamp(0, 255)
    sat_first = (2.0 * x - gray(x)).clamp(0, 255)
    sat_first = (sat_first * 0.3).clamp(0, 255)
    orders = {}
    for g in range(0, len(drawn.host), 6):
        start, stop, *order = (int(v) for v in drawn.host[g : g + 6])
        for k in drawn.rows[start:stop, 0].astype(int):
            orders[k] = order.index(0) < order.index(2)  # brightness before saturation
    assert set(orders.values()) == {True, False}
    for k, bright_before in orders.items():
        ref = bright_first[k] if bright_before else sat_first[k]
        assert torch.allclose(out[k], ref, atol=1e-3)


def test_random_erasing_writes_the_value_in_one_box_per_image():
    x = batch(n=8, h=20, w=20)
    op = RandomErasing(p=1.0, scale=(0.1, 0.2), value=7)
    drawn = op.draw(rngs(8), 20, 20)
    out, _ = apply(op, x, drawn)
    for k, (top, left, h, w) in enumerate(drawn.rows.astype(int).tolist()):
        assert h > 0 and w > 0 and 0.1 * 400 * 0.7 <= h * w <= 0.2 * 400 * 1.3
        box = out[k, :, top : top + h, left : left + w]
        assert (box == 7).all()
        rest = out[k].clone()
        rest[:, top : top + h, left : left + w] = x[k, :, top : top + h, left : left + w]
        assert torch.equal(rest, x[k])  # nothing outside the box changed


def test_random_erasing_with_p_zero_is_the_identity_and_takes_a_value_per_channel():
    x = batch()
    out, _ = run(RandomErasing(p=0.0), x)
    assert torch.equal(out, x)
    op = RandomErasing(p=1.0, scale=(0.49, 0.49), ratio=(1, 1), value=(1, 2, 3))
    drawn = op.draw(rngs(1), 10, 10)
    top, left, h, w = drawn.rows[0].astype(int).tolist()
    assert (h, w) == (7, 7)  # round(sqrt(49))
    out, _ = apply(op, batch(n=1, h=10, w=10), drawn)
    for c, value in enumerate((1, 2, 3)):
        assert (out[0, c, top : top + 7, left : left + 7] == value).all()


def test_mixup_mixes_each_image_and_label_with_the_previous_one_by_one_lambda():
    x = batch(n=4)
    labels = torch.tensor([0, 1, 2, 1])
    out, soft = run(MixUp(alpha=0.4, num_classes=3), x, labels)
    lam = float(soft[0, 0])  # row 0 is label 0 mixed with row 3 (label 1)
    assert 0 < lam < 1 and soft.shape == (4, 3) and soft.dtype == torch.float32
    one_hot = torch.nn.functional.one_hot(labels, 3).float()
    assert torch.allclose(soft, lam * one_hot + (1 - lam) * one_hot.roll(1, 0))
    assert torch.allclose(out, lam * x + (1 - lam) * x.roll(1, 0), atol=1e-4)


def test_cutmix_pastes_one_box_and_weights_labels_by_its_area():
    x = batch(n=3, h=16, w=16)
    labels = torch.tensor([0, 1, 2])
    op = CutMix(alpha=1.0, num_classes=3)
    drawn = op.draw([random.Random(5)], 16, 16)
    kept, top, bottom, left, right = drawn.host
    out, soft = apply(op, x, drawn, labels)
    area = (bottom - top) * (right - left)
    assert area > 0 and kept == pytest.approx(1 - area / 256)
    ref = x.clone()
    ref[:, :, top:bottom, left:right] = x.roll(1, 0)[:, :, top:bottom, left:right]
    assert torch.equal(out, ref)
    assert torch.allclose(soft[1], torch.tensor([1 - kept, kept, 0.0]))


def test_mixing_refuses_labels_outside_num_classes_and_needs_num_classes():
    with pytest.raises(ConfigError, match="num_classes"):
        MixUp()
    with pytest.raises(ConfigError, match="label 5"):
        CutMix(num_classes=3).check_labels(np.array([0, 5]))
    assert MixUp(num_classes=2).draw([random.Random(0)], 4, 4) == MixUp(num_classes=2).draw([random.Random(0)], 4, 4)
    assert CutMix(num_classes=2).draw([random.Random(0)], 4, 4).rows is None  # per batch: host numbers only


@pytest.mark.parametrize(
    "bad",
    [
        lambda: ColorJitter(brightness=-1),
        lambda: ColorJitter(hue=0.7),
        lambda: ColorJitter(contrast=(2, 1)),
        lambda: RandomErasing(p=2),
        lambda: RandomErasing(value="random"),
        lambda: MixUp(alpha=0, num_classes=3),
    ],
)
def test_bad_arguments_are_config_errors_naming_the_option(bad):
    with pytest.raises(ConfigError) as info:
        bad()
    assert info.value.option in ("brightness", "hue", "contrast", "p", "value", "alpha")
