"""The deployment files of docs/howto/deploy.md (deploy/) hold what the page says: the Dockerfile builds on the official
image at the tested versions and its pip line resolves against this release's pins; the Helm values use the chart's
keys and pass the connection the secret holds; Astro's files name the provider and a connection it reads; the
secrets backend reads the secret the page names."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
DOCKERFILE = DEPLOY / "docker" / "Dockerfile"
HELM = DEPLOY / "helm"
ASTRO = DEPLOY / "astro"


def _pin(name: str, constraints: Path = ROOT / "constraints.txt") -> str:
    match = re.search(rf"^{re.escape(name)}==(\S+)$", constraints.read_text(encoding="utf-8"), re.MULTILINE)
    assert match, f"{constraints.name} pins no {name}"
    return match[1]


def _provider_version() -> str:
    match = re.search(r'^version = "([^"]+)"$', (ROOT / "pyproject.toml").read_text(encoding="utf-8"), re.MULTILINE)
    assert match
    return match[1]


def _supported_pythons() -> set[str]:
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    return set(re.findall(r'"Programming Language :: Python :: (3\.\d+)"', text))


# -- the Dockerfile ------------------------------------------------------------------------------------------------


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined, comments dropped."""
    joined, pending = [], ""
    for line in DOCKERFILE.read_text(encoding="utf-8").splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        joined.append(pending + line)
        pending = ""
    return [(text.split(None, 1)[0].upper(), text.split(None, 1)[1].strip()) for text in joined]


def _args() -> dict[str, str]:
    return dict(arg.split("=", 1) for name, arg in _instructions() if name == "ARG" and "=" in arg)


def _pip_requirements() -> list[str]:
    """The requirements of the Dockerfile's ``pip install`` line, with its build arguments filled in."""
    (run,) = [arg for name, arg in _instructions() if name == "RUN" and "pip install" in arg]
    words = shlex.split(run)
    requirements = [word for word in words[words.index("install") + 1 :] if not word.startswith("-")]
    return [re.sub(r"\$\{(\w+)\}", lambda m: _args()[m[1]], requirement) for requirement in requirements]


def test_the_dockerfile_extends_the_official_image_at_the_tested_versions():
    instructions = _instructions()
    names = [name for name, _ in instructions]
    assert set(names) <= {"ARG", "FROM", "RUN", "ENV", "COPY", "LABEL", "WORKDIR"}, names
    froms = [arg for name, arg in instructions if name == "FROM"]
    assert froms == ["apache/airflow:${AIRFLOW_VERSION}-python${PYTHON_VERSION}"]
    args = _args()
    assert args["AIRFLOW_VERSION"] == _pin("apache-airflow"), "the image is not the Airflow the tests run"
    assert args["PYTHON_VERSION"] in _supported_pythons()
    # An ARG declared before FROM is unset after it unless declared again.
    after_from = instructions[names.index("FROM") + 1 :]
    used_after = {m for _, arg in after_from for m in re.findall(r"\$\{(\w+)\}", arg)}
    declared_after = {arg.split("=", 1)[0] for name, arg in after_from if name == "ARG"}
    assert used_after <= declared_after, used_after - declared_after
    # The image runs as its airflow user; pip installs into that user's environment.
    assert "USER" not in names


def test_the_dockerfile_pins_airflow_to_the_image_and_the_provider_to_this_release():
    (run,) = [arg for name, arg in _instructions() if name == "RUN" and "pip install" in arg]
    assert "--no-cache-dir" in shlex.split(run), "a pip cache only makes the image bigger"
    assert _pip_requirements() == [
        f"apache-airflow=={_pin('apache-airflow')}",
        f"airflow-provider-azbatch=={_provider_version()}",
    ]


@pytest.fixture(scope="module")
def provider_wheel(tmp_path_factory) -> Path:
    wheels = tmp_path_factory.mktemp("wheels")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(wheels), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    return wheels


@pytest.mark.packaging
def test_the_image_and_astro_requirements_resolve_against_the_pins_of_the_images_python(provider_wheel, tmp_path):
    """What the image's pip line and Astro's requirements.txt install, resolved for the image's Python against this
    release's pins (the provider from its wheel, as the package index will serve it)."""
    python = _args()["PYTHON_VERSION"]
    constraints = ROOT / "constraints" / f"airflow-3.3-py{python}.txt"
    if not constraints.exists():  # the newest line's own set is resolved for Python 3.11
        constraints = ROOT / "constraints.txt"
    report = tmp_path / "report.json"
    result = subprocess.run(
        [
            sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
            "--python-version", python, "--only-binary=:all:", "--find-links", str(provider_wheel),
            "--report", str(report), "-c", str(constraints),
            *_pip_requirements(), "-r", str(ASTRO / "requirements.txt"),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    installed = {
        item["metadata"]["name"]: item["metadata"]["version"] for item in json.loads(report.read_text())["install"]
    }
    assert installed["apache-airflow"] == _pin("apache-airflow", constraints)
    assert installed["airflow-provider-azbatch"] == _provider_version()
    assert installed["azure-batch"] == _pin("azure-batch", constraints)


# -- the Helm chart ------------------------------------------------------------------------------------------------

# The chart's keys these values use, as the chart's parameters reference documents them
# (https://airflow.apache.org/docs/helm-chart/1.22.0/parameters-ref.html), with their types. A key below a
# free-form mapping (airflow.cfg sections, labels, annotations) is the chart's to pass on, not to know.
CHART_KEYS = {
    "images.airflow.repository": str,
    "images.airflow.tag": str,
    "images.airflow.pullPolicy": str,
    "airflowVersion": str,
    "triggerer.enabled": bool,
    "triggerer.replicas": int,
    "triggerer.serviceAccount.annotations": dict,
    "workers.serviceAccount.annotations": dict,
    "secret": list,
    "config": dict,
    "labels": dict,
    "dags.gitSync.enabled": bool,
    "dags.gitSync.repo": str,
    "dags.gitSync.branch": str,
    "dags.gitSync.subPath": str,
}
SECRET_ENTRY_KEYS = {"envName", "secretName", "secretKey"}


def _leaves(values: dict, prefix: str = "") -> dict[str, object]:
    """Each value by its dotted path, stopping at the chart's keys (a free-form mapping is one value)."""
    found = {}
    for key, value in values.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and path not in CHART_KEYS:
            found.update(_leaves(value, path + "."))
        else:
            found[path] = value
    return found


@pytest.mark.parametrize("name", ["values.yaml", "values-workload-identity.yaml"])
def test_the_helm_values_use_the_charts_keys(name):
    values = yaml.safe_load((HELM / name).read_text(encoding="utf-8"))
    leaves = _leaves(values)
    unknown = set(leaves) - set(CHART_KEYS)
    assert not unknown, f"{name}: not keys of the chart: {sorted(unknown)}"
    wrong = {path: value for path, value in leaves.items() if not isinstance(value, CHART_KEYS[path])}
    assert not wrong, f"{name}: values of the wrong type: {wrong}"


def _values() -> dict:
    return yaml.safe_load((HELM / "values.yaml").read_text(encoding="utf-8"))


def test_the_helm_values_run_the_image_of_the_dockerfile_with_a_triggerer():
    values = _values()
    airflow, provider = _pin("apache-airflow"), _provider_version()
    assert values["airflowVersion"] == airflow
    assert values["images"]["airflow"]["tag"] == f"{airflow}-{provider}"
    assert f"--tag {values['images']['airflow']['repository']}:{airflow}-{provider} " in DOCKERFILE.read_text()
    assert values["triggerer"]["enabled"] is True
    assert values["triggerer"]["replicas"] >= 2


def test_the_helm_values_set_only_options_the_provider_has():
    from airflow_provider_azbatch.get_provider_info import get_provider_info

    options = get_provider_info()["config"]["azbatch"]["options"]
    configured = _values()["config"]["azbatch"]
    assert set(configured) <= set(options), set(configured) - set(options)
    assert all(isinstance(value, str) for value in configured.values()), "airflow.cfg values are strings"


def _connection(value: str, conn_id: str):  # type: ignore[no-untyped-def]
    from airflow.models.connection import Connection

    from airflow_provider_azbatch.hooks.connection import BatchConnectionSettings

    return BatchConnectionSettings.from_connection(Connection.from_json(value, conn_id=conn_id))


def test_the_secret_is_the_connection_the_values_pass_to_airflow():
    (entry,) = _values()["secret"]
    assert set(entry) == SECRET_ENTRY_KEYS
    assert entry["envName"] == "AIRFLOW_CONN_AZBATCH_DEFAULT"
    secret = yaml.safe_load((HELM / "azbatch-connection-secret.yaml").read_text(encoding="utf-8"))
    assert (secret["apiVersion"], secret["kind"]) == ("v1", "Secret")
    assert secret["metadata"]["name"] == entry["secretName"]
    settings = _connection(secret["stringData"][entry["secretKey"]], "azbatch_default")
    assert settings.auth_method.value == "workload_identity"
    assert settings.storage_account_url, "the decorator and workspaces need the storage account"


def test_workload_identity_annotates_the_service_accounts_that_run_tasks_and_triggers():
    values = yaml.safe_load((HELM / "values-workload-identity.yaml").read_text(encoding="utf-8"))
    assert values["labels"] == {"azure.workload.identity/use": "true"}
    client_ids = {
        values[component]["serviceAccount"]["annotations"]["azure.workload.identity/client-id"]
        for component in ("workers", "triggerer")
    }
    assert len(client_ids) == 1
    # The federated credentials of docs/howto/azure-setup.md name these service accounts (release "airflow").
    setup = (ROOT / "docs" / "howto" / "azure-setup.md").read_text(encoding="utf-8")
    for account in ("airflow-worker", "airflow-triggerer"):
        assert f"--subject system:serviceaccount:airflow:{account} " in setup


# -- Astro, and a secrets backend ---------------------------------------------------------------------------------


def test_astro_requirements_name_this_release():
    lines = [
        line for line in (ASTRO / "requirements.txt").read_text().splitlines() if line and not line.startswith("#")
    ]
    assert lines == [f"airflow-provider-azbatch=={_provider_version()}"]


def test_astro_settings_create_a_connection_the_provider_reads():
    (connection,) = yaml.safe_load((ASTRO / "airflow_settings.yaml").read_text(encoding="utf-8"))["airflow"][
        "connections"
    ]
    fields = {
        "conn_type": connection["conn_type"],
        "login": connection["conn_login"],
        "extra": connection["conn_extra"],
    }
    fields["password"] = "a2V5"  # the placeholder's stand-in
    fields["extra"] = {**fields["extra"], "storage_account_key": "c3RvcmFnZWtleQ=="}
    settings = _connection(json.dumps(fields), connection["conn_id"])
    assert settings.auth_method.value == "shared_key"
    assert settings.storage_account_url


def test_the_secrets_backend_reads_the_secret_the_page_names():
    backend_module = pytest.importorskip("airflow.providers.microsoft.azure.secrets.key_vault")
    settings = dict(
        line.split("=", 1)
        for line in (DEPLOY / "secrets-backend.env").read_text(encoding="utf-8").splitlines()
        if line and not line.startswith("#")
    )
    module, _, name = settings["AIRFLOW__SECRETS__BACKEND"].rpartition(".")
    assert module == backend_module.__name__
    backend = getattr(backend_module, name)(**json.loads(settings["AIRFLOW__SECRETS__BACKEND_KWARGS"]))
    secret = backend.build_path(backend.connections_prefix, "azbatch_default", backend.sep)
    assert secret == "airflow-connections-azbatch-default"
    assert f"--name {secret} " in (ROOT / "docs" / "howto" / "deploy.md").read_text(encoding="utf-8")
