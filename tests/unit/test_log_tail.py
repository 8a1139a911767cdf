"""Reading task output files as lines: splitting, byte accounting, cursors and restart detection."""

from __future__ import annotations

import json
import random
from datetime import datetime, timezone

import pytest

from airflow_provider_azbatch.utils.log_tail import (
    MAX_LINE_BYTES,
    StreamCursor,
    _advance,
    _created_marker,
    _plan,
    split_lines,
)

# -- split_lines -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "final", "expected"),
    [
        (b"", False, ([], 0)),
        (b"", True, ([], 0)),
        (b"a\nb\n", False, (["a", "b"], 4)),
        (b"a\nb\npartial", False, (["a", "b"], 4)),
        (b"a\nb\npartial", True, (["a", "b", "partial"], 11)),
        (b"partial", False, ([], 0)),
        (b"partial", True, (["partial"], 7)),
        (b"\n\n\n", False, (["", "", ""], 3)),
        (b"a\n\nb\n", False, (["a", "", "b"], 5)),
        (b"a\r\nb\r\n", False, (["a", "b"], 6)),
        (b"a\r\nb\r", False, (["a"], 3)),
        (b"a\r\nb\r", True, (["a", "b"], 5)),
        (b"\r\n", False, ([""], 2)),
        (b"mid\rline\n", False, (["mid\rline"], 9)),
        (b"tab\there  \n", False, (["tab\there  "], 11)),
    ],
)
def test_split_lines(data, final, expected):
    assert split_lines(data, final=final) == expected


def test_non_utf8_bytes_are_replaced():
    lines, used = split_lines(b"ok \xff\xfe end\nlatin1 caf\xe9\n", final=False)

    assert lines == ["ok \ufffd\ufffd end", "latin1 caf\ufffd"]
    assert used == 22


def test_multi_byte_characters_are_decoded():
    data = "héllo wörld 日本 🚀\n".encode()

    assert split_lines(data, final=False) == (["héllo wörld 日本 🚀"], len(data))


def test_partial_multi_byte_character_waits_for_the_rest():
    data = "ok\n日".encode()

    assert split_lines(data[:-1], final=False) == (["ok"], 3)
    assert split_lines(data, final=True) == (["ok", "日"], len(data))


def test_over_long_lines_are_cut():
    assert split_lines(b"abcdefghij\n", final=False, max_line_bytes=4) == (["abcd", "efgh", "ij"], 11)


def test_over_long_unfinished_line_is_cut_but_its_tail_waits():
    assert split_lines(b"abcdefghij", final=False, max_line_bytes=4) == (["abcd", "efgh"], 8)
    assert split_lines(b"abcdefghij", final=True, max_line_bytes=4) == (["abcd", "efgh", "ij"], 10)


def test_line_of_exactly_max_bytes_is_one_line():
    assert split_lines(b"abcd\nef\n", final=False, max_line_bytes=4) == (["abcd", "ef"], 8)
    assert split_lines(b"abcd", final=False, max_line_bytes=4) == ([], 0)
    assert split_lines(b"abcde", final=False, max_line_bytes=4) == (["abcd"], 4)


@pytest.mark.parametrize(
    ("text", "max_line_bytes", "pieces"),
    [
        ("aé b", 2, ["a", "é", " b"]),  # é is 2 bytes: the cut at 2 would split it
        ("abé", 2, ["ab", "é"]),  # the cut falls right before é
        ("ab😀cd", 4, ["ab", "😀", "cd"]),  # 4-byte character from byte 2 to 5
        ("a😀", 4, ["a", "😀"]),  # cut between the 3rd and 4th byte of 😀
        ("日本語", 4, ["日", "本", "語"]),
        ("日本語", 6, ["日本", "語"]),
    ],
)
def test_over_long_lines_are_cut_on_a_character_boundary(text, max_line_bytes, pieces):
    data = text.encode()

    lines, used = split_lines(data, final=True, max_line_bytes=max_line_bytes)

    assert lines == pieces
    assert used == len(data)
    assert "".join(lines) == text
    assert all(len(line.encode()) <= max_line_bytes for line in lines)


def test_real_limit_with_a_multi_byte_character_at_the_cut():
    # é takes the bytes at MAX_LINE_BYTES - 1 and MAX_LINE_BYTES: the piece stops before it.
    data = b"x" * (MAX_LINE_BYTES - 1) + "étail\n".encode()

    lines, used = split_lines(data, final=False)

    assert lines == ["x" * (MAX_LINE_BYTES - 1), "étail"]
    assert used == len(data)


def test_real_limit_cut_exactly_at_the_limit():
    data = b"y" * (MAX_LINE_BYTES * 2 + 10)

    lines, used = split_lines(data, final=False)

    assert lines == ["y" * MAX_LINE_BYTES, "y" * MAX_LINE_BYTES]
    assert used == MAX_LINE_BYTES * 2
    assert MAX_LINE_BYTES == 64 * 1024


def test_used_bytes_carry_over_exactly_between_reads():
    # Feeding a stream in random pieces, carrying over what was not used, gives the lines of a single read.
    rng = random.Random(1234)
    parts = ["plain", "", "crlf\r", "é日🚀", "日本語のテキストです", "x" * 37, "bad \udcff\udcfe", "tail"]
    text = "\n".join(rng.choice(parts) for _ in range(300))
    data = text.encode("utf-8", errors="surrogateescape")
    whole, whole_used = split_lines(data, final=True, max_line_bytes=16)

    lines: list[str] = []
    offset = 0
    while offset < len(data):
        end = min(len(data), offset + rng.randint(1, 40))
        got, used = split_lines(data[offset:end], final=end == len(data), max_line_bytes=16)
        lines += got
        offset += used
        if end == len(data):
            break

    assert whole_used == len(data)
    assert offset == len(data)
    assert lines == whole


def test_binary_output_is_cut_into_full_pieces():
    data = b"\x80" * 1000

    lines, used = split_lines(data, final=True, max_line_bytes=100)

    assert used == 1000
    assert len(lines) <= 11  # about 1000 / 100 pieces, not one per byte


def test_crlf_line_of_exactly_max_bytes_is_one_line():
    assert split_lines(b"abcd\r\nef\r\n", final=False, max_line_bytes=4) == (["abcd", "ef"], 10)


# -- StreamCursor ----------------------------------------------------------------------------------


def test_stream_cursor_json_round_trip():
    cursor = StreamCursor(offset=1234, created="2024-05-01T10:00:00+00:00", done=True)

    data = json.loads(json.dumps(cursor.to_json()))

    assert data == {"offset": 1234, "created": "2024-05-01T10:00:00+00:00", "done": True}
    assert StreamCursor.from_json(data) == cursor


@pytest.mark.parametrize("data", [None, {}])
def test_stream_cursor_from_nothing(data):
    assert StreamCursor.from_json(data) == StreamCursor(0, None, False)


def test_created_marker():
    when = datetime(2024, 5, 1, 10, 0, tzinfo=timezone.utc)

    assert _created_marker(when) == "2024-05-01T10:00:00+00:00"
    assert _created_marker("Wed, 01 May 2024 10:00:00 GMT") == "Wed, 01 May 2024 10:00:00 GMT"
    assert _created_marker(None) is None


# -- _plan / _advance ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cursor", "size", "created", "max_bytes", "expected"),
    [
        # first read
        (StreamCursor(), 100, "t1", 1000, (StreamCursor(0, "t1"), False, 100)),
        # more than max_bytes is waiting: read a window
        (StreamCursor(50, "t1"), 5000, "t1", 1000, (StreamCursor(50, "t1"), False, 1050)),
        # nothing new
        (StreamCursor(50, "t1"), 50, "t1", 1000, (StreamCursor(50, "t1"), False, 50)),
        # a new file (the task was retried): from the start
        (StreamCursor(50, "t1"), 200, "t2", 1000, (StreamCursor(0, "t2"), True, 200)),
        (StreamCursor(50, "t1"), 2000, "t2", 100, (StreamCursor(0, "t2"), True, 100)),
        # the file shrank: from the start
        (StreamCursor(50, "t1"), 10, "t1", 1000, (StreamCursor(0, "t1"), True, 10)),
        (StreamCursor(50, "t1"), 49, "t1", 1000, (StreamCursor(0, "t1"), True, 49)),
        (StreamCursor(50, None), 10, None, 1000, (StreamCursor(0, None), True, 10)),
        # no creation time now or before: keep what is known
        (StreamCursor(50, "t1"), 60, None, 1000, (StreamCursor(50, "t1"), False, 60)),
        (StreamCursor(50, None), 60, "t1", 1000, (StreamCursor(50, "t1"), False, 60)),
        # a done cursor starts over as not done
        (StreamCursor(50, "t1", done=True), 80, "t1", 1000, (StreamCursor(50, "t1"), False, 80)),
    ],
)
def test_plan(cursor, size, created, max_bytes, expected):
    assert _plan(cursor, size, created, max_bytes) == expected


@pytest.mark.parametrize(
    ("final", "at_end", "lines", "cursor"),
    [
        (False, True, ["a"], StreamCursor(12, "t1", False)),
        (True, False, ["a"], StreamCursor(12, "t1", False)),
        (True, True, ["a", "b"], StreamCursor(13, "t1", True)),
    ],
)
def test_advance(final, at_end, lines, cursor):
    assert _advance(StreamCursor(10, "t1"), b"a\nb", final=final, at_end=at_end) == (lines, cursor)


def test_advance_is_not_done_while_an_over_long_line_is_pending():
    # final and at end, everything used: done.
    assert _advance(StreamCursor(0, "t1"), b"abc", final=True, at_end=True) == (["abc"], StreamCursor(3, "t1", True))
    # a partial line and not final: the cursor stays before it.
    assert _advance(StreamCursor(0, "t1"), b"abc", final=False, at_end=True) == ([], StreamCursor(0, "t1", False))
