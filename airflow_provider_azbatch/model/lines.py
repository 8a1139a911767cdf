"""Bytes of a task's output file to log lines. No I/O.

Lines are cut at ``\\n`` (never inside a multi-byte character) or, for over-long lines, at a character
boundary. A line holding carriage returns (a progress bar redrawing itself) is shown as a terminal
would show it: its last non-empty ``\\r`` segment.
"""

from __future__ import annotations

# A "line" longer than this (a progress bar without newlines) is printed in pieces.
MAX_LINE_BYTES = 64 * 1024


def decode_line(raw: bytes) -> str:
    text = raw.rstrip(b"\r").decode("utf-8", errors="replace")
    if "\r" in text:
        segments = [segment for segment in text.split("\r") if segment]
        text = segments[-1] if segments else ""
    return text


def split_lines(
    data: bytes, *, final: bool, max_line_bytes: int = MAX_LINE_BYTES, starts: list[int] | None = None
) -> tuple[list[str], int]:
    """Complete lines in ``data`` (decoded, newline removed) and how many bytes they used.

    ``final``: no more bytes will come, so a last unterminated line counts as a line. ``starts``: where each
    line starts in ``data`` is appended to it (what a line's offset in its file says, such as when it was written).
    """
    lines: list[str] = []
    position = 0
    length = len(data)
    while position < length:
        # +2: a line of exactly max_line_bytes may still be followed by "\r\n".
        newline = data.find(b"\n", position, position + max_line_bytes + 2)
        if newline != -1:
            end, after = newline, newline + 1
        elif length - position > max_line_bytes:
            end = after = char_boundary(data, position + max_line_bytes, position)
        elif final:
            end = after = length
        else:
            break
        if starts is not None:
            starts.append(position)
        lines.append(decode_line(data[position:end]))
        position = after
    return lines, position


def char_boundary(data: bytes, cut: int, floor: int) -> int:
    """Move a cut left off UTF-8 continuation bytes, so a character is not split in two."""
    probe = cut
    while probe > floor + 1 and cut - probe < 4 and (data[probe] & 0xC0) == 0x80:
        probe -= 1
    return probe if probe > floor else cut


def last_lines(data: bytes, count: int, *, trimmed: bool) -> list[str]:
    """The last ``count`` lines of the end of a file; ``trimmed``: ``data`` does not start at the file's start."""
    if trimmed and b"\n" in data:
        data = data[data.index(b"\n") + 1 :]  # drop the partial first line of the window
    lines, _ = split_lines(data, final=True)
    return lines[-count:] if count > 0 else []
