"""Reference pages rendered from the provider's own data at build time, never copied by hand.

A page asks for one with an empty fenced block, e.g. ```` ```{azbatch-config} ```` followed by ```` ``` ````; the
block is replaced by the generated Markdown before the page is parsed (``source-read``), so its headings are
sections with anchors like any other:

- ``azbatch-config``: the ``[azbatch]`` options of ``get_provider_info()["config"]``, with their
  ``AIRFLOW__AZBATCH__*`` names (Airflow's configuration reference layout).
- ``azbatch-connection-fields``: the connection form as ``get_provider_info()`` registers it (fields, labels,
  choices, secrets, hidden and relabelled standard fields).
- ``azbatch-vm-catalog``: ``compute/data/vm_sizes.json``, the catalog pools from requirements choose from.
- ``azbatch-metrics``: the metric names the provider emits, found in its source.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_provider_azbatch import get_provider_info as provider_info_module

if TYPE_CHECKING:  # tests/docs imports this module where Sphinx is not installed
    from sphinx.application import Sphinx

PACKAGE = Path(provider_info_module.__file__).resolve().parent
VM_CATALOG = PACKAGE / "compute" / "data" / "vm_sizes.json"


def _provider_info() -> dict[str, Any]:
    return provider_info_module.get_provider_info()


def _literal(value: object) -> str:
    text = str(value)
    return f"``{text}``" if text else "(empty)"


def _cell(text: str) -> str:
    # One Markdown table cell.
    return " ".join(text.split()).replace("|", "\\|")


def config_markdown() -> list[str]:
    """Each ``[azbatch]`` option: description, version, type, default, environment variable, example."""
    out: list[str] = []
    for section, spec in _provider_info()["config"].items():
        out += [f"## `[{section}]`", "", spec["description"], ""]
        for name, option in sorted(spec["options"].items()):
            out += [f"### `{name}`", "", option["description"], ""]
            out += [f"- Type: {option['type']}"]
            out += [f"- Default: {_literal(option['default'])}"]
            out += [f"- Environment variable: `AIRFLOW__{section.upper()}__{name.upper()}`"]
            if option.get("example"):
                out += [f"- Example: {_literal(option['example'])}"]
            out += [f"- Added in: {option['version_added']}", ""]
    return out


def connection_markdown() -> list[str]:
    """The ``azbatch`` connection type's form: extra fields and what happens to the standard ones."""
    (conn_type,) = (c for c in _provider_info()["connection-types"] if c["connection-type"] == "azbatch")
    behaviour = conn_type["ui-field-behaviour"]
    hook = conn_type["hook-class-name"]
    out = [
        f"Connection type `{conn_type['connection-type']}` (*{conn_type['hook-name']}*), hook {{py:class}}`~{hook}`.",
        "",
        "## Standard fields",
        "",
    ]
    for field, label in behaviour.get("relabeling", {}).items():
        placeholder = behaviour.get("placeholders", {}).get(field)
        hint = f" (placeholder `{placeholder}`)" if placeholder else ""
        out.append(f"- `{field}`: shown as *{label}*{hint}")
    hidden = ", ".join(f"`{f}`" for f in behaviour.get("hidden-fields", []))
    out += [f"- hidden: {hidden}", ""]
    out += [
        "## Extra fields",
        "",
        "Stored in the connection's Extra as JSON under these names.",
        "",
        "| Field | Label | Value | Meaning |",
        "| --- | --- | --- | --- |",
    ]
    for name, field in conn_type["conn-fields"].items():
        schema = field["schema"]
        kinds = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        value = []
        if "null" not in kinds:
            value.append("required" if "enum" not in schema else "a choice")
        if "enum" in schema:
            value.append("one of " + ", ".join(f"`{v}`" for v in schema["enum"]))
            value.append(f"default `{schema['default']}`")
        if schema.get("format") == "password":
            value.append("secret (a password field, masked)")
        placeholder = behaviour.get("placeholders", {}).get(name)
        if placeholder:
            value.append(f"e.g. `{placeholder}`")
        out.append(
            f"| `{name}` | {_cell(field['label'])} | {_cell('; '.join(value) or 'optional')} | "
            f"{_cell(field['description'])} |"
        )
    return [*out, ""]


def vm_catalog_markdown() -> list[str]:
    """The VM sizes pools from requirements choose from, with the catalog's notes and sources."""
    catalog = json.loads(VM_CATALOG.read_text(encoding="utf-8"))
    header = catalog["header"]
    out = [
        f"{header['description']} Region `{header['region']}`, retrieved {header['retrieved']}.",
        "",
        f"- Specifications: {header['specs_note']}",
        f"- Prices: {header['prices_note']}",
        f"- {header['note']}",
    ]
    for kind, why in header.get("retired_gpu_kinds", {}).items():
        out.append(f"- Retired GPU kind `{kind}`: {why}")
    out += ["", f"## {len(catalog['sizes'])} sizes", ""]
    out += [
        "| Size | Family | vCPUs | Memory (GiB) | GPUs | Data disks | Spot | USD/hour | Chosen from requirements |",
        "| --- | --- | ---: | ---: | --- | ---: | --- | ---: | --- |",
    ]
    for size in catalog["sizes"]:
        gpus = "-"
        if size["gpus"]:
            gpus = f"{size['gpus']} x {size['gpu_kind']}"
            if size.get("gpu_memory_gib"):
                gpus += f" ({size['gpu_memory_gib']} GiB)"
        # explicit_only sizes need set-up the default images lack: chosen when the requirements name their GPU kind.
        chosen = f"only for gpu_kind `{size['gpu_kind']}`" if size.get("explicit_only") else "yes"
        out.append(
            f"| `{size['name']}` | {size['family']} | {size['vcpus']} | {size['memory_gib']} | {gpus} | "
            f"{size.get('max_data_disks', '-')} | {'yes' if size['low_priority_capable'] else 'no'} | "
            f"{size['hourly_usd']} | {chosen} |"
        )
    out += ["", "## Sources", ""]
    out += [f"- <{url}>" for url in header["source"]]
    return [*out, ""]


# incr_metric(f"resumable_job.{name}", ...) in a helper, called as _metric("fresh_submit", ...); or a literal name.
_PREFIXED = re.compile(r'incr_metric\(f"(?P<prefix>[\w.]+)\.\{name\}"')
_HELPER_CALL = re.compile(r'_metric\("(?P<name>\w+)"')
_LITERAL = re.compile(r'incr_metric\("(?P<name>[\w.]+)"')


def metric_names() -> dict[str, list[str]]:
    """Metric name -> the modules that emit it (relative to the package)."""
    found: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        module = str(path.relative_to(PACKAGE.parent))
        names = [m["name"] for m in _LITERAL.finditer(text)]
        prefixed = _PREFIXED.search(text)
        if prefixed:
            names += [f"{prefixed['prefix']}.{m['name']}" for m in _HELPER_CALL.finditer(text)]
        for name in names:
            found.setdefault(name, []).append(module)
    return dict(sorted(found.items()))


def metrics_markdown() -> list[str]:
    names = metric_names()
    if not names:
        raise ValueError("no metric found in the provider's source: update docs/_ext/azbatch_reference.py")
    out = ["| Counter | Emitted by |", "| --- | --- |"]
    out += [f"| `{name}` | " + ", ".join(f"`{m}`" for m in modules) + " |" for name, modules in names.items()]
    return [*out, ""]


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


# What each extra of pyproject.toml is for (the installation page's table): an extra without a line here fails the
# documentation build, so a new extra is explained where users choose one.
EXTRA_PURPOSES = {
    "local": "where you develop DAGs: the local Batch service, for `azbatch-dev` and tests that run offline "
    "([developing DAGs locally](howto/local-development.md))",
    "torchx": "where Airflow runs TorchX apps: the `azure_batch` TorchX scheduler and `AzureBatchTorchXOperator` "
    "(the training step of the [GPU tutorial](tutorials/gpu-training.md); [TorchX](howto/torchx.md))",
    "openlineage": "where Airflow reports lineage: the OpenLineage provider, for the runs' OpenLineage events "
    "([OpenLineage](howto/lineage.md)); nothing of it is imported without it",
    "test": "this repository's tests, on every Airflow line",
    "dev": "this repository's checks and its tests on the newest line",
    "docs": "building this documentation (Python 3.11 and later)",
}


def extras_markdown(optional: dict[str, list[str]]) -> str:
    """The installation page's table: each extra, what it installs, and where it is for."""
    missing = sorted(set(optional) - set(EXTRA_PURPOSES))
    if missing:
        raise ValueError(f"pyproject.toml's extras {missing} have no line in EXTRA_PURPOSES (docs/_ext)")
    rows = ["| Extra | Installs | For |", "| --- | --- | --- |"]
    for extra, requirements in optional.items():
        installs = ", ".join(f"`{requirement}`" for requirement in requirements)
        rows.append(f"| `{extra}` | {installs} | {EXTRA_PURPOSES[extra]} |")
    return "\n".join(rows)


def supported_versions(root: Path) -> dict[str, str]:
    """What the site says is supported, each from the one place it is kept: the Pythons from the package's
    classifiers (CI tests each), the Airflow lines from the dependency sets CI tests them with
    (``constraints/airflow-<line>.txt``), the requirements from the package's dependencies."""
    import tomllib  # Python 3.11+, as the documentation build

    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    classifier = "Programming Language :: Python :: "
    pythons = [c.removeprefix(classifier) for c in project["classifiers"] if c.startswith(classifier + "3.")]
    # constraints/airflow-<line>.txt; airflow-<line>-py<version>.txt are that line's sets for other Pythons.
    sets = (re.fullmatch(r"airflow-(\d+\.\d+)\.txt", path.name) for path in (root / "constraints").iterdir())
    lines = [match[1] for match in sets if match]
    return {
        "pythons": _and(sorted(pythons, key=_version_key)),
        "airflow_lines": _and(sorted(lines, key=_version_key)),
        "requirements": "\n".join(f"- `{requirement}`" for requirement in project["dependencies"]),
        "extras": extras_markdown(project["optional-dependencies"]),
    }


GENERATORS: dict[str, Callable[[], list[str]]] = {
    "azbatch-config": config_markdown,
    "azbatch-connection-fields": connection_markdown,
    "azbatch-vm-catalog": vm_catalog_markdown,
    "azbatch-metrics": metrics_markdown,
}
_BLOCK = re.compile(r"^```\{(?P<name>azbatch-[a-z-]+)\}\n```$", re.MULTILINE)


def _replace_blocks(app: Sphinx, docname: str, source: list[str]) -> None:
    def generated(match: re.Match[str]) -> str:
        name = match["name"]
        if name not in GENERATORS:
            raise ValueError(f"{docname}: unknown generated block {name!r}; known: {', '.join(GENERATORS)}")
        app.env.note_dependency(provider_info_module.__file__)
        app.env.note_dependency(str(VM_CATALOG))
        return "\n".join(GENERATORS[name]())

    source[0] = _BLOCK.sub(generated, source[0])


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("source-read", _replace_blocks)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
