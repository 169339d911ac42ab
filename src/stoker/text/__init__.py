"""stoker.text: BERT-ready batches from raw text, on the fly or from a store.

``stoker.text.Loader`` returns a :class:`stoker.Loader` over a :class:`TextSource` and, when
bucketing or packing, a :class:`LengthBuckets` or :class:`PackedBatches`; the same parts compose by
hand. README.md in this directory has examples, the file map and the life of a batch.
"""

from stoker.text.bucketing import LengthBuckets
from stoker.text.inputs import TextColumns
from stoker.text.loader import Loader, TextConfig
from stoker.text.packing import PackedBatches
from stoker.text.report import TextReport
from stoker.text.source import TextSource
from stoker.text.tokenizer import TextTokenizer, resolve

__all__ = [
    "LengthBuckets",
    "Loader",
    "PackedBatches",
    "TextColumns",
    "TextConfig",
    "TextReport",
    "TextSource",
    "TextTokenizer",
    "resolve",
]
