"""The text_bert workload: raw text -> bert-base-uncased batches (max_length 128, batches of 32).

Every contender uses the same WordPiece vocabulary (``raw/vocab.txt``, the bert-base-uncased
file that stoker also bundles). Peers build ``tokenizers.BertWordPieceTokenizer`` from it (the
Rust tokenizer behind transformers' ``BertTokenizerFast``) with truncation to 128 and the
tokenizer's own padding to the longest row of each batch (dynamic padding, as transformers'
``DataCollatorWithPadding`` does). Each peer stores the raw text in its own format and tokenizes
whole batches in its own map/collate stage, in its worker processes or threads; HF datasets
tokenizes once with ``.map(batched=True)`` (its documented preprocessing, counted as write time)
and loads the ids. The seed pattern calls ``BertTokenizerFast`` one sample at a time, padded to 128 (seed 000).
"""

from __future__ import annotations

import glob
from pathlib import Path

import numpy as np
from contenders import WORKERS, _identity, _nothing
from workloads import MAX_LENGTH, Workload, texts

_TOKENIZERS: dict = {}


def bert(vocab: str, pad_to: int | None = None):
    """The peers' tokenizer, built once per process (worker processes build their own)."""
    key = (vocab, pad_to)
    if key not in _TOKENIZERS:
        from tokenizers import BertWordPieceTokenizer

        tok = BertWordPieceTokenizer(vocab, lowercase=True)
        tok.enable_truncation(MAX_LENGTH)
        tok.enable_padding(pad_id=0, pad_token="[PAD]", length=pad_to)
        _TOKENIZERS[key] = tok
    return _TOKENIZERS[key]


def encode(batch_texts: list[str], labels, vocab: str):
    """One encode_batch for the whole batch, padded to its longest row -> torch tensors."""
    import torch

    encs = bert(vocab).encode_batch(list(batch_texts))
    ids = torch.from_numpy(np.array([e.ids for e in encs], dtype=np.int64))
    mask = torch.from_numpy(np.array([e.attention_mask for e in encs], dtype=np.int64))
    return ids, mask, torch.as_tensor(np.asarray(labels, dtype=np.int64))


class TextCollate:
    """A picklable collate for worker processes: samples -> tokenized, padded batch."""

    def __init__(self, vocab: str, text_key=0, label_key=1) -> None:
        self.vocab, self.text_key, self.label_key = vocab, text_key, label_key

    def __call__(self, samples):
        return encode([s[self.text_key] for s in samples], [s[self.label_key] for s in samples], self.vocab)


def _count(batch) -> int:
    return len(batch[2])


# -- stoker -----------------------------------------------------------------------------------------
def stoker_load(w: Workload, raw: Path, work: Path):
    import stoker.text

    t, labels = texts(raw)
    loader = stoker.text.Loader(
        {"text": t, "label": labels.tolist()}, batch_size=w.batch_size, max_length=MAX_LENGTH, shuffle=True
    )
    return (lambda: loader), (lambda b: len(b["input_ids"]))


def stoker_store_prepare(w: Workload, raw: Path, work: Path) -> None:
    import stoker.convert
    import stoker.text  # noqa: F401

    t, labels = texts(raw)
    stoker.convert.text({"text": t, "label": labels.tolist()}, work / "store", max_length=MAX_LENGTH)


def stoker_store_load(w: Workload, raw: Path, work: Path):
    import stoker.text

    loader = stoker.text.Loader(str(work / "store"), batch_size=w.batch_size, shuffle=True)
    return (lambda: loader), (lambda b: len(b["input_ids"]))


# -- torch DataLoader / torchdata --------------------------------------------------------------------
class TextDataset:
    def __init__(self, raw: Path) -> None:
        self.texts, self.labels = texts(raw)
        self.vocab, self._hf = str(raw / "vocab.txt"), None

    def __len__(self) -> int:
        return len(self.texts)

    def __getitem__(self, i: int):
        """Seed 000: transformers' tokenizer called per sample, padded to max_length, tensors out."""
        if self._hf is None:  # built in each worker process
            from transformers import BertTokenizerFast

            self._hf = BertTokenizerFast(vocab_file=self.vocab, do_lower_case=True)
        enc = self._hf(
            self.texts[i],
            add_special_tokens=True,
            max_length=MAX_LENGTH,
            padding="max_length",
            truncation=True,
            return_attention_mask=True,
            return_tensors="pt",
        )
        return enc["input_ids"].squeeze(0), enc["attention_mask"].squeeze(0), int(self.labels[i])


class BatchedTextDataset(TextDataset):
    """Tuned: ``__getitems__`` tokenizes the whole batch in one encode_batch, padded to its longest row."""

    def __getitems__(self, indices: list[int]):
        return encode([self.texts[i] for i in indices], self.labels[indices], self.vocab)


def torch_seed_load(w: Workload, raw: Path, work: Path):
    import torch

    dl = torch.utils.data.DataLoader(
        TextDataset(raw),
        batch_size=w.batch_size,
        shuffle=True,
        num_workers=WORKERS,
        pin_memory=True,
        persistent_workers=True,
    )
    return (lambda: dl), _count


def torch_tuned_load(w: Workload, raw: Path, work: Path, loader_cls=None):
    import torch

    cls = loader_cls or torch.utils.data.DataLoader
    dl = cls(
        BatchedTextDataset(raw),
        batch_size=w.batch_size,
        shuffle=True,
        num_workers=WORKERS,
        collate_fn=_identity,
        persistent_workers=True,
        prefetch_factor=4,
    )
    return (lambda: dl), _count


def torchdata_load(w: Workload, raw: Path, work: Path):
    from torchdata.stateful_dataloader import StatefulDataLoader

    return torch_tuned_load(w, raw, work, StatefulDataLoader)


# -- Hugging Face datasets: .map(batched=True) tokenizes once (write time), then load the ids ----------
def hf_prepare(w: Workload, raw: Path, work: Path) -> None:
    from datasets import Dataset
    from transformers import BertTokenizerFast

    t, labels = texts(raw)
    tokenizer = BertTokenizerFast(vocab_file=str(raw / "vocab.txt"), do_lower_case=True)
    ds = Dataset.from_dict({"text": t, "label": labels})
    ds = ds.map(
        lambda b: tokenizer(b["text"], truncation=True, max_length=MAX_LENGTH), batched=True, remove_columns=["text"]
    )
    ds.save_to_disk(str(work / "hf"))


class HFPad:
    """DataCollatorWithPadding's job (pad to the batch's longest row) without its per-row Python."""

    def __call__(self, rows):
        import torch

        pad = torch.nn.utils.rnn.pad_sequence
        return (
            pad([r["input_ids"] for r in rows], batch_first=True),
            pad([r["attention_mask"] for r in rows], batch_first=True),
            torch.stack([r["label"] for r in rows]),
        )


def hf_load(w: Workload, raw: Path, work: Path):
    import torch
    from datasets import load_from_disk

    ds = load_from_disk(str(work / "hf")).with_format("torch", columns=["input_ids", "attention_mask", "label"])
    dl = torch.utils.data.DataLoader(
        ds, batch_size=w.batch_size, shuffle=True, num_workers=WORKERS, collate_fn=HFPad(), persistent_workers=True
    )
    return (lambda: dl), _count


# -- WebDataset ---------------------------------------------------------------------------------------
def wds_prepare(w: Workload, raw: Path, work: Path) -> None:
    import webdataset as wds

    (work / "wds").mkdir(parents=True, exist_ok=True)
    t, labels = texts(raw)
    with wds.ShardWriter(str(work / "wds" / "shard-%06d.tar"), maxsize=64 * 2**20, maxcount=20_000, verbose=0) as sink:
        for i, (text, label) in enumerate(zip(t, labels)):
            sink.write({"__key__": f"{i:09d}", "txt": text, "cls": int(label)})


def wds_load(w: Workload, raw: Path, work: Path):
    import webdataset as wds

    urls = sorted(glob.glob(str(work / "wds" / "shard-*.tar")))
    pipeline = (
        wds.WebDataset(urls, shardshuffle=len(urls), empty_check=False)
        .shuffle(1000)
        .decode()
        .to_tuple("txt", "cls")
        .batched(w.batch_size, collation_fn=TextCollate(str(raw / "vocab.txt")), partial=False)
    )
    loader = wds.WebLoader(pipeline, batch_size=None, num_workers=WORKERS, persistent_workers=True)
    return (lambda: loader), _count


# -- LitData --------------------------------------------------------------------------------------------
def _lit_text_row(i: int, raw: str) -> dict:
    t = _lit_text_row.cache.get(raw) or _lit_text_row.cache.setdefault(raw, texts(Path(raw)))
    return {"text": t[0][i], "label": int(t[1][i])}


_lit_text_row.cache = {}  # type: ignore[attr-defined]


def litdata_prepare(w: Workload, raw: Path, work: Path) -> None:
    import functools

    import litdata as ld

    n = len(np.load(raw / "labels.npy", mmap_mode="r"))
    ld.optimize(
        fn=functools.partial(_lit_text_row, raw=str(raw)),
        inputs=list(range(n)),
        output_dir=str(work / "litdata"),
        chunk_bytes="64MB",
        num_workers=WORKERS,
    )


def litdata_load(w: Workload, raw: Path, work: Path):
    import litdata as ld

    ds = ld.StreamingDataset(str(work / "litdata"), shuffle=True)
    dl = ld.StreamingDataLoader(
        ds,
        batch_size=w.batch_size,
        num_workers=WORKERS,
        collate_fn=TextCollate(str(raw / "vocab.txt"), "text", "label"),
    )
    return (lambda: dl), _count


# -- SPDL: thread pipeline, one encode_batch per batch (the tokenizer releases the GIL) -------------------
def spdl_load(w: Workload, raw: Path, work: Path):
    from spdl.pipeline import PipelineBuilder

    ds = BatchedTextDataset(raw)

    def batches():
        order = np.random.default_rng().permutation(len(ds))
        for b in range(len(ds) // w.batch_size):
            yield order[b * w.batch_size : (b + 1) * w.batch_size]

    def epoch():
        pipeline = (
            PipelineBuilder()
            .add_source(batches())
            .pipe(ds.__getitems__, concurrency=WORKERS)
            .add_sink(4)
            .build(num_threads=WORKERS)
        )
        with pipeline.auto_stop():
            yield from pipeline

    return epoch, _count


# -- MosaicML Streaming (own venv) -------------------------------------------------------------------------
def mosaic_prepare(w: Workload, raw: Path, work: Path) -> None:
    from streaming import MDSWriter

    t, labels = texts(raw)
    with MDSWriter(out=str(work / "mds"), columns={"text": "str", "label": "int64"}, size_limit="64mb") as out:
        for text, label in zip(t, labels):
            out.write({"text": text, "label": int(label)})


def mosaic_load(w: Workload, raw: Path, work: Path):
    import torch
    from streaming import StreamingDataset
    from streaming.base.util import clean_stale_shared_memory

    clean_stale_shared_memory()
    ds = StreamingDataset(local=str(work / "mds"), shuffle=True, batch_size=w.batch_size)
    dl = torch.utils.data.DataLoader(
        ds,
        batch_size=w.batch_size,
        num_workers=WORKERS,
        collate_fn=TextCollate(str(raw / "vocab.txt"), "text", "label"),
        persistent_workers=True,
    )
    return (lambda: dl), _count


def no_text(reason: str):
    def prepare(w: Workload, raw: Path, work: Path) -> None:
        raise NotImplementedError(reason)

    return prepare


# name -> (prepare, load); environments as in contenders.CONTENDERS
TEXT = {
    "stoker": (_nothing, stoker_load),
    "stoker from a store (stoker.convert.text)": (stoker_store_prepare, stoker_store_load),
    "torch DataLoader (seed pattern)": (_nothing, torch_seed_load),
    "torch DataLoader (tuned: __getitems__)": (_nothing, torch_tuned_load),
    "torchdata StatefulDataLoader": (_nothing, torchdata_load),
    "HF datasets": (hf_prepare, hf_load),
    "WebDataset": (wds_prepare, wds_load),
    "LitData": (litdata_prepare, litdata_load),
    "SPDL": (_nothing, spdl_load),
    "NVIDIA DALI (CPU)": (
        no_text(
            "DALI has no text reader or tokenizer operator (only a python_function escape hatch, which would not be DALI)"
        ),
        None,
    ),
    "MosaicML Streaming": (mosaic_prepare, mosaic_load),
    "FFCV": (
        no_text("FFCV has no text field and its pipelines are numba-compiled array ops: no place for a tokenizer"),
        None,
    ),
}
