"""``stoker.vision``: image folders to normalized batches on the device.

    import stoker
    from stoker import vision
    stoker.convert.images("photos/", "stores/photos")            # JPEG bytes + labels, in threads
    source = vision.ImageSource("stores/photos", vision.train_transforms(224))
    for batch in stoker.Loader(source, batch_size=256, shuffle=True, device="cuda"):
        ...  # batch["image"]: float32 (256, 3, 224, 224), normalized on the device

See README.md in this folder for the file map and the life of a batch.
"""

from stoker.vision.batch_ops import ColorJitter, CutMix, MixUp, RandomErasing
from stoker.vision.compose import Compose, eval_transforms, train_transforms
from stoker.vision.decode import decode, probe
from stoker.vision.errors import ImageError
from stoker.vision.finder import (
    IMG_EXTENSIONS,
    ImageList,
    SplitClassesWarning,
    find_images,
    flat_folder,
    from_dataset,
    from_paths,
    image_folder,
)
from stoker.vision.gpu import gpu_available
from stoker.vision.options import ImageOptions
from stoker.vision.source import ImageSource, Skipped
from stoker.vision.transforms import (
    IMAGENET_MEAN,
    IMAGENET_STD,
    CenterCrop,
    Normalize,
    RandomCrop,
    RandomHorizontalFlip,
    RandomResizedCrop,
    Resize,
)

__all__ = [
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "IMG_EXTENSIONS",
    "CenterCrop",
    "ColorJitter",
    "Compose",
    "CutMix",
    "ImageError",
    "ImageList",
    "ImageOptions",
    "ImageSource",
    "MixUp",
    "Normalize",
    "RandomCrop",
    "RandomErasing",
    "RandomHorizontalFlip",
    "RandomResizedCrop",
    "Resize",
    "Skipped",
    "SplitClassesWarning",
    "decode",
    "eval_transforms",
    "find_images",
    "flat_folder",
    "from_dataset",
    "from_paths",
    "gpu_available",
    "image_folder",
    "probe",
    "train_transforms",
]
