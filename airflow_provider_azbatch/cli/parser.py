"""The ``airflow azbatch`` commands as a plain argparse parser, for the documentation's CLI reference.

Airflow builds its own parser with a private helper; this one walks the same command definitions
(``cli/definition.py``) with the public ``Arg.add_to_parser``, so the reference shows exactly the arguments,
defaults and help the commands have.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from typing import Any

from airflow_provider_azbatch.cli.definition import AZBATCH_COMMANDS


def get_parser() -> argparse.ArgumentParser:
    """``airflow azbatch`` and its subcommands (help texts without the rich markup's escapes)."""
    parser = argparse.ArgumentParser(prog="airflow azbatch", description=plain_help(AZBATCH_COMMANDS.help))
    _add_subcommands(parser, AZBATCH_COMMANDS.subcommands)
    return parser


def _add_subcommands(parser: argparse.ArgumentParser, commands: Iterable[Any]) -> None:
    subparsers = parser.add_subparsers(metavar="COMMAND")
    for command in commands:
        sub = subparsers.add_parser(
            command.name,
            help=plain_help(command.help),
            description=plain_help(command.description or command.help),
        )
        if hasattr(command, "subcommands"):
            _add_subcommands(sub, command.subcommands)
            continue
        for arg in command.args:
            before = len(sub._actions)
            arg.add_to_parser(sub)
            for action in sub._actions[before:]:
                action.help = plain_help(action.help)


def plain_help(text: str | None) -> str | None:
    """A help text without rich markup's escapes (rich writes a literal "[" as "\\[")."""
    return text.replace("\\[", "[") if text else text
