"""Check every ``az`` command of the documentation against the Azure CLI's own reference, and write the table.

For each ``az`` command a page shows (``docs/_ext/shell_blocks.py`` finds them, ``$(az ...)`` in assignments
included), runs ``az <command> --help`` and checks that the command exists and takes every flag the pages pass
it. Then writes ``docs/reference/az-commands.md`` (the commands, their flags, their reference pages, and the
azure-cli version), which ``tests/docs`` holds every page to, offline.

    python scripts/check_az_commands.py            # check, and rewrite the table
    python scripts/check_az_commands.py --check    # check, and fail if the table is not what it would write
    python scripts/check_az_commands.py --az PATH  # an az other than the one on PATH

Needs the Azure CLI (``pip install azure-cli`` in a venv of its own, or Microsoft's packages); no sign-in: ``--help``
works offline.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "docs" / "_ext"))

import az_commands
import shell_blocks

# A flag in az's help: "    --resource-group -g [Required] : ..." (the long form, then aliases).
HELP_FLAGS = re.compile(r"^ {4}(?P<flags>--?[\w-]+(?: -{1,2}[\w-]+)*)(?: +\[[\w ]+\])? +:", re.MULTILINE)


def help_flags(az: str, words: tuple[str, ...], env: dict[str, str]) -> set[str] | None:
    """Every flag ``az <words>`` accepts, from its help; None if there is no such command."""
    result = subprocess.run([az, *words, "--help"], capture_output=True, text=True, env=env, timeout=300)
    if result.returncode != 0 or f"az {' '.join(words)} :" not in result.stdout:
        return None
    return {flag for match in HELP_FLAGS.finditer(result.stdout) for flag in match["flags"].split()}


def cli_version(az: str, env: dict[str, str]) -> str:
    result = subprocess.run([az, "version", "--output", "json"], capture_output=True, text=True, env=env, check=True)
    return str(json.loads(result.stdout)["azure-cli"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--az", default=shutil.which("az"), help="the az executable (default: the one on PATH)")
    parser.add_argument("--check", action="store_true", help="fail if the table differs instead of writing it")
    args = parser.parse_args()
    if not args.az:
        print("az is not on PATH: install the Azure CLI, or give --az", file=sys.stderr)
        return 2
    used = az_commands.merge(
        [command for _, line in shell_blocks.shell_commands() for command in az_commands.az_invocations(line)]
    )
    with tempfile.TemporaryDirectory() as config:
        # A throw-away configuration: no sign-in, no telemetry, nothing of the user's az set-up.
        env = {**os.environ, "AZURE_CONFIG_DIR": config, "AZURE_CORE_COLLECT_TELEMETRY": "false"}
        version = cli_version(args.az, env)
        problems = []
        for name, command in sorted(used.items()):
            accepted = help_flags(args.az, command.words, env)
            if accepted is None:
                problems.append(f"{name}: azure-cli {version} has no such command")
                continue
            unknown = sorted(command.flags - accepted - az_commands.GLOBAL_FLAGS)
            if unknown:
                problems.append(f"{name}: azure-cli {version} does not take {', '.join(unknown)}")
            print(f"{name}: {' '.join(sorted(command.flags)) or 'no flags'}: ok")
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 1
    table = az_commands.render_table(used, version)
    if args.check:
        if az_commands.TABLE_PAGE.read_text(encoding="utf-8") != table:
            print(
                f"{az_commands.TABLE_PAGE} is not what the docs use: run this script without --check", file=sys.stderr
            )
            return 1
        return 0
    az_commands.TABLE_PAGE.write_text(table, encoding="utf-8")
    print(f"wrote {az_commands.TABLE_PAGE} ({len(used)} commands, azure-cli {version})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
