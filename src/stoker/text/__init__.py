"""stoker.text: BERT-ready batches from raw text, on the fly or from a store.

    import stoker
    loader = stoker.text.Loader("corpus.txt", tokenizer="bert-base-uncased", batch_size=32,
                                max_length=128, shuffle=True)
    for batch in loader:          # input_ids, attention_mask (+ labels, token_type_ids)
        ...
    print(loader.report())        # real tokens, padding, truncated, empty lines skipped

The same batches, composed from parts (``TextSource`` is a :class:`stoker.BatchSource`)::

    source = stoker.text.TextSource("corpus.txt", max_length=128)
    buckets = stoker.text.LengthBuckets(source.streamed_lengths(), batch_size=32, round_to=source.pad_to_multiple_of)
    loader = stoker.Loader(source, batch_sampler=buckets)

See README.md in this directory for the file map and the life of a batch.
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
