"""The token cache of an on-the-fly text source: every row tokenized once, then gathered.

:class:`TokenCache` keeps the ids of every row tokenized so far (flat ids and type ids in
:class:`~stoker.text.spill.FlatArray` s, which spill to a mapped file past
``STOKER_TEXT_CACHE_MEMORY`` bytes; per row its start, length, truncated and cut flags). A read
whose rows are all cached is a gather; other rows are tokenized by the reader and stored.

It is also the lengths a :class:`~stoker.text.LengthBuckets` streams from (:meth:`wait`,
:meth:`plan`, :meth:`all`): the rows of the first wait are tokenized by the waiting thread, then
a background thread tokenizes the rest of the corpus in the order the sampler needs it, rows waited
for first. The cache is keyed by what determines the ids
(:func:`ids_key`): a change empties it, or raises ``ConfigError`` (:meth:`check`) once batches were
ordered by the old lengths. ``close()`` and garbage collection stop the thread and remove the
files; a forked worker reads the rows cached before the fork and stores nothing.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections import deque
from collections.abc import Iterable
from typing import Any

import numpy as np

from stoker.errors import ConfigError, StateError
from stoker.pipeline.columns import check_rows
from stoker.store.columns import Ragged
from stoker.text.inputs import TextTable
from stoker.text.progress import progress_bar
from stoker.text.spill import FlatArray, SpillDir, memory_limit
from stoker.text.tokenizer import Encoded, TextTokenizer

BLOCK = 8192  # rows per encode_batch call for rows no plan asked for


def ids_key(tokenizer: TextTokenizer, pairs: bool) -> str:
    """What determines the ids of a row besides its text (cheap: no vocabulary dump)."""
    tok = tokenizer.tokenizer
    parts: list[Any] = [tokenizer.max_length, tokenizer.cut_at, pairs, tok.truncation, tok.padding]
    parts += [tok.get_vocab_size(with_added_tokens=True), type(tok.model).__name__]
    for part in (tok.normalizer, tok.pre_tokenizer, tok.post_processor):
        parts.append(None if part is None else part.__getstate__())
    return repr(parts)


def encode_rows(table: TextTable, tokenizer: TextTokenizer, idx: np.ndarray) -> Encoded:
    """Rows ``idx`` of ``table`` tokenized in one call."""
    check_rows(idx, len(table), "a text source")
    rows = idx.tolist()
    texts = table.texts
    batch = [texts[i] for i in rows]
    pairs = None if table.pairs is None else [table.pairs[i] for i in rows]
    return tokenizer.encode(batch, pairs)


def take(flat: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> Ragged:
    """The rows ``flat[s : s + n]`` for each (s, n), as one flat array with offsets."""
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    pos = np.repeat(starts - offsets[:-1], lengths) + np.arange(offsets[-1], dtype=np.int64)
    return Ragged(flat[pos], offsets)


class _State:
    """Everything the cache and its thread share (the thread holds only this, never the cache)."""

    def __init__(self, table: TextTable, tokenizer: TextTokenizer, progress: Any) -> None:
        n = len(table)
        self.table, self.tokenizer, self.progress, self.n = table, tokenizer, progress, n
        self.pid = os.getpid()  # a forked worker process reads what was cached, never writes or cleans up
        self.pairs = table.pairs is not None
        self.key = ids_key(tokenizer, self.pairs)
        self.cond = threading.Condition()
        self.spill = SpillDir()
        self.thread: threading.Thread | None = None
        self.stopped = False
        self.error: BaseException | None = None
        self.clear()

    def clear(self) -> None:
        n, limit = self.n, memory_limit()
        self.done = np.zeros(self.n, dtype=bool)
        self.starts = np.zeros(n, dtype=np.int64)
        self.lengths = np.zeros(n, dtype=np.int32)
        self.truncated = np.zeros(n, dtype=bool)
        self.cut = np.zeros(n, dtype=bool)
        self.any_cut = False
        self.count = 0
        self.ids = FlatArray(self.tokenizer.id_dtype, "input_ids", limit, self.spill)
        self.types = FlatArray(np.uint8, "token_type_ids", limit, self.spill) if self.pairs else None
        self.priority: deque[np.ndarray] = deque()
        self.plan: Iterable[np.ndarray] = iter(())
        self.cursor = 0

    @property
    def complete(self) -> bool:
        return self.count >= self.n

    def write(self, idx: np.ndarray, enc: Encoded) -> None:
        """Store the rows of ``enc`` (the encoding of rows ``idx``) not stored yet. Under ``cond``."""
        new = np.flatnonzero(~self.done[idx])
        if len(new) == 0:
            return
        rows, first = np.unique(idx[new], return_index=True)  # return_index: a plain unique imports numpy.ma
        if len(rows) < len(idx):
            new = new[first]
        else:
            rows = idx
        lens = enc.ids.lengths[new]
        part = enc.ids if len(new) == len(idx) else take(enc.ids.values, enc.ids.offsets[new], lens)
        start = self.ids.append(part.values)
        if self.types is not None and enc.type_ids is not None:
            types = enc.type_ids if len(new) == len(idx) else take(enc.type_ids.values, enc.type_ids.offsets[new], lens)
            self.types.append(types.values)
        self.starts[rows] = start + part.offsets[:-1]
        self.lengths[rows] = lens
        if enc.truncated is not None:
            self.truncated[rows] = enc.truncated[new]
        if enc.cut is not None and enc.cut[new].any():
            self.cut[rows] = enc.cut[new]
            self.any_cut = True
        self.done[rows] = True  # last: a reader that sees done finds the row written
        self.count += len(rows)
        if self.complete:
            self.cond.notify_all()

    def next_block(self) -> np.ndarray | None:
        """The next rows to tokenize: asked-for rows first, then the plan, then the rest. Under ``cond``."""
        while self.priority:
            block = self.priority.popleft()
            block = block[~self.done[block]]
            if len(block):
                return block
        for block in self.plan:
            block = block[~self.done[block]]
            if len(block):
                return block
        while self.cursor < self.n:
            a = self.cursor
            self.cursor = min(self.n, a + BLOCK)
            block = a + np.flatnonzero(~self.done[a : self.cursor])
            if len(block):
                return block
        return None

    def run(self) -> None:
        """Tokenize until every row is cached, the cache is closed, or tokenizing fails."""
        with progress_bar(self.progress, self.n, "counting tokens") as bar:
            bar.update(self.count)
            while True:
                with self.cond:
                    if self.stopped or self.error is not None:
                        return
                    block = self.next_block()
                    if block is None:
                        self.cond.notify_all()
                        return
                try:
                    enc = encode_rows(self.table, self.tokenizer, block)
                except BaseException as exc:  # handed to whoever waits for these rows
                    if hasattr(exc, "add_note"):
                        exc.add_note(f"in stoker.text's background tokenization (rows {int(block[0])}..)")
                    with self.cond:
                        self.error = exc
                        self.cond.notify_all()
                    return
                with self.cond:
                    if self.stopped:
                        return
                    before = self.count
                    self.write(block, enc)
                    self.cond.notify_all()
                    bar.update(self.count - before)

    def start(self) -> None:
        """Start the background thread if it is not running and rows are missing. Under ``cond``."""
        if self.stopped:
            raise StateError("this text source was closed; its token cache is gone: build a new loader")
        if self.thread is None and not self.complete:
            self.thread = threading.Thread(target=self.run, name="stoker-text-tokenize", daemon=True)
            self.thread.start()

    def wait_for(self, rows: np.ndarray) -> None:
        """Block until ``rows`` are cached (asking the thread for them first). Under ``cond``."""
        missing = rows[~self.done[rows]]
        if not len(missing):
            return
        self.priority.append(missing)
        self.start()
        self.cond.notify_all()
        while not self.done[missing].all():
            if self.error is not None:
                raise self.error
            if self.stopped:
                raise StateError("this text source was closed while its rows were being tokenized")
            if self.thread is not None and not self.thread.is_alive():
                self.thread = None
                self.start()
            self.cond.wait(0.5)

    def reset(self, key: str) -> None:
        """Stop, remove the files, and start again empty under ``key``."""
        self.shutdown(join=True)
        with self.cond:
            self.stopped, self.thread, self.error, self.key = False, None, None, key
            self.clear()

    def shutdown(self, join: bool) -> None:
        if os.getpid() != self.pid:
            return  # a forked copy: the files and the thread are the parent's
        with self.cond:
            self.stopped = True
            self.cond.notify_all()
            thread = self.thread
        if join and thread is not None and thread is not threading.current_thread():
            thread.join()
        self.spill.remove()


class TokenCache:
    """Token ids of the rows of one text table, tokenized once (see the module docstring).

    Also the lengths of :class:`~stoker.text.LengthBuckets` when it streams: ``len()``,
    :meth:`wait`, :meth:`plan`, :meth:`known`, :meth:`all`.
    """

    def __init__(self, table: TextTable, tokenizer: TextTokenizer, progress: Any = None) -> None:
        self._state = _State(table, tokenizer, progress)
        self.ordered = False  # a sampler ordered batches by these lengths: they must not change
        self._finalizer = weakref.finalize(self, _State.shutdown, self._state, False)

    def __reduce__(self) -> tuple[Any, ...]:
        """A worker process gets an empty cache of its own (it fills it as it reads)."""
        s = self._state
        return (TokenCache, (s.table, s.tokenizer, False))

    def __len__(self) -> int:
        return self._state.n

    @property
    def complete(self) -> bool:
        """Whether every row is cached."""
        return self._state.complete

    @property
    def progress(self) -> Any:
        """How the background pass shows its progress (see :mod:`stoker.text.progress`)."""
        return self._state.progress

    @progress.setter
    def progress(self, value: Any) -> None:
        self._state.progress = value

    @property
    def spill_dir(self) -> str | None:
        """The temporary directory of the spilled ids (None while they are in memory)."""
        return self._state.spill.path

    def check(self) -> None:
        """Empty the cache if what determines the ids changed (see the module docstring)."""
        s = self._state
        key = ids_key(s.tokenizer, s.pairs)
        if key == s.key:
            return
        if self.ordered:
            raise ConfigError(
                "the tokenizer (or its truncation, max_length or special tokens) changed after this text loader "
                "ordered its batches by token counts; build a new loader with the tokenizer as it is now",
                option="tokenizer",
            )
        s.reset(key)

    def fetch(self, idx: np.ndarray) -> Encoded:
        """Rows ``idx``: gathered when all are cached, else tokenized here (and cached)."""
        s = self._state
        check_rows(idx, s.n, "a text source")
        if len(idx) and s.done[idx].all():
            return self.gather(idx)
        enc = encode_rows(s.table, s.tokenizer, idx)
        if os.getpid() != s.pid:
            return enc  # a forked worker: its lock may have been held at the fork, its files are shared
        with s.cond:
            if not s.stopped:
                s.write(idx, enc)
        return enc

    def gather(self, idx: np.ndarray) -> Encoded:
        """Rows ``idx``, all cached: one gather each for ids and type ids, no tokenizer."""
        s = self._state
        starts, lengths = s.starts[idx], s.lengths[idx].astype(np.int64)
        ids = take(s.ids.array, starts, lengths)
        types = None if s.types is None else Ragged(take(s.types.array, starts, lengths).values, ids.offsets)
        truncated = s.truncated[idx] if s.tokenizer.max_length is not None else None
        return Encoded(ids, types, truncated, s.cut[idx] if s.any_cut else None)

    # -- lengths for a streaming LengthBuckets ------------------------------------------------
    def known(self) -> np.ndarray | None:
        """Every row's token count when all are cached, else None (no wait)."""
        s = self._state
        return s.lengths.astype(np.int64) if s.complete else None

    def plan(self, blocks: Iterable[np.ndarray]) -> None:
        """The order rows will be waited for: the background thread, started by the next
        :meth:`wait`, tokenizes them in this order (ignored once the thread runs; rows waited for
        are always taken first)."""
        s = self._state
        self.ordered = True
        with s.cond:
            if s.thread is None and not s.complete:
                s.plan = iter(blocks)

    def wait(self, rows: np.ndarray) -> np.ndarray:
        """The token counts of ``rows``, once they are cached. Rows missing while no background
        thread runs (an epoch's first batch) are tokenized in this thread, then the thread starts
        on the rest: the first batch waits for no thread start or hand-off."""
        s = self._state
        self.ordered = True
        rows = np.asarray(rows, dtype=np.int64)
        check_rows(rows, s.n, "a text source")
        if not s.done[rows].all():
            with s.cond:
                idle = s.thread is None and not s.stopped and os.getpid() == s.pid
            if idle:
                self.fetch(rows[~s.done[rows]])  # tokenized here and stored
                if s.complete:  # no thread will run to report them
                    with progress_bar(s.progress, s.n, "counting tokens") as bar:
                        bar.update(s.n)
            with s.cond:
                s.wait_for(rows)
                if not s.complete:
                    s.start()
        return s.lengths[rows].astype(np.int64)

    def all(self) -> np.ndarray:
        """Every row's token count: the rest of the corpus tokenized (in this thread when no
        background thread runs, with the progress bar), or waited for."""
        s = self._state
        self.ordered = True
        me = threading.current_thread()
        with s.cond:
            inline = s.thread is None and not s.complete and not s.stopped
            if inline:
                s.thread = me  # no background thread starts beside this pass
        if inline:
            try:
                s.run()
            finally:
                with s.cond:
                    if s.thread is me:
                        s.thread = None
        with s.cond:
            s.wait_for(np.flatnonzero(~s.done))
        return s.lengths.astype(np.int64)

    def close(self) -> None:
        """Stop the background tokenization and remove the temporary files; the cache starts empty
        again (a later pass tokenizes anew). Idempotent."""
        self._state.reset(self._state.key)


__all__ = ["BLOCK", "TokenCache", "encode_rows", "ids_key", "take"]
