"""Write docs/troubleshooting/errors.md: each error message of the provider that names its fix.

    python scripts/errors_page.py           # write the page
    python scripts/errors_page.py --check   # exit 1 if the page is not what the code says

The first section is written by hand (the mistakes of a first hour, in the order they are met); the rest is
read from the code: every ``raise`` (and every ``fail(...)`` that is raised) whose message names a fix,
grouped by module, as symptom (how the message starts, ``…`` where a value goes), cause (the exception's
own description) and fix (the message's clause that says what to do). tests/unit/test_errors_page.py fails
when the page and the code differ, so the page cannot go stale.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "airflow_provider_azbatch"
PAGE = ROOT / "docs" / "troubleshooting" / "errors.md"
HOLE = "…"

# Clauses that say what to do start with one of these words.
FIX_VERBS = (
    "add|apply|ask|assign|call|check|choose|confirm|create|define|delete|did you mean|drop|enable|give|grant|"
    "install|keep|leave|lower|make|move|name|pass|paste|pick|put|raise|reduce|remove|rename|replace|return|run|"
    "select|set|split|stage|start|test|try|upgrade|use|wait|write"
)
_FIX = re.compile(rf"(?:^|[;:.,]\s+|\(|\bor\s+|\bthen\s+)((?:{FIX_VERBS})\b.*)$", re.IGNORECASE | re.DOTALL)
# What the exceptions the provider raises but does not define mean.
FOREIGN_CAUSES = {
    "AirflowException": "The run cannot go on: the Airflow task fails.",
    "ValueError": "A value given to the provider is wrong.",
    "TypeError": "A value of the wrong type was given to the provider.",
}
# Callables whose call is the exception (``raise check.fail(field, problem)``), with the exception they make.
FAIL_FUNCTIONS = {"fail": "AzureBatchValidationError"}

# The first hour's mistakes, written by hand: (symptom, cause, fix). Each symptom's pieces between "…" are
# checked to be in the code's messages.
FIRST_HOUR = [
    (
        "max_wall_clok is not a parameter of AzureBatchJobOperator: did you mean 'max_wall_clock'?",
        "A misspelt argument of the operator or of `@task.azure_batch` (Airflow itself would only say "
        '"Invalid arguments were passed").',
        "Use the name it suggests; `help(AzureBatchJobOperator)` lists every parameter.",
    ),
    (
        "tasks[0] has unknown field(s) comand_line (did you mean 'command_line'?); known: …",
        "A task (or exit condition, input, output, job preparation task, run_as) holds a key it does not have.",
        "Use the suggested name; the message lists every field it knows.",
    ),
    (
        "requirements has unknown key(s) 'gpu' (did you mean 'gpus'?); known: …",
        "`BatchPool.existing/shared/auto(requirements={...})` with a key `ResourceRequirements` does not have.",
        "Use the suggested key: cpus, memory (`'8Gi'`) or memory_gib, gpus, gpu_kind, low_priority, os_image, "
        "containers.",
    ),
    (
        "No Azure VM size in the catalog fits …. Closest: …",
        "The requirements of a shared or auto pool exceed every VM size of the provider's catalog (checked when the "
        "DAG is parsed).",
        "Lower the requirements, or name a size with `vm_size=`; the message names the three closest sizes.",
    ),
    (
        "VM size … is not in the VM catalog (…); did you mean …? Azure refuses a size it does not offer when the "
        "pool is created; …",
        "A `vm_size=` close to a size of the catalog but not in it: most likely a typo (a warning, since the "
        "catalog may lag Azure's newest sizes).",
        "Use the suggested size; a size newer than the catalog is used as named.",
    ),
    (
        "tasks[1].depends_on names 'aa', which is not a task of this job (did you mean 'aaa'?)",
        "A dependency on a task id the job does not have.",
        "Name the task as its `id` says (ids are case-insensitive).",
    ),
    (
        "image 'MyRegistry.azurecr.io/Train Image:1' is not a valid image reference: it has whitespace, …",
        "The image reference breaks the grammar registries read (`[registry/]repository[:tag][@digest]`: "
        "lowercase repository names, no spaces, tags of letters, digits, `_`, `.` and `-`). On Azure the task "
        "would fail when its node pulls the image.",
        "Use the corrected reference the message suggests.",
    ),
    (
        "image '…' names the tag '…': did you mean …? (a tag the registry does not hold fails the task when the node "
        "pulls the image)",
        "A tag that looks like a misspelt `latest` (`ubuntu:latset`): the registry would not have it, and the task "
        "would fail when its node pulls the image.",
        "Write `latest` (or the tag you meant).",
    ),
    (
        "Connection 'azbatch_default' is not defined. Create it with `airflow connections add …",
        "No Airflow connection of that id: not in the metadata database, the environment or a secrets backend.",
        "Run the `airflow connections add` command the message shows, or set `AIRFLOW_CONN_<ID>` to the "
        "connection as JSON; or name another connection with `azbatch_conn_id=` (`--conn-id` for the CLI).",
    ),
    (
        "Connection '…': extra has unknown field(s) storage_acount_url (did you mean 'storage_account_url'?); known: …",
        "A misspelt key in the connection's Extra: its setting would silently be missing.",
        "Rename the key as suggested.",
    ),
    (
        "@task.azure_batch cannot run …() decorated with @…: only the function's own source travels to the node",
        "A `@task.azure_batch` function carries a decorator that is not Airflow's: the node gets the `def` "
        "alone. (Airflow's decorators, under any name such as `@sdk_task.azure_batch`, stay where the DAG is "
        "defined.)",
        "Call what the decorator does inside the function.",
    ),
    (
        "Not deleted: confirm with --yes to delete Batch pool … (no terminal to ask on)",
        "`airflow azbatch pools delete` run from a script: there is nobody to confirm.",
        "Add `--yes`.",
    ),
    (
        "No task of Batch job … has started yet (… active): no output so far (--follow to wait for it)",
        "`airflow azbatch logs` found nothing to read (exit code 1).",
        "Wait with `--follow`, or look at the job with `airflow azbatch jobs describe`.",
    ),
]

HEADER = """# Error messages: symptom, cause, fix

Each message below is one the provider shows, and names what to do. **Symptom** is how the message starts
({hole} where it shows a value of yours), **Cause** why it is raised, **Fix** what the message tells you to do.
Messages about your DAG's values are raised when the DAG file is parsed wherever the value holds no template,
otherwise when the task runs, before anything is created in Batch.

This page is generated from the code (`python scripts/errors_page.py`); a test fails when they differ.

## The first hour's mistakes

"""


@dataclass(frozen=True)
class Message:
    module: str
    line: int
    exception: str
    text: str  # the message, HOLE where a value goes

    @property
    def fix(self) -> str | None:
        match = _FIX.search(self.text)
        if match is None:
            return None
        fix = match.group(1).rstrip(" .")
        # A fix said in parentheses ends with the closing one.
        while fix.count(")") > fix.count("(") and fix.endswith(")"):
            fix = fix[:-1].rstrip(" .")
        return fix

    @property
    def symptom(self) -> str:
        fix = self.fix
        text = self.text[: self.text.rfind(fix)] if fix else self.text
        text = text.rstrip(" ;:(,.")
        if not text.strip(f" {HOLE}"):  # the message is its fix
            text = self.text
        text = re.sub(r"\s+", " ", text)
        return text if len(text) <= 160 else text[:157] + "..."


def _text(node: ast.expr) -> str | None:
    """A message expression as text, HOLE for what is computed; None when it holds no literal text."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts = [
            value.value if isinstance(value, ast.Constant) and isinstance(value.value, str) else HOLE
            for value in node.values
        ]
        return "".join(parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _text(node.left), _text(node.right)
        return None if left is None and right is None else (left or HOLE) + (right or HOLE)
    return None


def _callee(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _messages_of(call: ast.Call) -> tuple[str, str] | None:
    """(exception, message) of the call a ``raise`` raises."""
    name = _callee(call)
    if name in FAIL_FUNCTIONS or name == "ConnectionConfigError":
        args = call.args[-2:] if name == "ConnectionConfigError" else call.args
        pieces = [_text(arg) for arg in args[:2]]
        if len(pieces) < 2 or pieces[1] is None:
            return None
        exception = "ConnectionConfigError" if name == "ConnectionConfigError" else FAIL_FUNCTIONS[name]
        prefix = "Connection '…': " if name == "ConnectionConfigError" else ""
        return exception, f"{prefix}{pieces[0] or HOLE} {pieces[1]}"
    if not name or not name[0].isupper() or not call.args:
        return None
    text = _text(call.args[0])
    return (name, text) if text is not None else None


def messages() -> Iterator[Message]:
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Raise) or not isinstance(node.exc, ast.Call):
                continue
            found = _messages_of(node.exc)
            if found is None:
                continue
            exception, text = found
            if module.endswith("hooks.connection") and _callee(node.exc) == "fail":
                # There ``fail`` is the connection's own: ConnectionConfigError(conn_id, field, problem).
                exception, text = "ConnectionConfigError", f"Connection '{HOLE}': {text}"
            text = re.sub(rf"{HOLE}+", HOLE, text)
            yield Message(module, node.lineno, exception, text)


def _causes() -> dict[str, str]:
    """Each exception class of the provider's first docstring line (what it means)."""
    causes = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                doc = ast.get_docstring(node)
                if doc:
                    causes[node.name] = re.sub(r"\s+", " ", doc.split("\n\n")[0]).strip()
    return causes


def _span(text: str) -> str:
    """``text`` as inline code whatever backticks it holds."""
    fence = "``" if "`" in text else "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


# The preflight check's lines: ``failed(check, detail, fix=...)`` (and warning, unknown), and the reasons a
# management-plane read could not be made (``Unreadable(why, fix)``).
PREFLIGHT = PACKAGE / "preflight"
FINDINGS = ("failed", "warning", "unknown")
UNREADABLE_CHECKS = "management.account, pool[…].vm_size, pool[…].quota"
PREFLIGHT_HEADER = """## `airflow azbatch check`: what it finds, and the fix

Each line the preflight check ([check a connection](../howto/check.md)) prints when something is not ok, by check
id: its status, what it says ({hole} where it shows a value of yours), and the fix it names. A fix shown as
{hole} is built from the connection (the key or role it needs, the command that prints an id).

"""


@dataclass(frozen=True)
class PreflightLine:
    check: str
    status: str
    detail: str
    fix: str


def _constants(tree: ast.Module) -> dict[str, str]:
    """A module's top-level string constants (check ids are named by them)."""
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    found[target.id] = node.value.value
    return found


def _returned_texts(tree: ast.Module) -> dict[str, ast.expr]:
    """Module functions that return a message (``_service_fix()``): their last ``return``'s expression."""
    found = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            returns = [sub.value for sub in ast.walk(node) if isinstance(sub, ast.Return) and sub.value is not None]
            if returns and _text(returns[-1]) is not None:
                found[node.name] = returns[-1]
    return found


def _resolved(node: ast.expr | None, names: dict[str, ast.expr], helpers: dict[str, ast.expr]) -> str:
    """A finding's text: a literal, a name bound to one (module constant or local), or a helper's return."""
    if isinstance(node, ast.Name) and node.id in names:
        node = names[node.id]
    if isinstance(node, ast.Call) and _callee(node) in helpers:
        node = helpers[_callee(node)]
    found = _text(node) if node is not None else None
    return re.sub(rf"{HOLE}+", HOLE, found) if found is not None else HOLE


def preflight_lines() -> Iterator[PreflightLine]:
    for path in sorted(PREFLIGHT.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        constants = {name: ast.Constant(value) for name, value in _constants(tree).items()}
        helpers = _returned_texts(tree)
        for function in (node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)):
            # A check id or fix kept in a local name first (``check = f"pool[{label}].image"``).
            names: dict[str, ast.expr] = dict(constants)
            for node in ast.walk(function):
                if isinstance(node, ast.Assign) and _text(node.value) is not None:
                    names.update({target.id: node.value for target in node.targets if isinstance(target, ast.Name)})
            for node in ast.walk(function):
                if not isinstance(node, ast.Call):
                    continue
                fix = next((keyword.value for keyword in node.keywords if keyword.arg == "fix"), None)
                name = _callee(node)
                args = [_resolved(arg, names, helpers) for arg in node.args]
                if name in FINDINGS and len(args) == 2 and fix is not None:
                    yield PreflightLine(args[0], name, args[1], _resolved(fix, names, helpers))
                elif name == "Unreadable" and len(args) == 2:
                    yield PreflightLine(UNREADABLE_CHECKS, "unknown", args[0], args[1])


def _preflight_section() -> list[str]:
    out = [PREFLIGHT_HEADER.format(hole=HOLE)]
    by_check: dict[str, list[PreflightLine]] = {}
    for line in preflight_lines():
        if line.detail != HOLE and line not in by_check.get(line.check, []):
            by_check.setdefault(line.check, []).append(line)
    for check in sorted(by_check):
        out.append(f"### `{check}`\n\n" if check != HOLE else "### The line of the step that failed\n\n")
        for line in by_check[check]:
            detail, fix = (re.sub(r"\s+", " ", text) for text in (line.detail, line.fix))
            out.append(f"- **{line.status.capitalize()}**: {_span(detail)}\\\n  **Fix**: {fix}\n")
        out.append("\n")
    return out


def page() -> str:
    out = [HEADER.format(hole=HOLE)]
    for symptom, cause, fix in FIRST_HOUR:
        out.append(f"### {_span(symptom)}\n\n**Cause**: {cause}\n**Fix**: {fix}\n\n")
    out.append("## Every message that names its fix, by module\n\n")
    causes = _causes()
    seen: set[tuple[str, str]] = set()
    by_module: dict[str, list[Message]] = {}
    for message in messages():
        if message.fix is None or (message.module, message.text) in seen:
            continue
        seen.add((message.module, message.text))
        by_module.setdefault(message.module, []).append(message)
    for module, found in by_module.items():
        out.append(f"### `{module}`\n\n")
        for message in found:
            cause = causes.get(message.exception) or FOREIGN_CAUSES.get(message.exception, "")
            out.append(
                f"- **Symptom**: {_span(message.symptom)}\\\n"
                f"  **Cause**: {cause} (`{message.exception}`)\\\n"
                f"  **Fix**: {message.fix}\n"
            )
        out.append("\n")
    out += _preflight_section()
    return "".join(out).rstrip("\n") + "\n"


def main(argv: list[str]) -> int:
    text = page()
    if "--check" in argv:
        if not PAGE.exists() or PAGE.read_text(encoding="utf-8") != text:
            print(f"{PAGE.relative_to(ROOT)} is not what the code says: run python scripts/errors_page.py")
            return 1
        return 0
    PAGE.parent.mkdir(parents=True, exist_ok=True)
    PAGE.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
