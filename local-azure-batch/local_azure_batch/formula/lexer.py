"""The tokens of a formula, from the shared tokenizer: numbers, "strings", names, $variables, operators."""

from __future__ import annotations

import re

from local_azure_batch.lang import scanner
from local_azure_batch.lang.scanner import Token

from .errors import SYNTAX_ERROR, Failure

_RULES: list[scanner.Rule] = [
    scanner.comments("//", ("/*", "*/")),
    scanner.numbers(re.compile(r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"), float),
    scanner.strings('"', "unterminated string literal"),
    scanner.names("var", prefix="$", missing="expected a variable name after '$'"),
    scanner.names(),
    scanner.punctuation(("==", "!=", "<=", ">=", "&&", "||", *"+-*/!<>?:(),.;="), kind="op"),
]
_BAD_CHARS = {
    "%": "'%' is not an autoscale operator",
    "&": "'&' is not an autoscale operator; use '&&'",
    "|": "'|' is not an autoscale operator; use '||'",
    "[": "vector literals and indexing with '[' are not part of the autoscale language; use val(v, i)",
    "]": "vector literals and indexing with ']' are not part of the autoscale language; use val(v, i)",
    "'": "strings are written in double quotes",
}


def tokenize(text: str) -> list[Token]:
    """Kinds: number, string, name, var, op and end."""
    try:
        return scanner.tokenize(text, _RULES, lambda char: _BAD_CHARS.get(char, f"unexpected character '{char}'"))
    except scanner.ScanError as exc:
        raise Failure(SYNTAX_ERROR, exc.pos, exc.detail) from None
