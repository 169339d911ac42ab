"""What a text loader delivered: real tokens, padding, truncation, skipped lines.

Each batch carries a small :class:`BatchTally` from the worker that built it; the loader's
``finalize`` (run on the consumer side, as the batch is handed out) adds it to a
:class:`Tally`. So the report counts batches *delivered*, not the ones prefetched and dropped.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

TALLY_KEY = "_stoker_text_tally"


@dataclass(slots=True)
class BatchTally:
    """Counts of one batch (travels inside the batch dict under ``TALLY_KEY``; not a tuple, which
    the loader would walk as nested data)."""

    examples: int
    real_tokens: int
    padded_tokens: int
    truncated: int
    cut_lines: int = 0  # long lines tokenized from a prefix (same ids; see text/tokenizer.py)


@dataclass(frozen=True)
class TextReport:
    """Counts over the batches a text loader has delivered since it was built (or reset).

    Attributes:
        batches: batches delivered.
        examples: examples (rows, or packed blocks) delivered.
        real_tokens: tokens that are text (special tokens included).
        padded_tokens: pad positions sent along with them.
        truncated: examples cut to ``max_length`` (on the fly: as delivered; from a store: at conversion).
        skipped_empty: empty lines left out of the source (once, when it was read).
        replaced_lines: lines whose invalid UTF-8 was replaced (``encoding_errors="replace"``).
        bucketing: ``"on"``, or ``"off (why)"``, as the text loader batches (empty when unknown).
        cut_lines: examples whose line was longer than the tokenizer's ``cut_at`` characters and was
            tokenized from a prefix; their ids equal the whole line's cut to ``max_length`` (on the fly:
            as delivered; from a store: see its metadata).
    """

    batches: int = 0
    examples: int = 0
    real_tokens: int = 0
    padded_tokens: int = 0
    truncated: int = 0
    skipped_empty: int = 0
    replaced_lines: int = 0
    bucketing: str = ""
    cut_lines: int = 0

    @property
    def padded_fraction(self) -> float:
        """Share of the delivered token positions that are padding."""
        total = self.real_tokens + self.padded_tokens
        return self.padded_tokens / total if total else 0.0

    def __str__(self) -> str:
        return (
            f"{self.batches:,} batches, {self.examples:,} examples: {self.real_tokens:,} real tokens, "
            f"{self.padded_tokens:,} padding ({self.padded_fraction:.1%}), {self.truncated:,} truncated, "
            f"{self.skipped_empty:,} empty lines skipped"
            + (f", {self.replaced_lines:,} lines with invalid UTF-8 replaced" if self.replaced_lines else "")
            + (f", {self.cut_lines:,} long lines cut before tokenizing" if self.cut_lines else "")
            + (f"; length bucketing {self.bucketing}" if self.bucketing else "")
        )


@dataclass
class Tally:
    """The running counts of one loader; thread-safe."""

    skipped_empty: int = 0
    replaced_lines: int = 0
    bucketing: str = ""  # how the batches are made, as TextReport.bucketing (set by stoker.text.Loader)
    _counts: list[int] = field(default_factory=lambda: [0, 0, 0, 0, 0, 0])
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, t: BatchTally) -> None:
        with self._lock:
            c = self._counts
            c[0] += 1
            c[1] += t.examples
            c[2] += t.real_tokens
            c[3] += t.padded_tokens
            c[4] += t.truncated
            c[5] += t.cut_lines

    def reset(self) -> None:
        with self._lock:
            self._counts = [0, 0, 0, 0, 0, 0]

    def report(self) -> TextReport:
        with self._lock:
            b, e, r, p, t, c = self._counts
        return TextReport(b, e, r, p, t, self.skipped_empty, self.replaced_lines, cut_lines=c, bucketing=self.bucketing)


__all__ = ["BatchTally", "TALLY_KEY", "Tally", "TextReport"]
