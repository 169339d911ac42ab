"""Which fields of a text input hold the text, the second text and the label, and what to do with bad lines."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from stoker.errors import ConfigError
from stoker.text.labels import label_map

AUTO = "auto"


@dataclass(frozen=True)
class TextColumns:
    """Which fields hold what, and what to do with bad lines.

    Attributes:
        text: the text column (JSONL/CSV/TSV) or key (a dict of lists).
        pair: the second text of sentence pairs (``None``: single texts).
        label: the label column; ``"auto"`` takes ``label`` when there is one, ``None`` reads no label.
        keep_empty: keep empty (whitespace-only) texts, as an empty sequence (``[CLS] [SEP]``,
            padded): the default, so every example of the input is a row. ``False`` skips them with a
            warning naming the first lines skipped (the report counts them all).
        encoding_errors: ``"strict"`` (invalid UTF-8 raises InputError) or ``"replace"``.
        label_names: label names in id order (a label outside them is an InputError naming its
            line); ``None``: names are numbered in sorted order, numbers stay numbers.
    """

    text: str = "text"
    pair: str | None = None
    label: str | None = AUTO
    keep_empty: bool = True
    encoding_errors: str = "strict"
    label_names: tuple[str, ...] | None = None

    @classmethod
    def of(
        cls,
        text_column: str = "text",
        pair_column: str | None = None,
        label_column: str | None = AUTO,
        keep_empty: bool = True,
        encoding_errors: str = "strict",
        label_names: Any = None,
        class_to_idx: Any = None,
    ) -> TextColumns:
        """From the user-facing keywords (``label_names=`` and/or ``class_to_idx=`` give the label map)."""
        names = label_map(label_names, class_to_idx)
        return cls(text_column, pair_column, label_column, keep_empty, encoding_errors, names)

    def __post_init__(self) -> None:
        if not isinstance(self.text, str) or not self.text:
            raise ConfigError(f"text_column must be a column name, got {self.text!r}", option="text_column")
        if self.encoding_errors not in ("strict", "replace"):
            raise ConfigError(
                f"encoding_errors must be 'strict' or 'replace', not {self.encoding_errors!r}", option="encoding_errors"
            )
