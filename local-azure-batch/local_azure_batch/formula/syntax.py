"""The syntax tree of a formula; each node evaluates itself against a run of the evaluator."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import TYPE_CHECKING

from .errors import EVALUATION_ERROR, Failure
from .functions import call_function
from .operators import arithmetic, compare, negate, truth
from .values import Value, type_name

if TYPE_CHECKING:
    from .evaluator import Run


class Node:
    __slots__ = ("pos",)

    def __init__(self, pos: int) -> None:
        self.pos = pos

    def evaluate(self, run: Run) -> Value:
        raise NotImplementedError


class Constant(Node):
    __slots__ = ("value",)

    def __init__(self, pos: int, value: Value) -> None:
        super().__init__(pos)
        self.value = value

    def evaluate(self, run: Run) -> Value:
        return self.value


class UserVariable(Node):
    __slots__ = ("name",)

    def __init__(self, pos: int, name: str) -> None:
        super().__init__(pos)
        self.name = name

    def evaluate(self, run: Run) -> Value:
        # The parser only builds this after an assignment to the name, and statements always run
        # in order, so the value is there.
        return run.user_values[self.name]


class ServiceVariable(Node):
    __slots__ = ("name",)

    def __init__(self, pos: int, name: str) -> None:
        super().__init__(pos)
        self.name = name

    def evaluate(self, run: Run) -> Value:
        return run.read_service_variable(self.name)


class MethodCall(Node):
    __slots__ = ("args", "method", "variable")

    def __init__(self, pos: int, variable: str, method: str, args: list[Node]) -> None:
        super().__init__(pos)
        self.variable = variable
        self.method = method
        self.args = args

    def evaluate(self, run: Run) -> Value:
        args = [arg.evaluate(run) for arg in self.args]
        return run.samples.call(self.variable, self.method, self.pos, args)


class FunctionCall(Node):
    __slots__ = ("args", "name")

    def __init__(self, pos: int, name: str, args: list[Node]) -> None:
        super().__init__(pos)
        self.name = name
        self.args = args

    def evaluate(self, run: Run) -> Value:
        args = [arg.evaluate(run) for arg in self.args]
        return call_function(self.name, self.pos, args, run.now)


class Member(Node):
    __slots__ = ("member", "target")

    def __init__(self, pos: int, target: Node, member: str) -> None:
        super().__init__(pos)
        self.target = target
        self.member = member

    def evaluate(self, run: Run) -> Value:
        value = self.target.evaluate(run)
        if not isinstance(value, datetime):
            raise Failure(EVALUATION_ERROR, self.pos, f"'.{self.member}' needs a timestamp, not a {type_name(value)}")
        value = value.astimezone(timezone.utc)
        if self.member == "weekday":
            # Documented only as "1 for Monday"; Sunday is taken as 0 like .NET's DayOfWeek.
            return float(value.isoweekday() % 7)
        return float(getattr(value, self.member))


class Unary(Node):
    __slots__ = ("op", "operand")

    def __init__(self, pos: int, op: str, operand: Node) -> None:
        super().__init__(pos)
        self.op = op
        self.operand = operand

    def evaluate(self, run: Run) -> Value:
        return negate(self.op, self.pos, self.operand.evaluate(run))


class Binary(Node):
    __slots__ = ("left", "op", "right")

    def __init__(self, pos: int, op: str, left: Node, right: Node) -> None:
        super().__init__(pos)
        self.op = op
        self.left = left
        self.right = right

    def evaluate(self, run: Run) -> Value:
        left = self.left.evaluate(run)
        right = self.right.evaluate(run)
        if self.op in "+-*/":
            return arithmetic(self.op, self.pos, left, right)
        return compare(self.op, self.pos, left, right)


class Logical(Binary):
    __slots__ = ()

    def evaluate(self, run: Run) -> Value:
        left = truth(self.left.evaluate(run), self.op, self.left.pos)
        # Short-circuits like C, so "percent >= 70 && avg(...)" never reads missing samples.
        if self.op == "&&" and not left:
            return 0.0
        if self.op == "||" and left:
            return 1.0
        return 1.0 if truth(self.right.evaluate(run), self.op, self.right.pos) else 0.0


class Ternary(Node):
    __slots__ = ("condition", "if_false", "if_true")

    def __init__(self, pos: int, condition: Node, if_true: Node, if_false: Node) -> None:
        super().__init__(pos)
        self.condition = condition
        self.if_true = if_true
        self.if_false = if_false

    def evaluate(self, run: Run) -> Value:
        # Only the chosen branch runs: the documented example relies on it to skip
        # avg($PendingTasks.GetSample(...)) when too few samples are present.
        if truth(self.condition.evaluate(run), "?", self.condition.pos):
            return self.if_true.evaluate(run)
        return self.if_false.evaluate(run)


class Statement:
    __slots__ = ("expression", "pos", "target")

    def __init__(self, pos: int, target: str | None, expression: Node) -> None:
        self.pos = pos
        self.target = target
        self.expression = expression
