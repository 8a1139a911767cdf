"""Following one output file of a task: what to read next, and which lines the new bytes complete.

Only new bytes are ever downloaded: an incomplete last line is kept in memory (not read again) until its
newline arrives, the task ends, or it has waited ``partial_line_seconds`` (then it is shown as it is, so
a progress bar that never writes a newline still shows). The persisted cursor is the offset after the
last line shown; a watch resumed elsewhere reads an incomplete line once more, nothing else. No I/O.

New bytes are found either by a listing of the task's files (its sizes; then a ranged read of what grew: two
requests for new output, one for none) or by a ranged read straight from where the watch has read to (one
request either way: :meth:`Tail.direct_range`). A direct read starts one byte early, at a byte the watch has
already downloaded: the range is satisfiable whenever the file is the one read so far, so a file that did not
grow answers with that one byte, and a byte that differs (or a 416, or another creation time) says the file
is not that one any more (the task started over): the watch lists the task's files again, as at its start.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from airflow_provider_azbatch.model.lines import split_lines
from airflow_provider_azbatch.model.records import FileInfo
from airflow_provider_azbatch.watching.state import StreamCursor


@dataclass
class Tail:
    """The output of one stream as far as this watch has read it."""

    cursor: StreamCursor
    # Bytes after ``cursor.offset`` already downloaded but not shown: the start of an unfinished line.
    pending: bytearray = field(default_factory=bytearray)
    pending_since: float | None = None
    # The file's size at the last look (None: not looked at yet).
    known_size: int | None = None
    # The last byte downloaded (None: none in this process): what a direct read's first byte must be.
    last_byte: int | None = None

    @property
    def read_to(self) -> int:
        return self.cursor.offset + len(self.pending)

    def observe(self, info: FileInfo) -> bool:
        """Take a listing of the file; True if it is a new file (the task started over, e.g. a retry)."""
        cursor = self.cursor
        restarted = (cursor.created is not None and info.created is not None and info.created != cursor.created) or (
            info.size < self.read_to
        )
        if restarted:
            self.cursor = StreamCursor(0, info.created)
            self.pending.clear()
            self.pending_since = None
            self.last_byte = None
        elif info.created is not None and cursor.created is None:
            self.cursor = StreamCursor(cursor.offset, info.created)
        self.known_size = info.size
        return restarted

    def next_range(self, max_bytes: int) -> tuple[int, int] | None:
        """The bytes to download next (inclusive end), or None when there is nothing new."""
        if self.known_size is None or self.known_size <= self.read_to:
            return None
        return self.read_to, min(self.known_size, self.read_to + max_bytes) - 1

    def direct_range(self, max_bytes: int) -> tuple[int, int] | None:
        """The range of a direct read (see the module docstring), or None when the file must be listed instead:
        never listed, listed again after a direct read found another file, or nothing downloaded yet in this
        process (no byte to start at: a listing, which looks at both streams, costs the same one request)."""
        if self.known_size is None or self.last_byte is None or self.read_to == 0:
            return None
        return self.read_to - 1, self.read_to - 1 + max_bytes - 1

    def take_direct(self, span: tuple[int, int], data: bytes, now: float) -> list[str] | None:
        """Lines completed by the answer to a direct read of ``span``; None if the answer is not the file read so
        far (the caller lists the task's files next, and this tail learns the file anew)."""
        start, end = span
        if len(data) > end - start + 1:  # the range was not honoured: the whole file
            data = data[start : end + 1]
        if not data or data[0] != self.last_byte:
            self.known_size = None
            return None
        data = data[1:]
        self.known_size = self.read_to + len(data)
        return self.take(data, now, final=False) if data else []

    def unknown(self) -> None:
        """The file could not be read directly (gone, or not the one read so far): list the task's files next."""
        self.known_size = None

    def take(self, data: bytes, now: float, *, final: bool, starts: list[int] | None = None) -> list[str]:
        """Lines completed by ``data`` (the bytes at ``read_to``). ``final``: the task ended. ``starts``: the file
        offset of each line is appended to it."""
        if data:
            self.last_byte = data[-1]
        self.pending += data
        at_end = self.known_size is None or self.read_to >= self.known_size
        lines, used = self._split(final=final and at_end, starts=starts)
        if self.pending and (used or self.pending_since is None):
            self.pending_since = now  # an unfinished line starts here
        if final and at_end and not self.pending:
            self.cursor.done = True
        return lines

    def finish(self, starts: list[int] | None = None) -> list[str]:
        """The task ended and its file was read to the end (or is gone): show what is left, and stop."""
        lines, _ = self._split(final=True, starts=starts)
        self.cursor.done = True
        return lines

    def flush_if_stale(self, now: float, partial_line_seconds: float) -> list[str]:
        """An unfinished line that waited long enough (or grew too long) is shown as a line of its own."""
        if not self.pending or self.pending_since is None:
            return []
        if now - self.pending_since < partial_line_seconds:
            return []
        lines, _ = self._split(final=True)
        return lines

    def _split(self, *, final: bool, starts: list[int] | None = None) -> tuple[list[str], int]:
        """The lines of the pending bytes, which are then used, and how many bytes (``starts``: their file offsets
        are appended to it)."""
        offset = self.cursor.offset
        found: list[int] | None = [] if starts is not None else None
        lines, used = split_lines(bytes(self.pending), final=final, starts=found)
        self._advance(used)
        if starts is not None and found:
            starts.extend(offset + start for start in found)
        return lines, used

    def _advance(self, used: int) -> None:
        if used:
            self.cursor = StreamCursor(self.cursor.offset + used, self.cursor.created, self.cursor.done)
            del self.pending[:used]
        if not self.pending:
            self.pending_since = None
