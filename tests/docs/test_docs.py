"""The documentation cannot go stale: every code block of docs/ is included from a file CI runs or imports, or is
a command a test runs or checks; the examples import (parse-time checks included); the README's example, links
and supported versions are the docs' own.

The site itself is built, and its links checked, by ``make docs`` (``.ci/run`` part "Docs: build and link check").
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from functools import partial
from pathlib import Path
from types import ModuleType

import pytest

from tests.devenv import test_training_tutorial as training_tutorial
from tests.devenv.test_howto_commands import RUN_BY_TESTS
from tests.torchx import commands as torchx_commands

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
EXAMPLES = DOCS / "examples"
README = ROOT / "README.md"
sys.path.insert(0, str(DOCS / "_ext"))

import az_commands  # noqa: E402
import azbatch_reference  # noqa: E402
import shell_blocks  # noqa: E402

PAGES = shell_blocks.pages()
EXAMPLE_FILES = sorted(path for path in EXAMPLES.glob("*.py") if path.name != "__init__.py")

# Fenced blocks that render something generated or included, never code written in the page.
DIRECTIVES = {"literalinclude", "include", "toctree", "argparse"} | set(azbatch_reference.GENERATORS)


def _run_by_ci(make_target: str, runs: str) -> None:
    """``make <target>`` exists, runs ``runs``, and .ci/run runs the target (or one that runs ``runs``)."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    recipe = re.search(rf"^{re.escape(make_target)}:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE)
    assert recipe, f"the Makefile has no target {make_target}"
    assert runs in recipe.group(1), f"make {make_target} does not run {runs}"
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    if f"make {make_target} " in ci or f"make {make_target}\n" in ci:
        return
    # `make demo` itself is not in CI: the script it runs is, on every line, through `make compat-examples`.
    examples = re.search(r"^compat-examples:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE)
    assert examples, "the Makefile has no target compat-examples"
    assert runs in examples.group(1), f".ci/run runs neither make {make_target} nor {runs}"
    assert "make compat-examples" in ci


def _runs_make_demo() -> None:
    """``make demo`` as make would run it (``make -n``): its venv's install, then a script, which runs here with this
    venv and must succeed (its install from the public index alone is CI's: .ci/run, demo_public_index)."""
    planned = subprocess.run(
        ["make", "--no-print-directory", "-n", "demo", f"PYTHON={sys.executable}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        # Under `make test` the outer make's flags would make this one say where it enters and leaves.
        env={k: v for k, v in os.environ.items() if k not in {"MAKEFLAGS", "MAKELEVEL", "MFLAGS"}},
    )
    assert planned.returncode == 0, planned.stderr
    *_, last = planned.stdout.strip().splitlines()
    interpreter, *script = shlex.split(last)
    assert interpreter.endswith("/bin/python"), last
    assert script == ["scripts/demo.py"], last
    with tempfile.TemporaryDirectory(prefix="docs-demo-") as home:
        command = [sys.executable, *script, "--home", home]
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "== Done: 1 of 1 DAG(s) succeeded" in done.stdout
    _run_by_ci("demo", "scripts/demo.py")


def _is_a_test(node_id: str) -> None:
    path, _, name = node_id.partition("::")
    source = (ROOT / path).read_text(encoding="utf-8")
    assert f"def {name}(" in source, f"{node_id} is not a test"


def _installed_by_make_venv(requirement: str) -> None:
    """``make venv`` (which ``make test`` runs) installs ``requirement`` with the committed constraints."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    installs = [line for line in makefile.splitlines() if "pip install" in line and "-c constraints.txt" in line]
    assert any(requirement in line for line in installs), (
        f"the Makefile does not install {requirement} with constraints"
    )
    _run_by_ci("test", "pytest")


def _parses_as_airflow_azbatch(command: str) -> None:
    from airflow_provider_azbatch.cli.parser import get_parser

    argv = shlex.split(command)
    assert argv[:2] == ["airflow", "azbatch"]
    get_parser().parse_args(argv[2:])  # exits (a test failure) on an unknown flag or command


def _parses_as_the_preflight_module(command: str) -> None:
    """``python -m airflow_provider_azbatch.preflight ...``, parsed by its parser (tests/lines runs it on each line)."""
    from airflow_provider_azbatch.preflight.__main__ import build_parser

    argv = shlex.split(command)
    assert argv[:3] == ["python", "-m", "airflow_provider_azbatch.preflight"]
    build_parser().parse_args(argv[3:])
    _is_a_test("tests/lines/test_features_by_line.py::test_the_preflight_check_runs_on_every_line")


def _checked_against_the_az_table(where: str, command: str) -> None:
    """An ``az`` command (or an assignment capturing one) whose command and flags the table says were checked."""
    invocations = az_commands.az_invocations(command)
    if not invocations:  # a plain assignment: VAR=value
        assert "$(" not in command, f"{where}: {command!r} runs a command no test checks"
        assert "`" not in command, f"{where}: {command!r} runs a command no test checks"
        return
    _, table = az_commands.read_table()
    for invocation in invocations:
        row = table.get(invocation.name)
        assert row, f"{where}: {invocation.name} is not in docs/reference/az-commands.md (scripts/check_az_commands.py)"
        unchecked = invocation.flags - row.flags - az_commands.GLOBAL_FLAGS
        assert not unchecked, f"{where}: {invocation.name} {sorted(unchecked)} were never checked against the CLI"


def _system_tests(target: str, *selection: str) -> None:
    """The page's ``pytest tests/system`` (``selection``: its ``-k azure``), collected as written: it selects each
    system-test DAG's case for ``target``, and make test runs tests/."""
    dags = sorted(path.name for path in (ROOT / "tests" / "system").glob("example_*.py"))
    assert dags, "tests/system holds no system-test DAG"
    command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:randomly", "tests/system", *selection]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    selected = {line for line in done.stdout.splitlines() if "::" in line}
    assert {f"tests/system/{dag}::test_run[{target}]" for dag in dags} <= selected, selected
    if selection:  # only those: the page promises runs against the account
        assert all(line.endswith(f"[{target}]") for line in selected), selected
    _run_by_ci("test", "pytest")


# Each shell command a page shows, and how a test or CI runs it.
COMMANDS = {
    # The GPU tutorial's offline run: tests/devenv/test_training_tutorial.py runs it as written.
    training_tutorial.TRAINING_OFFLINE: lambda: _is_a_test(
        "tests/devenv/test_training_tutorial.py::test_the_training_pipeline_runs_green_offline_as_the_tutorial_says"
    ),
    # The system tests (docs/howto/system-tests.md): against the local service in CI, a real account by choice.
    ".venv/bin/pytest tests/system": lambda: _system_tests("local"),
    'export AZBATCH_SYSTEM_TEST_CONN="$(cat azbatch-default.json)"': lambda: [
        _system_tests("azure", "-k", "azure"),
        _is_a_test(
            "tests/system/test_teardown_always_runs.py::test_the_account_the_variable_names_is_the_one_the_dags_run_on"
        ),
    ],
    ".venv/bin/pytest tests/system -k azure": lambda: _system_tests("azure", "-k", "azure"),
    "make demo": _runs_make_demo,
    "make test": lambda: _run_by_ci("test", "pytest"),
    # The local Batch service, installed by `make venv` from the checkout; `make test` runs its suite.
    "pip install ./local-azure-batch": lambda: _run_by_ci("test", "$(SERVICE)/tests"),
    # From the package index: not run offline; tests/test_packaging.py builds and checks the wheel it installs.
    "pip install airflow-provider-azbatch": lambda: _is_a_test(
        "tests/test_packaging.py::test_the_wheel_is_the_provider_alone"
    ),
    ".venv/bin/pytest tests/workloads/test_multi_node_and_training.py::test_training_pipeline_example_runs_green": (
        lambda: _is_a_test("tests/workloads/test_multi_node_and_training.py::test_training_pipeline_example_runs_green")
    ),
    # From the package index: not run offline. tests/test_packaging.py checks that the wheel's extra `torchx`
    # brings torchx-nightly; `make venv` installs the checkout with it and the same constraints.
    'pip install "airflow-provider-azbatch[torchx]" -c constraints.txt': lambda: [
        _is_a_test("tests/test_packaging.py::test_the_wheel_is_the_provider_alone"),
        _installed_by_make_venv("'.[test,dev,torchx]'"),
    ],
    # The TorchX page: tests/torchx runs each of them, <handle> being the app it started (commands.py).
    **{command: partial(_is_a_test, node_id) for command, node_id in torchx_commands.RUN_BY.items()},
    # The local development environment's page: tests/devenv runs each of them (test_howto_commands.py).
    **{
        command: lambda: _is_a_test(
            "tests/devenv/test_howto_commands.py::test_every_shell_command_of_the_page_is_run_by_a_test"
        )
        for command in RUN_BY_TESTS
    },
}


_blocks = shell_blocks.blocks
_without_comment = shell_blocks.without_comment


def _shell_commands() -> list[tuple[str, str]]:
    return shell_blocks.shell_commands(PAGES, ROOT)


@pytest.mark.parametrize(
    ("line", "command"),
    [
        ("torchx status <handle>    # SUCCEEDED", "torchx status <handle>"),
        ("# a whole line of comment", ""),
        ("echo '# quoted' \"a # too\" \\# escaped", "echo '# quoted' \"a # too\" \\# escaped"),
        ("curl http://host/page#anchor ${VAR#prefix}  # the page", "curl http://host/page#anchor ${VAR#prefix}"),
        ("echo 'it''s' # it's", "echo 'it''s'"),
    ],
)
def test_a_trailing_shell_comment_is_not_part_of_the_command(line, command):
    assert _without_comment(line) == command


def test_every_code_block_is_included_or_a_command_a_test_runs():
    problems = []
    for page in PAGES:
        for line, info, _ in _blocks(page):
            directive = re.fullmatch(r"\{([\w-]+)\}.*", info)
            if directive and directive.group(1) in DIRECTIVES:
                continue
            if info in ("shell", "console", "bash", "sh"):
                continue  # each command is checked below
            problems.append(f"{page.relative_to(ROOT)}:{line}: a ```{info} block: include it from a file CI runs")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(("where", "command"), _shell_commands(), ids=lambda value: str(value)[:60])
def test_each_documented_command_is_run_or_checked_by_a_test(where, command):
    if command.startswith("airflow azbatch "):
        _parses_as_airflow_azbatch(command)
        return
    if command.startswith("python -m airflow_provider_azbatch.preflight "):
        _parses_as_the_preflight_module(command)
        return
    if command.startswith("az ") or az_commands.ASSIGNMENT.fullmatch(command):
        _checked_against_the_az_table(where, command)
        return
    assert command in COMMANDS, f"{where}: {command!r} is run by no test: add it to COMMANDS with how it is run"
    COMMANDS[command]()


def test_the_az_table_is_every_az_command_the_docs_use_with_its_flags_and_reference():
    """No row for a command no page uses, no flag no page passes, each row's reference page the command's own."""
    version, _ = az_commands.read_table()
    assert version, "docs/reference/az-commands.md names no azure-cli version"
    used = az_commands.merge(
        [invocation for _, command in _shell_commands() for invocation in az_commands.az_invocations(command)]
    )
    assert used, "no az command found in the docs"
    assert az_commands.TABLE_PAGE.read_text(encoding="utf-8") == az_commands.render_table(used, version), (
        "docs/reference/az-commands.md differs from the docs' az commands: run scripts/check_az_commands.py"
    )


@pytest.mark.parametrize(
    ("line", "commands"),
    [
        ('az group create --name "$RG" -l eastus', [("group create", {"--name", "-l"})]),
        (
            'ID=$(az batch account show --name "$A" --query id --output tsv)',
            [("batch account show", {"--name", "--query", "--output"})],
        ),
        ("RG=airflow-batch", []),
        ("echo az", []),
    ],
)
def test_az_lines_are_read_as_the_commands_and_flags_they_run(line, commands):
    assert [(" ".join(c.words), set(c.flags)) for c in az_commands.az_invocations(line)] == commands


def test_a_continued_shell_line_is_one_command():
    body = ['az group create --name "$RG" \\', "  --location eastus  # the region", "", "# a comment", "make demo"]
    assert shell_blocks.commands(body) == ['az group create --name "$RG" --location eastus', "make demo"]


@pytest.mark.skipif(not shutil.which("az"), reason="the Azure CLI is not installed: the table is checked offline only")
def test_the_az_table_is_what_the_installed_cli_accepts():
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "check_az_commands.py"), "--check"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"docs_example_{path.stem}", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda path: path.name)
def test_each_example_imports_with_its_parse_time_checks(path):
    """An example with a wrong parameter fails here, as a DAG file with it fails to import."""
    _load(path)


INCLUDED_MARKER = re.compile(r"```\{literalinclude\} (\S+)\n(?::.*\n)*?:start-after: \"\[START (\w+)\]\"")


def test_every_included_marker_exists_once_with_its_end():
    """Sphinx fails on a missing marker too (-W); this names the page and the file at once."""
    problems = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        # The directive's own options only: an include without markers is not paired with the next one's.
        for target, start in INCLUDED_MARKER.findall(text):
            source = (page.parent / target).read_text(encoding="utf-8")
            if source.count(f"# [START {start}]") != 1 or source.count(f"# [END {start}]") != 1:
                problems.append(f"{page.relative_to(ROOT)}: {target} has no single [START {start}]/[END {start}]")
    assert not problems, "\n".join(problems)


def _connection_recipes() -> dict[str, dict]:
    module = _load(EXAMPLES / "connections.py")
    return {name: value for name, value in vars(module).items() if name.startswith("AIRFLOW_CONN_")}


PLACEHOLDER_VALUES = {
    "<account key>": "a2V5",
    "<storage account key>": "c3RvcmFnZWtleQ==",
    "<the development key in local-azure-batch/README.md>": "ZGV2a2V5",
    "<the URL python -m local_azure_batch prints>": "http://127.0.0.1:8000",
}
EXPECTED_AUTH = {
    "AIRFLOW_CONN_AZBATCH_DEFAULT": "shared_key",
    "AIRFLOW_CONN_AZBATCH_SP": "service_principal",
    "AIRFLOW_CONN_AZBATCH_SP_CERT": "service_principal",
    "AIRFLOW_CONN_AZBATCH_MI": "managed_identity",
    "AIRFLOW_CONN_AZBATCH_WI": "workload_identity",
    "AIRFLOW_CONN_AZBATCH_ENTRA": "default",
    "AIRFLOW_CONN_AZBATCH_GOV": "service_principal",
    "AIRFLOW_CONN_AZBATCH_FULL": "shared_key",
    "AIRFLOW_CONN_AZBATCH_LOCAL": "shared_key",
}


def test_each_connection_recipe_is_read_as_the_method_it_shows():
    from airflow.models.connection import Connection

    from airflow_provider_azbatch.hooks.connection import BatchConnectionSettings

    recipes = _connection_recipes()
    assert set(recipes) == set(EXPECTED_AUTH)
    for name, recipe in recipes.items():
        value = json.dumps(recipe)
        for placeholder, filled in PLACEHOLDER_VALUES.items():
            value = value.replace(placeholder, filled)
        conn_id = name.removeprefix("AIRFLOW_CONN_").lower()
        settings = BatchConnectionSettings.from_connection(Connection.from_json(value, conn_id=conn_id))
        assert settings.auth_method.value == EXPECTED_AUTH[name], name
    assert BatchConnectionSettings.from_connection(
        Connection.from_json(json.dumps(recipes["AIRFLOW_CONN_AZBATCH_GOV"]), conn_id="gov")
    ).token_scope.startswith("https://batch.core.usgovcloudapi.net")


def _readme_python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL)


def test_the_readme_example_is_the_quickstart_example_the_tests_import():
    source = (EXAMPLES / "quickstart.py").read_text(encoding="utf-8")
    block = source.split("# [START readme_example]\n", 1)[1].split("# [END readme_example]", 1)[0]
    assert _readme_python_blocks() == [block]


def test_the_readme_is_short_and_its_quick_start_is_make_demo_and_make_test():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 120
    quick_start = text.split("## Quick start\n", 1)[1].split("\n## ", 1)[0]
    assert re.findall(r"```\n(.*?)```", quick_start, re.DOTALL) == ["make demo\nmake test\n"]


def test_the_readme_states_the_supported_versions_the_docs_state():
    pytest.importorskip("tomllib", reason="the documentation builds on Python 3.11+, where it reads pyproject.toml")
    supported = azbatch_reference.supported_versions(ROOT)
    text = " ".join(README.read_text(encoding="utf-8").split())
    assert f"Supported: Apache Airflow {supported['airflow_lines']} on Python {supported['pythons']}" in text, supported


def _anchors(markdown: Path) -> set[str]:
    """The heading anchors MyST (and GitHub) make for a Markdown file."""
    anchors = set()
    for heading in re.findall(r"^#{1,6} (.+)$", markdown.read_text(encoding="utf-8"), re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        anchors.add(slug)
    return anchors


def test_every_readme_link_resolves():
    text = README.read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    assert links
    broken = []
    for link in links:
        if re.match(r"[a-z]+://", link):
            continue
        path, _, anchor = link.partition("#")
        target = (ROOT / path) if path else README
        if not target.exists() or (anchor and anchor not in _anchors(target)):
            broken.append(link)
    assert not broken, broken


def test_every_metric_the_provider_emits_is_explained():
    page = (DOCS / "reference" / "metrics.md").read_text(encoding="utf-8")
    explained = set(re.findall(r"^\| `(\w+)` \|", page, re.MULTILINE))
    emitted = {name.rsplit(".", 1)[1] for name in azbatch_reference.metric_names()}
    assert emitted, "no metric found in the provider's source"
    assert explained == emitted
