"""Reading task output files as lines: splitting, byte accounting, cursors and restart detection."""

from __future__ import annotations

import json
import random

import pytest

from airflow_provider_azbatch.model.lines import MAX_LINE_BYTES, decode_line, split_lines
from airflow_provider_azbatch.model.records import FileInfo
from airflow_provider_azbatch.watching.state import StreamCursor
from airflow_provider_azbatch.watching.streams import Tail

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
        # A progress bar redrawing itself with carriage returns shows as a terminal shows it.
        (b"mid\rline\n", False, (["line"], 9)),
        (b" 10%\r 50%\r100%\r\n", False, (["100%"], 16)),
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


def test_decode_line_keeps_the_last_carriage_return_segment():
    assert decode_line(b"a\rb\r") == "b"
    assert decode_line(b"\r\r") == ""
    assert decode_line(b"plain") == "plain"


# -- Tail: what to read next and which lines the bytes complete --------------------------------------


def _read(tail: Tail, data: bytes, max_bytes: int = 1 << 20) -> tuple[int, int] | None:
    """The range the tail asks for next, given the file is ``data``."""
    tail.observe(FileInfo(len(data), "t1"))
    return tail.next_range(max_bytes)


def test_tail_reads_only_new_bytes_and_keeps_an_unfinished_line():
    tail = Tail(StreamCursor())
    file = b"one\ntw"
    assert _read(tail, file) == (0, 5)
    assert tail.take(file, now=0.0, final=False) == ["one"]
    # The unfinished "tw" is kept, not read again: the next read starts after it.
    assert tail.cursor == StreamCursor(4, "t1")
    assert tail.read_to == 6
    file += b"o\nthree\n"
    assert _read(tail, file) == (6, len(file) - 1)
    assert tail.take(file[6:], now=1.0, final=False) == ["two", "three"]
    assert tail.cursor == StreamCursor(len(file), "t1")
    assert _read(tail, file) is None


def test_bytes_downloaded_equal_bytes_written_for_a_progress_bar():
    # 800 bytes a second, never a newline, read every second: each byte is fetched once.
    tail = Tail(StreamCursor())
    file = b""
    fetched = 0
    shown: list[str] = []
    for second in range(100):
        file += (f"\r{second:3d}% " + "#" * 794).encode()
        span = _read(tail, file)
        assert span is not None
        fetched += span[1] - span[0] + 1
        shown += tail.take(file[span[0] : span[1] + 1], now=float(second), final=False)
        shown += tail.flush_if_stale(float(second), partial_line_seconds=10.0)
    assert fetched == len(file) == 80000
    # Shown every 10 s, as the terminal would show the bar then.
    assert len(shown) == 9
    assert shown[0].startswith(" 10% ###")


def test_an_unfinished_line_is_shown_after_waiting_and_the_rest_continues_it():
    tail = Tail(StreamCursor())
    file = b"downloading 10%"
    _read(tail, file)
    assert tail.take(file, now=100.0, final=False) == []
    assert tail.flush_if_stale(105.0, partial_line_seconds=10.0) == []
    assert tail.flush_if_stale(110.0, partial_line_seconds=10.0) == ["downloading 10%"]
    file += b" ... done\n"
    span = _read(tail, file)
    assert span == (15, len(file) - 1)
    assert tail.take(file[15:], now=111.0, final=False) == [" ... done"]
    assert tail.cursor.offset == len(file)


def test_a_new_unfinished_line_waits_from_when_it_started():
    tail = Tail(StreamCursor())
    file = b"a"
    _read(tail, file)
    tail.take(file, now=0.0, final=False)
    file += b"\nb"
    _read(tail, file)
    assert tail.take(b"\nb", now=9.0, final=False) == ["a"]
    # "b" started at 9 s, not at 0 s.
    assert tail.flush_if_stale(12.0, partial_line_seconds=10.0) == []
    assert tail.flush_if_stale(19.0, partial_line_seconds=10.0) == ["b"]


def test_final_take_shows_the_last_unfinished_line_and_is_done():
    tail = Tail(StreamCursor())
    file = b"a\nlast"
    _read(tail, file)
    assert tail.take(file, now=0.0, final=True) == ["a", "last"]
    assert tail.cursor.done is True


def test_final_take_before_the_end_is_not_done():
    tail = Tail(StreamCursor())
    file = b"a\nb\nc"
    assert _read(tail, file, max_bytes=3) == (0, 2)
    assert tail.take(file[:3], now=0.0, final=True) == ["a"]
    assert tail.cursor.done is False
    assert _read(tail, file, max_bytes=3) == (3, 4)
    assert tail.take(file[3:], now=0.0, final=True) == ["b", "c"]
    assert tail.cursor.done is True


@pytest.mark.parametrize(
    ("cursor", "pending", "info", "restarted", "span"),
    [
        (StreamCursor(), b"", FileInfo(100, "t1"), False, (0, 99)),
        (StreamCursor(50, "t1"), b"", FileInfo(5000, "t1"), False, (50, 1049)),
        (StreamCursor(50, "t1"), b"", FileInfo(50, "t1"), False, None),
        (StreamCursor(50, "t1"), b"xy", FileInfo(60, "t1"), False, (52, 59)),
        # a new file (the task was retried): from the start
        (StreamCursor(50, "t1"), b"", FileInfo(200, "t2"), True, (0, 199)),
        # the file shrank: from the start
        (StreamCursor(50, "t1"), b"", FileInfo(10, "t1"), True, (0, 9)),
        (StreamCursor(50, "t1"), b"ab", FileInfo(51, "t1"), True, (0, 50)),
        # no creation time now or before: keep what is known
        (StreamCursor(50, "t1"), b"", FileInfo(60, None), False, (50, 59)),
        (StreamCursor(50, None), b"", FileInfo(60, "t1"), False, (50, 59)),
    ],
)
def test_observe_and_next_range(cursor, pending, info, restarted, span):
    tail = Tail(cursor, pending=bytearray(pending))
    assert tail.observe(info) is restarted
    assert tail.next_range(1000) == span
    if restarted:
        assert tail.cursor == StreamCursor(0, info.created)
        assert tail.pending == b""


def test_finish_shows_what_is_pending():
    tail = Tail(StreamCursor(3, "t1"), pending=bytearray(b"end"))
    assert tail.finish() == ["end"]
    assert tail.cursor == StreamCursor(6, "t1", True)


def test_split_lines_says_where_each_line_starts_and_a_tail_where_in_its_file():
    starts: list[int] = []
    assert split_lines(b"ab\ncd\r\nef", final=False, starts=starts) == (["ab", "cd"], 7)
    assert starts == [0, 3]
    tail = Tail(StreamCursor(100))
    offsets: list[int] = []
    assert tail.take(b"one\ntw", 0.0, final=False, starts=offsets) == ["one"]
    assert tail.take(b"o\nthree", 0.0, final=False, starts=offsets) == ["two"]
    assert tail.finish(offsets) == ["three"]
    assert offsets == [100, 104, 108]
