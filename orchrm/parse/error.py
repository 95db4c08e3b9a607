"""The one error every orchrm parser raises."""

from __future__ import annotations

from orchrm.errors import OrchrmError


class ParseError(OrchrmError, ValueError):
    """An input that is not an orchestration: why (`reason`), where (`offset`), from what.

    `reason` is a stable snake_case code for counting and tests; `offset` is a character
    offset into the parsed text (None when the input is not text); `source` names the
    form or record field that was read (`harmony`, `mas_code`, `thinking`, ...).
    """

    def __init__(self, reason: str, message: str, offset: int | None = None, source: str = ""):
        self.reason = reason
        self.message = message
        self.offset = offset
        self.source = source
        where = f" at offset {offset}" if offset is not None else ""
        origin = f"{source}: " if source else ""
        super().__init__(f"{origin}{reason}{where}: {message}")

    @property
    def detail(self) -> str:
        """The message with its source and offset but not its reason: for a line that
        shows the reason beside it."""
        at = f"at offset {self.offset}" if self.offset is not None else ""
        prefix = " ".join(p for p in (self.source, at) if p)
        return f"{prefix}: {self.message}" if prefix else self.message
