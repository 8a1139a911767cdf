"""``python -m airflow_provider_azbatch.preflight``: ``airflow azbatch check`` on every Airflow line (3.0 and 3.1
read no commands from providers), with the same arguments and exit codes."""

from __future__ import annotations

import argparse
import sys


def build_parser() -> argparse.ArgumentParser:
    from airflow_provider_azbatch.cli.definition import CHECK_ARGS, CHECK_DESCRIPTION
    from airflow_provider_azbatch.cli.parser import plain_help

    parser = argparse.ArgumentParser(
        prog="python -m airflow_provider_azbatch.preflight", description=plain_help(CHECK_DESCRIPTION)
    )
    for arg in CHECK_ARGS:
        before = len(parser._actions)
        arg.add_to_parser(parser)
        for action in parser._actions[before:]:
            action.help = plain_help(action.help)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from airflow_provider_azbatch.preflight.command import check_command

    try:
        check_command(args)
    except SystemExit as exit:
        return int(exit.code or 0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
