"""A Dataset's transforms as stoker.vision code: same ops, same arguments; what has no counterpart is named."""

import random

import torch

from stoker.doctor.transform_facts import vision_code
from stoker.vision import Compose as VisionCompose
from stoker.vision import ImageSource  # noqa: F401 -- the written code names stoker.vision's ops


class Compose:  # the attributes torchvision's classes have, under their names
    def __init__(self, transforms):
        self.transforms = transforms


class Resize:
    def __init__(self, size, interpolation="bilinear", max_size=None):
        self.size, self.interpolation, self.max_size = size, interpolation, max_size

    def __call__(self, img):  # a PIL image; (h, w) squashes it, as torchvision's does
        return img.resize(self.size[::-1])


class CenterCrop:
    def __init__(self, size):
        self.size = (size, size) if isinstance(size, int) else tuple(size)


class RandomCrop(CenterCrop):
    def __init__(self, size, padding=None):
        super().__init__(size)
        self.padding = padding

    def __call__(self, x):
        i, j = random.randint(0, x.shape[1] - self.size[0]), random.randint(0, x.shape[2] - self.size[1])
        return x[:, i : i + self.size[0], j : j + self.size[1]]


class RandomHorizontalFlip:
    def __init__(self, p=0.5):
        self.p = p


class ToTensor:
    pass


class ColorJitter:
    def __init__(self, brightness=0.4):
        self.brightness = brightness


class Normalize:
    def __init__(self, mean, std):
        self.mean, self.std = mean, std


class Photos(torch.utils.data.Dataset):
    def __init__(self, transform=None):
        self.root, self.transform = "/data/photos", transform

    def __len__(self):
        return 4

    def __getitem__(self, i):
        return torch.zeros(3, 8, 8)


def _runs(code):
    """The code evaluates to a stoker.vision Compose (the names it writes exist, with these arguments)."""
    import stoker

    compose = eval(code, {"stoker": stoker})
    assert isinstance(compose, VisionCompose)
    return compose


def test_a_squash_resize_stays_a_squash():
    code, left = vision_code(Photos(Compose([Resize((128, 128)), ToTensor()])))
    assert code == "stoker.vision.Compose([stoker.vision.Resize((128, 128))])" and left == ""
    assert _runs(code).out_size() == (128, 128)


def test_a_random_offset_crop_stays_one_and_gets_no_flip():
    code, _ = vision_code(Photos(RandomCrop(24)))
    assert code == "stoker.vision.Compose([stoker.vision.RandomCrop((24, 24))])"
    assert "Flip" not in code and "RandomResizedCrop" not in code
    assert _runs(code).random


def test_resize_crop_flip_normalize_keep_their_arguments_and_the_rest_is_named():
    ops = [Resize([146], interpolation="bicubic"), CenterCrop(128), RandomHorizontalFlip(0.3), ToTensor()]
    ops += [ColorJitter(), Normalize([0.5, 0.5, 0.5], [0.2, 0.2, 0.2])]
    code, left = vision_code(Photos(Compose(ops)))
    assert code == (
        "stoker.vision.Compose([stoker.vision.Resize(146, interpolation='bicubic'), "
        "stoker.vision.CenterCrop((128, 128)), stoker.vision.RandomHorizontalFlip(0.3), "
        "stoker.vision.Normalize((0.5, 0.5, 0.5), (0.2, 0.2, 0.2))])"
    )
    assert left == "ColorJitter"
    _runs(code)


def test_a_crop_stoker_cannot_do_the_same_way_gives_no_code():
    assert vision_code(Photos(RandomCrop(24, padding=4))) == ("", "RandomCrop")  # torchvision pads; stoker does not
    assert vision_code(Photos(Compose([ColorJitter(), Resize(32)])))[0] == ""  # the jitter would run after the crop
    assert vision_code(Photos()) == ("", "")  # no transform attribute: nothing known


class Folder(torch.utils.data.Dataset):
    """Real JPEG files of 48x32 pixels read with PIL and squashed to 16x16 by a torchvision-named Resize."""

    def __init__(self, root, transform):
        import os

        self.root, self.transform = str(root), transform
        self.files = sorted(os.path.join(self.root, f) for f in os.listdir(self.root))

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        import time

        import numpy as np
        from PIL import Image

        time.sleep(0.005)  # 24 rows: at least 0.12 s of data wait against a loop body of microseconds
        with Image.open(self.files[i]) as im:
            img = self.transform(im.convert("RGB"))
        return torch.from_numpy(np.asarray(img).copy()).permute(2, 0, 1)


def test_the_doctor_of_a_squashing_dataset_suggests_the_same_squash(tmp_path):
    import numpy as np
    from PIL import Image

    import stoker

    root = tmp_path / "photos"
    root.mkdir()
    rng = np.random.default_rng(0)
    for k in range(24):
        Image.fromarray(rng.integers(0, 255, (32, 48, 3), dtype=np.uint8)).save(root / f"{k}.jpg")
    with stoker.doctor(interval=0.05) as report:
        for batch in torch.utils.data.DataLoader(Folder(root, Resize((16, 16))), batch_size=8):
            assert batch.shape == (8, 3, 16, 16)
    (rec,) = [r for r in report.recommendations if "stores/photos" in r.action]
    assert "--mode resized" not in rec.action  # shorter side + center crop would be other pixels
    assert "stoker.vision.Compose([stoker.vision.Resize((16, 16))])" in rec.action
