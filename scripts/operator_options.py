"""Write AzureBatchJobOperator's keyword parameters and their ``:param`` docs from the options' declaration.

    python scripts/operator_options.py           # rewrite the blocks between the markers of operators/job.py
    python scripts/operator_options.py --check   # exit 1 if operators/job.py is not what the declaration says

The declaration is ``airflow_provider_azbatch/specs/operator_options.py``. The operator keeps a written
signature (IDEs complete its keywords, Airflow reads it, the API reference shows it): this script writes it, and
tests/unit/test_operator_options.py runs the check.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from airflow_provider_azbatch.specs.operator_options import PARTS  # noqa: E402

OPERATOR = ROOT / "airflow_provider_azbatch" / "operators" / "job.py"
TOOL = "python scripts/operator_options.py"
PARAMETERS = (
    f"        # options: begin ({TOOL} writes these parameters from specs/operator_options.py)\n",
    "        # options: end\n",
)
DOCS = (f"    .. options: begin ({TOOL} writes this list)\n\n", "    .. options: end\n")
WIDTH = 120


def parameters() -> str:
    lines = []
    for heading, options in PARTS:
        lines.append(f"        # {heading}\n")
        lines += [f"        {option.name}: {option.type} = {option.default},\n" for option in options]
    return "".join(lines)


def docs() -> str:
    lines = []
    for heading, options in PARTS:
        lines += [f"    {heading}\n", "\n"]
        for option in options:
            text = textwrap.fill(
                f":param {option.name}: {option.doc}",
                WIDTH,
                initial_indent="    ",
                subsequent_indent="        ",
                break_on_hyphens=False,
                break_long_words=False,
            )
            lines.append(text + "\n")
        lines.append("\n")
    return "".join(lines)


def _replace(text: str, markers: tuple[str, str], block: str) -> str:
    begin, end = markers
    start = text.index(begin) + len(begin)
    return text[:start] + block + text[text.index(end, start) :]


def written(text: str) -> str:
    return _replace(_replace(text, PARAMETERS, parameters()), DOCS, docs())


def main(argv: list[str]) -> int:
    text = OPERATOR.read_text()
    new = written(text)
    if "--check" in argv:
        if new != text:
            print(f"{OPERATOR.relative_to(ROOT)} differs from specs/operator_options.py: run {TOOL}")
            return 1
        return 0
    OPERATOR.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
