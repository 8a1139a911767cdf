"""Draw the provider's floors from its imports into docs/explanation/design.md.

    python scripts/floors.py           # rewrite the table between the markers of design.md
    python scripts/floors.py --check   # exit 1 if the page is not what the code says, or if packages import in a circle

A room is a package of ``airflow_provider_azbatch`` (or a module at its top, such as ``compat.py``); ``FLOORS``
below puts each on a floor. Every import counts, also one inside a function or under ``TYPE_CHECKING``. A room
imports only rooms on its own floor or below, and no rooms import each other, directly or round about. The check
fails on an import that climbs a floor, on a circle, on a room no floor names, and when the page's table (which
lists what each room imports) differs from the code: tests/unit/test_floors.py runs it.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE_NAME = "airflow_provider_azbatch"
PACKAGE = ROOT / PACKAGE_NAME
PAGE = ROOT / "docs" / "explanation" / "design.md"
BEGIN = "<!-- floors: begin (python scripts/floors.py writes this table) -->"
END = "<!-- floors: end -->"

# The floors, from the ground up: what each holds, and its rooms.
FLOORS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "foundation: the names that differ between Airflow lines, settings, errors, retries",
        ("__init__", "airflowless", "compat", "config", "enums", "exceptions", "get_provider_info", "retries"),
    ),
    (
        "values without I/O: VM sizes and images, what Batch answers, what a user declares",
        ("compute", "model", "specs"),
    ),
    ("I/O: Batch, Blob and Resource Manager; connections and credentials", ("hooks",)),
    (
        "workings: the watch (sans I/O), pools, workspaces, job events, links",
        ("job_events", "links", "pools", "watching", "workspace"),
    ),
    ("the request and the report: a submitted job, what it reports, its lineage", ("lineage", "results", "submission")),
    ("waiting in the triggerer", ("triggers",)),
    ("one run's life: submit or reattach, watch, results, clean up", ("runs",)),
    (
        "faces: operators, sensor, decorator, CLI, preflight check, TorchX, the dev environment",
        ("cli", "decorators", "devenv", "operators", "preflight", "sensors", "torchx"),
    ),
)


def floor_of() -> dict[str, int]:
    return {room: level for level, (_, rooms) in enumerate(FLOORS, start=1) for room in rooms}


def room_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != PACKAGE_NAME or len(parts) < 2:
        return None
    return parts[1]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    module = module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return found


def room_imports() -> dict[str, dict[str, set[str]]]:
    """Each room, the rooms it imports, and the files that import each."""
    graph: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for path in sorted(PACKAGE.rglob("*.py")):
        room = path.relative_to(PACKAGE).parts[0].removesuffix(".py")
        graph[room]  # a room that imports nothing is a room too
        for target in imported_modules(path):
            other = room_of(target)
            if other and other != room and ((PACKAGE / other).is_dir() or (PACKAGE / f"{other}.py").is_file()):
                graph[room][other].add(str(path.relative_to(ROOT)))
    return graph


def circles(graph: dict[str, dict[str, set[str]]]) -> list[list[str]]:
    """The rooms that reach each other (Tarjan's strongly connected components of two rooms or more)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(room: str) -> None:
        index[room] = low[room] = len(index)
        stack.append(room)
        on_stack.add(room)
        for other in graph[room]:
            if other not in index:
                visit(other)
                low[room] = min(low[room], low[other])
            elif other in on_stack:
                low[room] = min(low[room], index[other])
        if low[room] == index[room]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == room:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for room in sorted(graph):
        if room not in index:
            visit(room)
    return found


def climbs(graph: dict[str, dict[str, set[str]]]) -> list[str]:
    """Imports of a room on a higher floor, and rooms no floor names."""
    floor = floor_of()
    found = [
        f"{room}: on no floor (add it to FLOORS in scripts/floors.py)" for room in sorted(graph) if room not in floor
    ]
    for room in sorted(set(graph) & set(floor)):
        for other in sorted(graph[room]):
            if other in floor and floor[other] > floor[room]:
                files = ", ".join(sorted(graph[room][other]))
                found.append(f"{room} (floor {floor[room]}) imports {other} (floor {floor[other]}): {files}")
    return found


def label(room: str) -> str:
    return f"`{room}.py`" if (PACKAGE / f"{room}.py").is_file() else f"`{room}/`"


def table(graph: dict[str, dict[str, set[str]]]) -> str:
    rows = ["| Floor | What it holds | Room: what it imports |", "| --- | --- | --- |"]
    for level, (words, rooms) in reversed(list(enumerate(FLOORS, start=1))):
        imports = "<br>".join(
            f"{label(room)}: {', '.join(f'`{other}`' for other in sorted(graph[room])) or 'nothing'}" for room in rooms
        )
        rows.append(f"| {level} | {words} | {imports} |")
    return "\n".join(rows)


def page_with(text: str, drawn: str) -> str:
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    return f"{head}{BEGIN}\n{drawn}\n{END}{tail}"


def main(argv: list[str]) -> int:
    graph = room_imports()
    found = circles(graph)
    for circle in found:
        print(f"rooms that import each other: {', '.join(circle)}", file=sys.stderr)
        for room in circle:
            for other in sorted(set(graph[room]) & set(circle)):
                print(f"  {room} -> {other}: {', '.join(sorted(graph[room][other]))}", file=sys.stderr)
    climbing = climbs(graph)
    for line in climbing:
        print(f"an import climbs a floor: {line}", file=sys.stderr)
    if found or climbing:
        return 1
    text = PAGE.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        print(f"{PAGE.relative_to(ROOT)} has no {BEGIN} ... {END} markers", file=sys.stderr)
        return 1
    drawn = page_with(text, table(graph))
    if "--check" in argv:
        if drawn != text:
            print(
                f"{PAGE.relative_to(ROOT)}: the floors differ from the code's imports: an import climbed a floor, or "
                "a room moved. Run python scripts/floors.py and read the diff.",
                file=sys.stderr,
            )
            return 1
        return 0
    PAGE.write_text(drawn, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
