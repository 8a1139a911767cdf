"""The OData ``$filter`` subset that Batch list operations accept, compiled to a Python predicate.

``compile_filter("state eq 'completed' and executionInfo/exitCode ne 0")`` returns a function that
takes one already-serialised camelCase entity (a dict) and answers whether it matches. Parsing is
a small recursive-descent parser; nothing is ever passed to ``eval``. A filter is compiled once and
then run over every entity of a list, so all literal work (case folding, datetime parsing) happens
at compile time and evaluation is a chain of plain closures.

Semantics chosen to match how the Batch service behaves:

* a property that is absent (at any step of a ``a/b/c`` path) is ``null``;
* ``eq``/``ne`` against ``null`` test presence; every ordering comparison with ``null`` is false;
* two strings compare case-insensitively, because the service treats enum values (``state``) and
  ids that way;
* ``datetime'...'`` compares as an aware datetime against the entity's ISO-8601 string;
* values of different kinds (a string and a number) are never equal and never ordered.

``not`` applies to the comparison that follows it (``not state eq 'active'`` means
``not (state eq 'active')``), which is what people writing Batch filters mean, even though the
OData grammar would bind it to ``state`` alone.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from local_azure_batch.lang import scanner
from local_azure_batch.lang.scanner import END, Token, TokenStream
from local_azure_batch.lang.times import parse_iso_datetime, parse_rfc1123

if TYPE_CHECKING:
    from .query_options import FilterProperty

__all__ = ["CompiledFilter", "ODataFilterError", "ODataRuleError", "compile_filter", "parse_iso_datetime"]

Predicate = Callable[[Mapping[str, Any]], bool]
_Getter = Callable[[Mapping[str, Any]], Any]


class ODataFilterError(ValueError):
    """A ``$filter`` the parser cannot accept; ``position`` is the 0-based character offset."""

    def __init__(self, position: int, detail: str) -> None:
        super().__init__(f"Syntax error at position {position}: {detail}")
        self.position = position
        self.detail = detail


class ODataRuleError(ODataFilterError):
    """A well-formed ``$filter`` that uses a property, operator or value the list does not accept."""

    def __init__(self, position: int, detail: str) -> None:
        ValueError.__init__(self, f"{detail} (at position {position})")
        self.position = position
        self.detail = detail


# ---------------------------------------------------------------------------------------------
# Tokens
# ---------------------------------------------------------------------------------------------

_COMPARISONS = frozenset({"eq", "ne", "gt", "ge", "lt", "le"})
# Mirror of each operator for when the literal is written on the left: 5 lt x  ==  x gt 5.
_MIRRORED = {"eq": "eq", "ne": "ne", "gt": "lt", "ge": "le", "lt": "gt", "le": "ge"}
_FUNCTIONS = {"startswith": 2, "endswith": 2, "substringof": 2, "contains": 2}

# Words that end an operand, so "state eq and ..." is reported as a missing value.
_STOPWORDS = _COMPARISONS | {"and", "or", "not"}

_UNTERMINATED = "unterminated string literal (strings are quoted with ' and '' escapes a quote)"


def _number(raw: str) -> int | float:
    return int(raw) if "." not in raw and "e" not in raw.lower() else float(raw)


def _datetime_literal(text: str, pos: int) -> tuple[Token | None, int] | None:
    """``datetime'2025-01-01T00:00:00Z'``: a name straight followed by a quoted string."""
    end = pos + len("datetime")
    if text[pos:end].lower() != "datetime" or not text.startswith("'", end):
        return None
    value, end = scanner.read_quoted(text, end, _UNTERMINATED)
    # W3C-DTF or RFC 1123, the two forms the Batch docs give ("Rules for filter, select, and expand strings").
    parsed = parse_iso_datetime(value) or parse_rfc1123(value)
    if parsed is None:
        raise scanner.ScanError(
            pos, f"invalid datetime literal '{value}' (expected e.g. datetime'2025-01-01T00:00:00Z')"
        )
    return Token("datetime", text[pos:end], pos, parsed), end


_RULES: list[scanner.Rule] = [
    scanner.punctuation(("(", ")", ",", "/")),
    scanner.strings("'", _UNTERMINATED),
    scanner.numbers(re.compile(r"-?(?:[0-9]+\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+|[0-9]+)"), _number),
    _datetime_literal,
    scanner.names(),
]


def _tokenize(text: str) -> list[Token]:
    """Kinds: name, string, number, datetime, the punctuation ( ) , / themselves, and end."""
    try:
        return scanner.tokenize(text, _RULES, lambda char: f"unexpected character '{char}'")
    except scanner.ScanError as exc:
        raise ODataFilterError(exc.pos, exc.detail) from None


def _describe(token: Token) -> str:
    if token.kind == END:
        return "the end of the filter"
    if token.kind in ("string", "datetime"):
        return token.text  # already quoted
    return f"'{token.text}'"


# ---------------------------------------------------------------------------------------------
# Parsed operands
# ---------------------------------------------------------------------------------------------

# "This value is of another kind than the literal", distinct from a JSON null.
_MISSING = object()


class _Operand:
    """One side of a comparison: a property path, a literal, or a boolean sub-expression."""

    __slots__ = ("getter", "is_literal", "kind", "pos", "text", "value")

    def __init__(self, kind: str, pos: int, text: str, getter: _Getter, value: Any = _MISSING) -> None:
        # kind: property | literal | bool (a parenthesised condition or a function call)
        self.kind = kind
        self.pos = pos
        self.text = text
        self.getter = getter
        self.value = value
        self.is_literal = kind == "literal"


def _path_getter(path: tuple[str, ...]) -> _Getter:
    if len(path) == 1:
        (name,) = path

        def get_one(entity: Mapping[str, Any]) -> Any:
            return entity.get(name)

        return get_one

    def get_path(entity: Mapping[str, Any]) -> Any:
        value: Any = entity
        for name in path:
            if not isinstance(value, Mapping):
                return None
            value = value.get(name)
            if value is None:
                return None
        return value

    return get_path


def _constant(value: Any) -> _Getter:
    def get_constant(_entity: Mapping[str, Any]) -> Any:
        return value

    return get_constant


# ---------------------------------------------------------------------------------------------
# Comparison semantics
# ---------------------------------------------------------------------------------------------


def _normalise_literal(value: Any) -> tuple[str, Any]:
    """(category, comparable) for a literal, computed once at compile time."""
    if value is None:
        return "null", None
    if isinstance(value, bool):
        return "bool", value
    if isinstance(value, (int, float)):
        return "number", value
    if isinstance(value, datetime):
        return "datetime", value
    return "string", value.casefold()


def _normalise_value(value: Any, want: str) -> Any:
    """The entity value as a ``want`` comparable, or ``_MISSING`` if it is another kind."""
    if want == "string":
        return value.casefold() if isinstance(value, str) else _MISSING
    if want == "number":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return _MISSING
        return value
    if want == "bool":
        return value if isinstance(value, bool) else _MISSING
    if want == "datetime":
        if isinstance(value, datetime):
            return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
        if isinstance(value, str):
            parsed = parse_iso_datetime(value)
            return _MISSING if parsed is None else parsed
        return _MISSING
    return _MISSING


def _category(value: Any) -> str | None:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, datetime):
        return "datetime"
    return None


def _apply(op: str, left: Any, right: Any) -> bool:
    if op == "eq":
        return bool(left == right)
    if op == "ne":
        return bool(left != right)
    if op == "gt":
        return bool(left > right)
    if op == "ge":
        return bool(left >= right)
    if op == "lt":
        return bool(left < right)
    return bool(left <= right)


def _compare_values(op: str, left: Any, right: Any) -> bool:
    """General comparison of two runtime values (neither side known at compile time)."""
    if left is None or right is None:
        if op == "eq":
            return left is None and right is None
        if op == "ne":
            return not (left is None and right is None)
        return False
    left_kind = _category(left)
    right_kind = _category(right)
    if left_kind == "datetime" or right_kind == "datetime":
        left = _normalise_value(left, "datetime")
        right = _normalise_value(right, "datetime")
    elif left_kind == right_kind == "string":
        left = left.casefold()
        right = right.casefold()
    elif left_kind != right_kind or left_kind is None:
        left = _MISSING
    if left is _MISSING or right is _MISSING:
        return op == "ne"
    return _apply(op, left, right)


def _compile_comparison(op: str, left: _Operand, right: _Operand) -> Predicate:
    if left.is_literal and right.is_literal:
        result = _compare_values(op, left.value, right.value)
        return lambda _entity: result
    if left.is_literal:
        # Keep the fast path below by always having the literal on the right.
        left, right, op = right, left, _MIRRORED[op]
    if not right.is_literal:
        get_left, get_right = left.getter, right.getter
        return lambda entity: _compare_values(op, get_left(entity), get_right(entity))

    get = left.getter
    kind, literal = _normalise_literal(right.value)
    if kind == "null":
        if op == "eq":
            return lambda entity: get(entity) is None
        if op == "ne":
            return lambda entity: get(entity) is not None
        return lambda _entity: False

    if kind == "string" and op in ("eq", "ne"):
        # The overwhelmingly common case (state eq 'completed'); kept free of helper calls.
        if op == "eq":

            def string_eq(entity: Mapping[str, Any]) -> bool:
                value = get(entity)
                return value.__class__ is str and value.casefold() == literal

            return string_eq

        def string_ne(entity: Mapping[str, Any]) -> bool:
            value = get(entity)
            return not (value.__class__ is str and value.casefold() == literal)

        return string_ne

    mismatch = op == "ne"

    def compare_to_literal(entity: Mapping[str, Any]) -> bool:
        value = get(entity)
        if value is None:
            return op == "ne"
        value = _normalise_value(value, kind)
        if value is _MISSING:
            return mismatch
        return _apply(op, value, literal)

    return compare_to_literal


def _compile_function(name: str, args: list[_Operand]) -> Predicate:
    # substringof is the OData v2 spelling with its arguments the other way round.
    if name == "substringof":
        needle_op, haystack_op = args
    else:
        haystack_op, needle_op = args
    get_haystack, get_needle = haystack_op.getter, needle_op.getter

    test: Callable[[str, str], bool]
    if name == "startswith":
        test = str.startswith
    elif name == "endswith":
        test = str.endswith
    else:
        test = str.__contains__

    if needle_op.is_literal and isinstance(needle_op.value, str):
        needle_folded = needle_op.value.casefold()

        def call_literal(entity: Mapping[str, Any]) -> bool:
            haystack = get_haystack(entity)
            return isinstance(haystack, str) and test(haystack.casefold(), needle_folded)

        return call_literal

    def call(entity: Mapping[str, Any]) -> bool:
        haystack = get_haystack(entity)
        needle = get_needle(entity)
        if not isinstance(haystack, str) or not isinstance(needle, str):
            return False
        return test(haystack.casefold(), needle.casefold())

    return call


# ---------------------------------------------------------------------------------------------
# Parser
# ---------------------------------------------------------------------------------------------


class _Parser(TokenStream):
    def __init__(self, text: str, rules: Mapping[str, FilterProperty] | None = None, list_name: str = "") -> None:
        super().__init__(_tokenize(text))
        self.text = text
        # The top-level properties the filter reads (the first step of each a/b/c path).
        self.fields: set[str] = set()
        # With rules, only "property operator literal" conditions on the list's documented properties,
        # startswith() where documented, and/or and parentheses are accepted (see query_options.py).
        self.rules = rules
        self.list_name = list_name

    def refuse(self, position: int, detail: str) -> ODataRuleError:
        return ODataRuleError(position, detail)

    def known_properties(self) -> str:
        assert self.rules is not None
        return ", ".join(sorted(self.rules))

    def rule_for(self, operand: _Operand) -> FilterProperty:
        assert self.rules is not None
        rule = self.rules.get(operand.text)
        if rule is None:
            raise self.refuse(
                operand.pos,
                f"{self.list_name} cannot filter on '{operand.text}'; its filterable properties (names are "
                f"case-sensitive) are: {self.known_properties()}",
            )
        return rule

    def check_comparison(self, op: str, left: _Operand, right: _Operand) -> _Operand:
        """The property operand of a documented ``property op literal`` condition (refused otherwise)."""
        if left.kind != "property":
            if left.kind == "bool":
                raise self.refuse(
                    left.pos,
                    f"'{left.text}' cannot be compared with '{op}': a condition is a property, an "
                    "operator and a value, combined with 'and' and 'or'",
                )
            raise self.refuse(
                left.pos, f"the property must come first: write the condition as <property> {op} {left.text}"
            )
        if right.kind != "literal":
            raise self.refuse(right.pos, f"'{left.text} {op}' must be followed by a value, not '{right.text}'")
        rule = self.rule_for(left)
        if op not in rule.operators:
            allowed = ", ".join(sorted(rule.operators))
            raise self.refuse(left.pos, f"{self.list_name} allows only {allowed} on '{left.text}', not '{op}'")
        value = right.value
        if value is None:
            raise self.refuse(right.pos, f"'{left.text}' cannot be compared with null")
        expected = {"string": str, "int": int, "bool": bool, "datetime": datetime}[rule.kind]
        wrong_kind = not isinstance(value, expected) or (rule.kind == "int" and isinstance(value, bool))
        if wrong_kind:
            example = {
                "string": "'text'",
                "int": "0",
                "bool": "true or false",
                "datetime": "datetime'2026-12-02T07:00:00Z'",
            }[rule.kind]
            kind = {"string": "a string", "int": "an integer", "bool": "a boolean", "datetime": "a datetime"}[rule.kind]
            raise self.refuse(right.pos, f"'{left.text}' is {kind} and is compared with {kind} value such as {example}")
        if rule.values is not None and value.casefold() not in rule.values:
            raise self.refuse(
                right.pos,
                f"{right.text} is not a value of '{left.text}': {', '.join(rule.values)}",
            )
        return left

    def keyword(self, token: Token | None = None) -> str | None:
        token = token or self.current
        return token.text.lower() if token.kind == "name" else None

    def error(self, token: Token, detail: str) -> ODataFilterError:
        return ODataFilterError(token.pos, detail)

    # filter := or_expr end
    def parse(self) -> Predicate:
        if self.current.kind == END:
            raise self.error(self.current, "the filter is empty")
        predicate = self.parse_or(None)
        token = self.current
        if token.kind != END:
            if token.kind == ")":
                raise self.error(token, "unmatched ')'")
            raise self.error(
                token,
                f"expected 'and', 'or' or the end of the filter but found {_describe(token)}",
            )
        return predicate

    # or_expr := and_expr ('or' and_expr)*
    def parse_or(self, after: str | None) -> Predicate:
        return self._chain("or", self.parse_and, after)

    # and_expr := unary ('and' unary)*
    def parse_and(self, after: str | None) -> Predicate:
        return self._chain("and", self.parse_not, after)

    def _chain(self, word: str, operand: Callable[[str | None], Predicate], after: str | None) -> Predicate:
        parts = [operand(after)]
        while self.keyword() == word:
            self.advance()
            parts.append(operand(word))
        if len(parts) == 1:
            return parts[0]
        if len(parts) == 2:
            first, second = parts
            if word == "or":
                return lambda entity: first(entity) or second(entity)
            return lambda entity: first(entity) and second(entity)
        combine = any if word == "or" else all
        return lambda entity: combine(part(entity) for part in parts)

    # unary := 'not' unary | condition
    def parse_not(self, after: str | None) -> Predicate:
        if self.keyword() == "not" and self.rules is not None:
            raise self.refuse(
                self.current.pos, "'not' is not supported: use the opposite operator (ne for eq, lt for ge, ...)"
            )
        if self.keyword() == "not":
            self.advance()
            inner = self.parse_not("not")
            return lambda entity: not inner(entity)
        return self.parse_condition(after)

    # condition := operand (comparison operand)?
    def parse_condition(self, after: str | None) -> Predicate:
        left = self.parse_operand(after)
        op = self.keyword()
        if op in _COMPARISONS:
            op_token = self.advance()
            right = self.parse_operand(op_token.text)
            if self.rules is not None:
                self.check_comparison(op, left, right)
            return _compile_comparison(op, left, right)
        if self.rules is not None and left.kind != "bool":
            raise self.refuse(
                left.pos,
                f"'{left.text}' is not a condition: write <property> <operator> <value>, e.g. state eq 'active'",
            )
        if left.kind == "bool":
            getter = left.getter
            return lambda entity: getter(entity) is True
        if left.kind == "property":
            if self.current.kind in ("string", "number", "datetime") or (
                self.current.kind == "name" and self.keyword() not in ("and", "or")
            ):
                raise self.error(
                    self.current,
                    "expected a comparison operator (eq, ne, gt, ge, lt, le) after "
                    f"'{left.text}' but found {_describe(self.current)}",
                )
            # A bare boolean property, e.g. "allowTaskPreemption".
            getter = left.getter
            return lambda entity: getter(entity) is True
        if left.value is True or left.value is False:
            constant = left.value
            return lambda _entity: constant
        raise self.error(self.current, f"expected a comparison operator (eq, ne, gt, ge, lt, le) after {left.text}")

    def parse_operand(self, after: str | None) -> _Operand:
        token = self.current
        if (
            token.kind == END
            or token.kind in (")", ",", "/")
            or (token.kind == "name" and self.keyword(token) in _STOPWORDS)
        ):
            if after is None:
                raise self.error(token, f"expected a condition but found {_describe(token)}")
            if after.lower() in _COMPARISONS:
                raise self.error(token, f"expected a value after '{after}'")
            if after.endswith("()"):
                raise self.error(token, f"expected an argument for {after} but found {_describe(token)}")
            raise self.error(token, f"expected a condition after '{after}'")
        if token.kind == "(":
            self.advance()
            inner = self.parse_or("(")
            closing = self.current
            if closing.kind != ")":
                raise self.error(closing, f"expected ')' to close the '(' at position {token.pos}")
            self.advance()
            return _Operand("bool", token.pos, self.text[token.pos : closing.pos + 1], inner)
        if token.kind in ("string", "number", "datetime"):
            self.advance()
            return _Operand("literal", token.pos, token.text, _constant(token.value), token.value)
        # A name: literal keyword, function call or property path.
        self.advance()
        word = token.text.lower()
        if word in ("true", "false", "null"):
            value = {"true": True, "false": False, "null": None}[word]
            return _Operand("literal", token.pos, token.text, _constant(value), value)
        if self.current.kind == "(":
            return self.parse_call(token)
        path = [token.text]
        while self.current.kind == "/":
            slash = self.advance()
            segment = self.current
            if segment.kind != "name" or segment.text.lower() in _STOPWORDS:
                raise self.error(segment, f"expected a property name after the '/' at position {slash.pos}")
            self.advance()
            path.append(segment.text)
        text = "/".join(path)
        if self.rules is not None:
            rule = self.rules.get(text)
            if rule is not None and rule.path is not None:
                path = rule.path.split("/")
        self.fields.add(path[0])
        return _Operand("property", token.pos, text, _path_getter(tuple(path)))

    def parse_call(self, name_token: Token) -> _Operand:
        name = name_token.text.lower()
        if name not in _FUNCTIONS:
            known = ", ".join(sorted(_FUNCTIONS))
            raise self.error(name_token, f"unknown function '{name_token.text}' (supported: {known})")
        open_paren = self.advance()
        args: list[_Operand] = []
        if self.current.kind != ")":
            while True:
                arg_token = self.current
                if arg_token.kind == "(":
                    raise self.error(arg_token, f"arguments of {name}() must be a property or a literal")
                arg = self.parse_operand(f"{name}()")
                if arg.kind == "bool":
                    raise self.error(arg_token, f"arguments of {name}() must be a property or a literal")
                args.append(arg)
                if self.current.kind == ",":
                    self.advance()
                    continue
                break
        closing = self.current
        if closing.kind != ")":
            raise self.error(
                closing,
                f"expected ',' or ')' in the call to {name}() opened at position {open_paren.pos} "
                f"but found {_describe(closing)}",
            )
        self.advance()
        if len(args) != _FUNCTIONS[name]:
            raise self.error(name_token, f"{name}() takes {_FUNCTIONS[name]} arguments, got {len(args)}")
        if self.rules is not None:
            self.check_call(name_token, name, args)
        predicate = _compile_function(name, args)
        return _Operand("bool", name_token.pos, self.text[name_token.pos : closing.pos + 1], predicate)

    def check_call(self, name_token: Token, name: str, args: list[_Operand]) -> None:
        """Only ``startswith(<property>, '<text>')``, on properties documented with ``startswith``."""
        if name != "startswith":
            raise self.refuse(
                name_token.pos, f"{name}() is not supported; the only function is startswith(<property>, '<prefix>')"
            )
        prop, prefix = args
        if prop.kind != "property" or prefix.kind != "literal" or not isinstance(prefix.value, str):
            raise self.refuse(name_token.pos, "startswith takes a property and a quoted prefix: startswith(id, 'abc')")
        rule = self.rule_for(prop)
        if "startswith" not in rule.operators:
            allowed = ", ".join(sorted(rule.operators))
            raise self.refuse(
                name_token.pos, f"{self.list_name} allows only {allowed} on '{prop.text}', not startswith"
            )


class CompiledFilter:
    """A compiled ``$filter``: call it with a serialised entity; ``fields`` are the top-level properties it reads."""

    __slots__ = ("_test", "fields", "text")

    def __init__(self, text: str, test: Predicate, fields: frozenset[str]) -> None:
        self.text = text
        self._test = test
        self.fields = fields

    def __call__(self, entity: Mapping[str, Any]) -> bool:
        return self._test(entity)


def compile_filter(
    text: str, rules: Mapping[str, FilterProperty] | None = None, list_name: str = "This list"
) -> CompiledFilter:
    """Compile an OData ``$filter`` into a predicate over serialised entities.

    Raises :class:`ODataFilterError` (a ``ValueError``) with the 0-based character position of
    the problem; the REST layer turns that into the service's ``InvalidQueryParameterValue``. With
    ``rules`` (a list's filterable properties, ``query_options.py``), anything else the list does not
    accept raises :class:`ODataRuleError`.
    """
    if not isinstance(text, str):
        raise TypeError(f"filter must be a string, not {type(text).__name__}")
    parser = _Parser(text, rules, list_name)
    test = parser.parse()
    return CompiledFilter(text, test, frozenset(parser.fields))
