"""Every shell command docs/howto/local-development.md shows is one a test runs."""

from __future__ import annotations

import re
from pathlib import Path

from tests.devenv import test_devenv, test_from_wheels

PAGE = Path(__file__).resolve().parents[2] / "docs" / "howto" / "local-development.md"
RUN_BY_TESTS = {
    test_from_wheels.INSTALL,
    test_devenv.START,
    test_devenv.START_PERSISTED,
    test_devenv.DAGS_TEST,
    test_devenv.DAGS_TEST_NO_STORAGE,
}


def test_every_shell_command_of_the_page_is_run_by_a_test():
    blocks = re.findall(r"^```shell\n(.*?)^```$", PAGE.read_text(), flags=re.MULTILINE | re.DOTALL)
    commands = {line.strip() for block in blocks for line in block.splitlines() if line.strip()}
    assert commands == RUN_BY_TESTS


def test_the_page_includes_the_dag_the_tests_run():
    assert "../../tests/devenv/dags/my_pipeline.py" in PAGE.read_text()
    assert (PAGE.parent / "../../tests/devenv/dags/my_pipeline.py").resolve().is_file()
