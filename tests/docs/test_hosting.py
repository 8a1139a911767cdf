"""The hosted site is the one `make docs` builds: .readthedocs.yaml installs and builds as the Makefile does, and
the package's [project.urls] lead to pages the site has."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


def _makefile_recipe(target: str) -> list[str]:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    recipe = re.search(rf"^{re.escape(target)}:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE)
    assert recipe, f"the Makefile has no target {target}"
    return [line.strip() for line in recipe.group(1).splitlines()]


def _config() -> dict:
    return yaml.safe_load((ROOT / ".readthedocs.yaml").read_text(encoding="utf-8"))


def test_read_the_docs_uses_the_python_the_constraints_are_resolved_for():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    major, minor = re.search(r"sys\.version_info\[:2\] != \((\d+), (\d+)\)", ci).groups()
    assert _config()["build"]["tools"]["python"] == f"{major}.{minor}"


def test_read_the_docs_installs_the_docs_extra_from_the_constraints_as_make_docs_does():
    installs = [shlex.split(line) for line in _config()["build"]["jobs"]["install"] if " install " in line]
    makefile = next(line for line in _makefile_recipe("$(DOCS_STAMP)") if "pip install" in line)
    wanted = ["-c", "constraints.txt", "-e"]
    assert any(words[words.index("install") + 1 :][:3] == wanted and words[-1] == ".[docs]" for words in installs)
    assert "-c constraints.txt -e '.[docs]'" in makefile


def _sphinx_flags(words: list[str]) -> list[str]:
    """sphinx-build's options and source directory, without -q (output only) and the output directory."""
    start = next(
        i for i, word in enumerate(words) if word in ("sphinx-build", "sphinx") or word.endswith("/sphinx-build")
    )
    return [word for word in words[start + 1 : -1] if word != "-q"]


def test_read_the_docs_builds_with_the_flags_of_make_docs():
    (html,) = _config()["build"]["jobs"]["build"]["html"]
    assert html.endswith(" $READTHEDOCS_OUTPUT/html")
    make = next(line for line in _makefile_recipe("docs") if "sphinx-build" in line)
    assert _sphinx_flags(shlex.split(html)) == _sphinx_flags(shlex.split(make))
    assert _config()["sphinx"] == {"configuration": "docs/conf.py", "fail_on_warning": True}


def test_the_package_urls_lead_to_the_hosted_site():
    tomllib = pytest.importorskip("tomllib", reason="reads pyproject.toml on Python 3.11+")
    urls = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["urls"]
    site = urls["Documentation"]
    assert re.fullmatch(r"https://[a-z0-9-]+\.readthedocs\.io/", site)
    for name, url in urls.items():
        assert url.startswith(site), f"{name}: {url}"
        page = url.removeprefix(site).removeprefix("en/latest/").removesuffix(".html")
        assert not page or (ROOT / "docs" / f"{page}.md").is_file(), f"{name}: the site has no page {page}"


def test_each_module_the_api_reference_leaves_out_exists():
    """A module moved to another package would otherwise slip into the API reference unnoticed (and a name that
    no longer matches anything leaves it in)."""
    import ast

    conf = (ROOT / "docs" / "conf.py").read_text(encoding="utf-8")
    tree = ast.parse(conf)
    (ignored,) = [
        node.value
        for node in tree.body
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "autoapi_ignore" for t in node.targets)
    ]
    patterns = ast.literal_eval(ignored)
    package = ROOT / "airflow_provider_azbatch"
    missing = [pattern for pattern in patterns if not list(package.glob(pattern.removeprefix("*/")))]
    assert missing == []
