"""``ImageError``, the error of ``stoker.vision`` (drawn in ``stoker.errors``' tree). ``on_error="skip"``
turns one into a line of the source's or the conversion's report; nothing else is skipped.
"""

from __future__ import annotations

from pathlib import Path

from stoker.errors import StokerError


class ImageError(StokerError, ValueError):
    """An image cannot be used: unreadable, empty, corrupt, truncated, too large or too small."""

    def __init__(self, message: str, *, path: str | Path | None = None, row: int | None = None) -> None:
        super().__init__(message)
        self.path = None if path is None else str(path)
        self.row = row
        self.reason = message

    def where(self, path: str | Path | None = None, row: int | None = None) -> ImageError:
        """The same error, naming the file and/or row it came from."""
        place = []
        if path is not None:
            place.append(str(path))
        if row is not None:
            place.append(f"row {row}")
        message = f"{', '.join(place)}: {self.reason}" if place else self.reason
        err = ImageError(
            message, path=path if path is not None else self.path, row=row if row is not None else self.row
        )
        err.reason = self.reason
        return err


__all__ = ["ImageError"]
