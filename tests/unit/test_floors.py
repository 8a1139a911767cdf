"""The provider's rooms stand on floors (docs/explanation/design.md#floors): no import climbs one, no rooms import
each other, and the page's table is what the code imports."""

from __future__ import annotations

import importlib.util
import sys
from collections import defaultdict
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _floors() -> ModuleType:
    spec = importlib.util.spec_from_file_location("floors", ROOT / "scripts" / "floors.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _graph(edges: dict[str, list[str]]) -> dict[str, dict[str, set[str]]]:
    graph: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for room, others in edges.items():
        graph[room]
        for other in others:
            graph[room][other].add(f"airflow_provider_azbatch/{room}/x.py")
            graph[other]
    return graph


def test_the_code_stands_on_the_floors_the_design_page_draws():
    floors = _floors()
    graph = floors.room_imports()
    assert floors.circles(graph) == []
    assert floors.climbs(graph) == []
    page = floors.PAGE.read_text(encoding="utf-8")
    assert page == floors.page_with(page, floors.table(graph)), (
        "docs/explanation/design.md's floors differ from the code's imports: run python scripts/floors.py"
    )


def test_the_hooks_import_nothing_above_them():
    floors = _floors()
    floor = floors.floor_of()
    graph = floors.room_imports()
    above = sorted(other for other in graph["hooks"] if floor[other] >= floor["hooks"])
    assert above == []


def test_an_import_that_climbs_a_floor_is_named_with_its_file():
    floors = _floors()
    graph = _graph({"hooks": ["model", "watching"], "watching": ["hooks"]})
    assert floors.climbs(graph) == [
        "hooks (floor 3) imports watching (floor 4): airflow_provider_azbatch/hooks/x.py",
    ]
    assert floors.circles(graph) == [["hooks", "watching"]]


def test_a_room_on_no_floor_is_named():
    floors = _floors()
    assert floors.climbs(_graph({"newroom": ["model"]})) == [
        "newroom: on no floor (add it to FLOORS in scripts/floors.py)"
    ]


def test_an_import_inside_a_function_counts():
    floors = _floors()
    # preflight/__main__.py imports the CLI's definitions inside build_parser() only.
    assert "airflow_provider_azbatch.cli.definition" in floors.imported_modules(
        floors.PACKAGE / "preflight" / "__main__.py"
    )
    assert "cli" in floors.room_imports()["preflight"]
