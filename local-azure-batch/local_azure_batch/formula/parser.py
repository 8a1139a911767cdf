"""Formulas parsed into statements: a recursive-descent parser that checks names, arities and assignments."""

from __future__ import annotations

from local_azure_batch.lang.scanner import END, Token, TokenStream

from .errors import FORMULA_TOO_LONG, NOT_SUPPORTED, SYNTAX_ERROR, Failure, line_col
from .lexer import tokenize
from .syntax import (
    Binary,
    Constant,
    FunctionCall,
    Logical,
    Member,
    MethodCall,
    Node,
    ServiceVariable,
    Statement,
    Ternary,
    Unary,
    UserVariable,
)
from .values import Interval
from .vocabulary import (
    ALIASES,
    DEALLOCATION,
    DEALLOCATION_OPTIONS,
    FUNCTIONS,
    MAX_FORMULA_LENGTH,
    MAX_STATEMENTS,
    METHODS,
    READ_ONLY,
    RESOURCE_METRICS,
    SAMPLED_VARIABLES,
    SCALAR_READ_ONLY,
    SERVICE_NAMES,
    TIME_INTERVALS,
    TIMESTAMP_MEMBERS,
    WRITABLE,
)


def parse(formula: str) -> list[Statement]:
    if len(formula) > MAX_FORMULA_LENGTH:
        raise Failure(
            FORMULA_TOO_LONG,
            None,
            f"The formula is {len(formula)} characters long; the limit is {MAX_FORMULA_LENGTH}",
        )
    return Parser(formula).parse_program()


class Parser(TokenStream):
    def __init__(self, text: str) -> None:
        super().__init__(tokenize(text))
        self.text = text
        self.assigned: set[str] = set()

    def at_op(self, *ops: str) -> bool:
        token = self.current
        return token.kind == "op" and token.text in ops

    def expect_op(self, op: str, context: str) -> Token:
        if not self.at_op(op):
            raise Failure(SYNTAX_ERROR, self.current.pos, f"expected '{op}' {context} but found {self._found()}")
        return self.advance()

    def _found(self) -> str:
        token = self.current
        if token.kind == END or (token.kind == "op" and token.text == ";"):
            return "the end of the statement"
        return f"'{token.text}'"

    def parse_program(self) -> list[Statement]:
        statements: list[Statement] = []
        while True:
            while self.at_op(";"):
                self.advance()
            if self.current.kind == END:
                return statements
            if len(statements) == MAX_STATEMENTS:
                raise Failure(
                    FORMULA_TOO_LONG,
                    self.current.pos,
                    f"the formula has more than {MAX_STATEMENTS} statements",
                )
            statements.append(self.parse_statement())
            if not self.at_op(";") and self.current.kind != END:
                if self.at_op("="):
                    raise Failure(
                        SYNTAX_ERROR,
                        self.current.pos,
                        "only a variable can be assigned; use '==' to compare",
                    )
                raise Failure(
                    SYNTAX_ERROR,
                    self.current.pos,
                    f"expected ';' or an operator but found {self._found()}",
                )

    def parse_statement(self) -> Statement:
        token = self.current
        if token.kind in ("name", "var") and self.peek().kind == "op" and self.peek().text == "=":
            target = self.assignment_target(token)
            self.advance()
            self.advance()
            if target == DEALLOCATION:
                self.check_deallocation_option()
            expression = self.parse_expression()
            self.assigned.add(target)
            return Statement(token.pos, target, expression)
        return Statement(token.pos, None, self.parse_expression())

    def assignment_target(self, token: Token) -> str:
        name = token.text
        if token.kind == "var":
            if name in WRITABLE or name in ALIASES:
                return name
            if name in READ_ONLY:
                raise Failure(
                    SYNTAX_ERROR,
                    token.pos,
                    f"{name} is a read-only service-defined variable and cannot be assigned",
                )
            self.check_case(token)
            return name
        if name in TIME_INTERVALS:
            raise Failure(SYNTAX_ERROR, token.pos, f"{name} is a constant and cannot be assigned")
        return name

    def check_deallocation_option(self) -> None:
        # "$NodeDeallocationOption = requeu" would otherwise read as an unassigned variable.
        value = self.current
        follower = self.peek()
        is_bare_word = value.kind == "name" and (follower.kind == END or follower.text == ";")
        if is_bare_word and value.text not in self.assigned and value.text.lower() not in DEALLOCATION_OPTIONS:
            raise Failure(
                SYNTAX_ERROR,
                value.pos,
                f"'{value.text}' is not a node deallocation option; use one of {', '.join(DEALLOCATION_OPTIONS)}",
            )

    def check_case(self, token: Token) -> None:
        proper = SERVICE_NAMES.get(token.text.lower())
        if proper is not None and proper != token.text:
            raise Failure(
                SYNTAX_ERROR,
                token.pos,
                f"unknown variable {token.text}: names are case-sensitive, did you mean {proper}?",
            )

    # expression := or ('?' expression ':' expression)?
    def parse_expression(self) -> Node:
        condition = self.parse_binary(0)
        if self.at_op("?"):
            question = self.advance()
            if_true = self.parse_expression()
            self.expect_op(":", f"after the '?' at {self.describe_pos(question.pos)}")
            if_false = self.parse_expression()
            return Ternary(question.pos, condition, if_true, if_false)
        return condition

    _LEVELS: tuple[tuple[str, ...], ...] = (
        ("||",),
        ("&&",),
        ("==", "!="),
        ("<", "<=", ">", ">="),
        ("+", "-"),
        ("*", "/"),
    )

    def parse_binary(self, level: int) -> Node:
        if level == len(self._LEVELS):
            return self.parse_unary()
        ops = self._LEVELS[level]
        left = self.parse_binary(level + 1)
        while self.at_op(*ops):
            op_token = self.advance()
            if self.current.kind == END or self.at_op(";", ")", ",", ":"):
                raise Failure(SYNTAX_ERROR, self.current.pos, f"expected a value after '{op_token.text}'")
            right = self.parse_binary(level + 1)
            node_type = Logical if op_token.text in ("&&", "||") else Binary
            left = node_type(op_token.pos, op_token.text, left, right)
        return left

    def parse_unary(self) -> Node:
        if self.at_op("-", "!"):
            op_token = self.advance()
            operand = self.parse_unary()
            if op_token.text == "-" and isinstance(operand, Constant) and isinstance(operand.value, float):
                return Constant(op_token.pos, -operand.value)
            return Unary(op_token.pos, op_token.text, operand)
        return self.parse_postfix()

    def parse_postfix(self) -> Node:
        node = self.parse_primary()
        while self.at_op("."):
            dot = self.advance()
            member = self.current
            if member.kind != "name":
                raise Failure(SYNTAX_ERROR, member.pos, f"expected a member name after '.' but found {self._found()}")
            self.advance()
            if self.at_op("("):
                raise Failure(
                    SYNTAX_ERROR,
                    member.pos,
                    f"{member.text}() is a method of the sampled service variables "
                    f"({', '.join(SAMPLED_VARIABLES)}) only",
                )
            if member.text not in TIMESTAMP_MEMBERS:
                raise Failure(
                    SYNTAX_ERROR,
                    member.pos,
                    f"unknown member '.{member.text}' (a timestamp has {', '.join(TIMESTAMP_MEMBERS)})",
                )
            node = Member(dot.pos, node, member.text)
        return node

    def parse_primary(self) -> Node:
        token = self.current
        if token.kind == "number":
            self.advance()
            return Constant(token.pos, token.value)
        if token.kind == "string":
            self.advance()
            return Constant(token.pos, token.value)
        if token.kind == "var":
            self.advance()
            return self.parse_service_or_user_variable(token)
        if token.kind == "name":
            self.advance()
            if self.at_op("("):
                return self.parse_call(token)
            return self.parse_name(token)
        if self.at_op("("):
            self.advance()
            inner = self.parse_expression()
            self.expect_op(")", f"to close the '(' at {self.describe_pos(token.pos)}")
            return inner
        if self.at_op("="):
            raise Failure(SYNTAX_ERROR, token.pos, "unexpected '='; use '==' to compare")
        if token.kind == END or self.at_op(";"):
            raise Failure(SYNTAX_ERROR, token.pos, "expected a value but the statement ended")
        raise Failure(SYNTAX_ERROR, token.pos, f"expected a value but found '{token.text}'")

    def parse_service_or_user_variable(self, token: Token) -> Node:
        name = token.text
        self.check_case(token)
        if name in RESOURCE_METRICS:
            raise Failure(
                NOT_SUPPORTED,
                token.pos,
                f"{name} is not supported by the local Batch service, which records no node resource "
                f"metrics; use the task and node-count variables ({', '.join(SAMPLED_VARIABLES)})",
            )
        is_method_call = self.at_op(".") and self.peek().kind == "name" and self.peek(2).text == "("
        if is_method_call:
            return self.parse_method_call(token)
        if name in WRITABLE or name in ALIASES or name in SCALAR_READ_ONLY:
            return ServiceVariable(token.pos, name)
        if name in SAMPLED_VARIABLES:
            raise Failure(
                SYNTAX_ERROR,
                token.pos,
                f"{name} is a sampled service variable; read it with a method, "
                f"e.g. {name}.GetSample(1) or {name}.GetSample(TimeInterval_Minute * 5)",
            )
        return self.user_variable(token)

    def parse_method_call(self, variable: Token) -> Node:
        self.advance()  # .
        method = self.advance()
        if variable.text not in SAMPLED_VARIABLES:
            raise Failure(
                SYNTAX_ERROR,
                method.pos,
                f"{variable.text} has no sample history, so it has no {method.text}() method "
                f"(sampled variables: {', '.join(SAMPLED_VARIABLES)})",
            )
        if method.text not in METHODS:
            known = ", ".join(METHODS)
            raise Failure(SYNTAX_ERROR, method.pos, f"unknown method {method.text}() (sampled variables have {known})")
        args = self.parse_arguments(method.text)
        low, high = METHODS[method.text]
        if not low <= len(args) <= high:
            wanted = str(low) if low == high else f"{low} to {high}"
            raise Failure(
                SYNTAX_ERROR,
                method.pos,
                f"{method.text}() takes {wanted} argument{'s' if high != 1 else ''}, got {len(args)}",
            )
        return MethodCall(variable.pos, variable.text, method.text, args)

    def parse_call(self, name_token: Token) -> Node:
        name = name_token.text
        if name not in FUNCTIONS:
            proper = next((known for known in FUNCTIONS if known == name.lower()), None)
            if proper is not None:
                hint = f"; names are case-sensitive, did you mean {proper}()?"
            else:
                hint = f" (supported: {', '.join(sorted(FUNCTIONS))})"
            raise Failure(SYNTAX_ERROR, name_token.pos, f"unknown function '{name}'{hint}")
        args = self.parse_arguments(name)
        low, high = FUNCTIONS[name]
        if len(args) < low or (high is not None and len(args) > high):
            if high is None:
                wanted = f"at least {low} argument{'s' if low != 1 else ''}"
            elif low == high:
                wanted = f"{low} argument{'s' if low != 1 else ''}"
            else:
                wanted = f"{low} to {high} arguments"
            raise Failure(SYNTAX_ERROR, name_token.pos, f"{name}() takes {wanted}, got {len(args)}")
        return FunctionCall(name_token.pos, name, args)

    def parse_arguments(self, name: str) -> list[Node]:
        opening = self.expect_op("(", f"after {name}")
        args: list[Node] = []
        if self.at_op(")"):
            self.advance()
            return args
        while True:
            args.append(self.parse_expression())
            if self.at_op(","):
                self.advance()
                continue
            if self.at_op(")"):
                self.advance()
                return args
            raise Failure(
                SYNTAX_ERROR,
                self.current.pos,
                f"expected ',' or ')' in the call to {name}() opened at "
                f"{self.describe_pos(opening.pos)} but found {self._found()}",
            )

    def parse_name(self, token: Token) -> Node:
        name = token.text
        if name in TIME_INTERVALS:
            return Constant(token.pos, Interval(TIME_INTERVALS[name]))
        if name in self.assigned:
            return UserVariable(token.pos, name)
        lowered = name.lower()
        if lowered in DEALLOCATION_OPTIONS:
            return Constant(token.pos, lowered)
        if lowered.startswith("timeinterval_"):
            proper = next((known for known in TIME_INTERVALS if known.lower() == lowered), None)
            hint = f"names are case-sensitive, did you mean {proper}?" if proper else "the constants are "
            if proper is None:
                hint += ", ".join(TIME_INTERVALS)
            raise Failure(SYNTAX_ERROR, token.pos, f"unknown time interval '{name}': {hint}")
        return self.user_variable(token)

    def user_variable(self, token: Token) -> Node:
        if token.text not in self.assigned:
            raise Failure(
                SYNTAX_ERROR,
                token.pos,
                f"variable '{token.text}' is used before it is assigned",
            )
        return UserVariable(token.pos, token.text)

    def describe_pos(self, pos: int) -> str:
        line, col = line_col(self.text, pos)
        return f"line {line}, col {col}"
