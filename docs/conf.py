"""Sphinx configuration of the provider's documentation (`make docs`).

Built offline with warnings as errors and nitpicky references (`sphinx-build -W -n`): every page is MyST
Markdown; the references are generated from the code (``_ext/azbatch_reference.py``, sphinx-argparse, autoapi).
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(DOCS / "_ext"))
sys.path.insert(0, str(ROOT))
# The CLI reference imports the command definitions, which import Airflow: keep its home out of ~/airflow.
os.environ.setdefault("AIRFLOW_HOME", str(DOCS / "_build" / "airflow-home"))
os.environ.setdefault("AIRFLOW__LOGGING__LOGGING_LEVEL", "WARNING")

from azbatch_reference import supported_versions  # noqa: E402

from airflow_provider_azbatch import __version__  # noqa: E402

project = "airflow-provider-azbatch"
author = "airflow-provider-azbatch contributors"
copyright = "the airflow-provider-azbatch contributors"
release = __version__
version = ".".join(__version__.split(".")[:2])

extensions = [
    "myst_parser",
    "autoapi.extension",
    "sphinxarg.ext",
    "sphinx_copybutton",
    "sphinx_design",
    "azbatch_reference",
    # A placeholder word (MEASURED, TBD, TODO, FIXME, XXX) in a page fails the build.
    "placeholders",
]

# Pages are Markdown; autoapi writes its pages in reStructuredText.
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "README.md"]
templates_path: list[str] = []

# MyST: GitHub tables and heading anchors (so that [text](page.md#a-heading) is checked), directives in fences.
myst_enable_extensions = ["colon_fence", "deflist", "fieldlist", "attrs_inline", "substitution"]
myst_heading_anchors = 3


# The supported Pythons, Airflow lines and requirements, each from the one place it is kept.
myst_substitutions = supported_versions(ROOT)

html_theme = "furo"
html_title = f"airflow-provider-azbatch {release}"
html_static_path: list[str] = []
html_show_sourcelink = False

# The Python API: static analysis of the public surface (no Airflow import needed). Packages whose
# __init__ is empty are kept by "undoc-members".
autoapi_type = "python"
autoapi_dirs = [str(ROOT / "airflow_provider_azbatch")]
autoapi_root = "reference/api"
autoapi_add_toctree_entry = False
autoapi_keep_files = False
autoapi_member_order = "groupwise"
autoapi_python_class_content = "both"
autoapi_options = ["members", "undoc-members", "show-inheritance", "show-module-summary", "imported-members"]
# The public surface: what a DAG author imports. The rest is the provider's machinery.
autoapi_ignore = [
    "*/cli/*",
    # A command (azbatch-dev), not an API: its reference is its parser (reference/cli.md).
    "*/devenv/*",
    # The TorchX scheduler: used through `torchx` (its options: docs/howto/torchx.md); operators/torchx.py is the API.
    "*/torchx/*",
    "*/watching/*",
    "*/runs/*",
    "*/results/*",
    "*/compute/_format.py",
    "*/compute/autoscale.py",
    "*/compute/catalog.py",
    "*/compute/errors.py",
    "*/compute/pool_spec.py",
    "*/hooks/batch_async.py",
    # How a trigger paces its output reads: machinery of the trigger (explained in explanation/account-view.md).
    "*/triggers/output_reads.py",
    "*/triggers/pool_nodes.py",
    "*/triggers/subscription.py",
    "*/triggers/listeners.py",
    # The job trigger's rooms (checkpoints, handover, kill, the watch loop, its events):
    # machinery of AzureBatchJobTrigger, whose classpath is the API.
    "*/triggers/checkpoints.py",
    "*/triggers/handover.py",
    "*/triggers/kill.py",
    "*/triggers/watch_events.py",
    "*/triggers/watch_loop.py",
    # The hooks' shared reads and the sync hook's retried steps and pool moves: behind the hooks' methods.
    "*/hooks/batch_reads.py",
    "*/hooks/pool_moves.py",
    "*/hooks/submission_steps.py",
    "*/hooks/clouds.py",
    "*/hooks/credentials.py",
    "*/hooks/errors.py",
    "*/hooks/proxies.py",
    "*/hooks/storage.py",
    "*/hooks/translate.py",
    # What Batch answers, as values: what the hooks return to the watch and the faces, not a DAG author's API.
    "*/model/*",
    "*/specs/containers.py",
    "*/specs/exit_conditions.py",
    "*/specs/overrides.py",
    "*/specs/sdk_fields.py",
    "*/specs/shell.py",
    "*/specs/validation.py",
    "*/specs/operator_options.py",
    "*/submission/job.py",
    "*/submission/job_ids.py",
    "*/submission/task_extras.py",
    "*/submission/reattach.py",
    "*/submission/request.py",
    "*/pools/comparison.py",
    "*/pools/overrides.py",
    "*/pools/ready.py",
    "*/workspace/delivery.py",
    "*/workspace/staged_files.py",
    "*/workspace/staging.py",
    "*/compat.py",
    "*/config.py",
    "*/retries.py",
    "*/get_provider_info.py",
]


nitpicky = True
# External types the signatures name, deliberately not linked (Azure SDK docs publish no inventory; Airflow's
# and Python's are not fetched at build time).
nitpick_ignore_regex = [
    (r"py:.*", r"(airflow|azure|aiohttp|pendulum|structlog|jinja2|pathspec|torchx)(\..*)?"),
    (r"py:.*", r"(collections\.abc|typing|typing_extensions|datetime|enum|pathlib|os|asyncio|logging)\..*"),
    (r"py:.*", r"(argparse|subprocess|urllib)\..*"),
    # The OpenLineage client: the [openlineage] extra, not installed where the docs build.
    (r"py:.*", r"openlineage(\..*)?"),
    (r"py:class", r"(Any|Callable|Iterable|Iterator|Mapping|Sequence|Literal|TypeVar|T|R|Self|Enum|timedelta)"),
    (r"py:class", r"(str|int|float|bool|bytes|dict|list|tuple|set|frozenset|object|type|None|Exception)"),
    (r"py:class", r"(ValueError|TypeError|RuntimeError|KeyError|Path|datetime|Pattern)"),
    # How autoapi renders an empty tuple annotation, and a Literal alias it names without its module.
    (r"py:class", r"tuple\[\]"),
    (r"py:class", r"Kind"),
    # Airflow's own classes, imported through the module that knows each line's home for them.
    (r"py:.*", r"airflow_provider_azbatch\.compat\..*"),
    # The provider's machinery, left out of the API reference (autoapi_ignore above): named by methods that
    # Airflow calls (execute, the hook's read primitives) and by module docstrings that explain the design.
    (
        r"py:.*",
        r"airflow_provider_azbatch\.(runs|watching|results|model|submission\.(request|job|task_extras)"
        r"|specs\.(overrides|exit_conditions|operator_options)"
        r"|hooks\.(storage|clouds|credentials|batch_async|batch_reads|pool_moves|submission_steps)"
        r"|workspace\.staged_files|compute\.(catalog|pool_spec|autoscale)"
        r"|triggers\.(output_reads|pool_nodes|subscription|listeners|checkpoints|handover|kill|watch_events|watch_loop))(\..*)?",
    ),
    # The same machinery named relatively (``:mod:`.kill```) by the documented modules beside it.
    (
        r"py:.*",
        r"(output_reads|pool_nodes|subscription|listeners|checkpoints|handover|kill|watch_events|watch_loop"
        r"|pool_moves)(\..*)?",
    ),
]

copybutton_prompt_text = r"\$ "
copybutton_prompt_is_regexp = True

# The API reference leaves out the provider's internal modules (autoapi_ignore); imports from them are expected.
suppress_warnings = ["autoapi.python_import_resolution"]


class _OptionalPagesFilter(logging.Filter):
    """Each section's toctree ends with a glob (``howto/*``) that picks up pages added beside the listed ones;
    a section with none yet must not fail the build."""

    def filter(self, record: logging.LogRecord) -> bool:
        return getattr(record, "subtype", None) != "empty_glob"


def setup(app: object) -> None:
    logging.getLogger("sphinx.sphinx.directives.other").addFilter(_OptionalPagesFilter())
