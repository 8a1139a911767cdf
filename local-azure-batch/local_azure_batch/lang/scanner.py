"""The tokenizer and token stream both small languages of the service share (autoscale formulas, OData filters).

A language is a list of :data:`Rule` s tried in order at each position after white space; the first that
applies produces a token (or skips text, like a comment). The rule builders below cover what the two
languages have in common: names, numbers, quoted strings, punctuation and comments. Problems are raised as
:class:`ScanError` with the 0-based position; each language turns that into its own error.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class ScanError(ValueError):
    def __init__(self, pos: int, detail: str) -> None:
        super().__init__(detail)
        self.pos = pos
        self.detail = detail


class Token:
    __slots__ = ("kind", "pos", "text", "value")

    def __init__(self, kind: str, text: str, pos: int, value: Any = None) -> None:
        self.kind = kind
        self.text = text
        self.pos = pos
        self.value = value


END = "end"

# A rule looks at text[pos:]: None when it does not apply, else (the token or None to skip, the next position).
Rule = Callable[[str, int], "tuple[Token | None, int] | None"]


def tokenize(text: str, rules: Sequence[Rule], unexpected: Callable[[str], str]) -> list[Token]:
    """The tokens of ``text``, ending with an ``end`` token at ``len(text)``."""
    tokens: list[Token] = []
    pos = 0
    size = len(text)
    while pos < size:
        if text[pos].isspace():
            pos += 1
            continue
        for rule in rules:
            hit = rule(text, pos)
            if hit is not None:
                token, pos = hit
                if token is not None:
                    tokens.append(token)
                break
        else:
            raise ScanError(pos, unexpected(text[pos]))
    tokens.append(Token(END, "", size))
    return tokens


def names(kind: str = "name", prefix: str = "", missing: str = "") -> Rule:
    """Identifiers; with a ``prefix`` (``$``) only prefixed ones, and ``missing`` says what a bare prefix lacks."""

    def rule(text: str, pos: int) -> tuple[Token | None, int] | None:
        if prefix and not text.startswith(prefix, pos):
            return None
        match = NAME.match(text, pos + len(prefix))
        if match is None:
            if prefix:
                raise ScanError(pos, missing)
            return None
        return Token(kind, prefix + match.group(), pos), match.end()

    return rule


def numbers(pattern: re.Pattern[str], convert: Callable[[str], Any]) -> Rule:
    """Numbers matching ``pattern``; a letter or ``_`` straight after one is an error (``5x``)."""

    def rule(text: str, pos: int) -> tuple[Token | None, int] | None:
        match = pattern.match(text, pos)
        if match is None:
            return None
        end = match.end()
        if end < len(text) and (text[end].isalnum() or text[end] == "_"):
            raise ScanError(pos, f"malformed number '{text[pos : end + 1]}'")
        return Token("number", match.group(), pos, convert(match.group())), end

    return rule


def read_quoted(text: str, start: int, unterminated: str) -> tuple[str, int]:
    """The string quoted at ``start`` and the position after it.

    ``'`` strings double the quote to escape it (OData); ``"`` strings escape with a backslash.
    """
    quote = text[start]
    out: list[str] = []
    pos = start + 1
    size = len(text)
    while pos < size:
        char = text[pos]
        if char == quote:
            if quote == "'" and pos + 1 < size and text[pos + 1] == "'":
                out.append("'")
                pos += 2
                continue
            return "".join(out), pos + 1
        if char == "\\" and quote == '"' and pos + 1 < size:
            out.append(text[pos + 1])
            pos += 2
            continue
        out.append(char)
        pos += 1
    raise ScanError(start, unterminated)


def strings(quote: str, unterminated: str) -> Rule:
    def rule(text: str, pos: int) -> tuple[Token | None, int] | None:
        if text[pos] != quote:
            return None
        value, end = read_quoted(text, pos, unterminated)
        return Token("string", text[pos:end], pos, value), end

    return rule


def punctuation(symbols: Sequence[str], kind: str | None = None) -> Rule:
    """Operators and punctuation, longest first; the token kind is ``kind``, or the symbol itself."""
    ordered = sorted(symbols, key=len, reverse=True)

    def rule(text: str, pos: int) -> tuple[Token | None, int] | None:
        for symbol in ordered:
            if text.startswith(symbol, pos):
                return Token(kind or symbol, symbol, pos), pos + len(symbol)
        return None

    return rule


def comments(line: str, block: tuple[str, str]) -> Rule:
    opening, closing = block

    def rule(text: str, pos: int) -> tuple[Token | None, int] | None:
        if text.startswith(line, pos):
            end = text.find("\n", pos)
            return None, len(text) if end < 0 else end + 1
        if text.startswith(opening, pos):
            end = text.find(closing, pos + len(opening))
            if end < 0:
                raise ScanError(pos, f"unterminated {opening} comment")
            return None, end + len(closing)
        return None

    return rule


class TokenStream:
    """What a recursive-descent parser needs of its tokens: where it is, and moving on."""

    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.index = 0

    @property
    def current(self) -> Token:
        return self.tokens[self.index]

    def peek(self, offset: int = 1) -> Token:
        return self.tokens[min(self.index + offset, len(self.tokens) - 1)]

    def advance(self) -> Token:
        token = self.tokens[self.index]
        if token.kind != END:
            self.index += 1
        return token
