"""Provider registration (get_provider_info) and the [azbatch] configuration getters."""

from __future__ import annotations

import ast
import importlib.util
import json
import sys
from pathlib import Path

import pytest

import airflow_provider_azbatch.get_provider_info as provider_info_module
from airflow_provider_azbatch import config
from airflow_provider_azbatch.get_provider_info import CONFIG_OPTIONS, CONN_FIELDS, get_provider_info
from airflow_provider_azbatch.hooks.clouds import CLOUDS
from airflow_provider_azbatch.hooks.connection import AuthMethod, BatchConnectionSettings
from tests.unit.conftest import make_settings

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    # tomllib's original, which pytest depends on before Python 3.11.
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[2]
CONFIG_TYPES = {"string": str, "integer": int, "float": float, "boolean": None}
SECRET_FIELDS = {"client_secret", "client_certificate_password", "storage_account_key"}


@pytest.fixture
def info():
    return get_provider_info()


@pytest.fixture
def connection_type(info):
    (connection_type,) = info["connection-types"]
    return connection_type


# -- provider info ---------------------------------------------------------------------------------


def test_package_name_and_version_match_pyproject(info):
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]

    assert info["package-name"] == "airflow-provider-azbatch"
    assert info["package-name"] == project["name"]
    assert info["versions"][0] == project["version"]  # newest first, as Airflow lists them
    entry_point = project["entry-points"]["apache_airflow_provider"]["provider_info"]
    assert entry_point == "airflow_provider_azbatch.get_provider_info:get_provider_info"


def test_valid_against_airflows_provider_info_schema(info):
    jsonschema = pytest.importorskip("jsonschema")
    import airflow

    schema = json.loads((Path(airflow.__file__).parent / "provider_info.schema.json").read_text())

    jsonschema.validate(info, schema)


def test_listed_modules_exist(info, connection_type):
    modules = [
        m
        for key in ("hooks", "operators", "sensors", "triggers")
        for entry in info[key]
        for m in entry["python-modules"]
    ]
    modules.append(connection_type["hook-class-name"].rsplit(".", 1)[0])
    modules += [link.rsplit(".", 1)[0] for link in info["extra-links"]]

    for module in modules:
        assert importlib.util.find_spec(module) is not None, module


def test_module_imports_nothing_heavy():
    tree = ast.parse(Path(provider_info_module.__file__).read_text())
    imported = {
        alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names
    } | {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}

    assert imported == {"__future__", "typing"}


def test_every_config_option_is_documented(info):
    options = info["config"]["azbatch"]["options"]

    assert info["config"]["azbatch"]["description"]
    assert set(options) == {
        "default_conn_id",
        "poll_interval",
        "fail_fast",
        "max_result_bytes",
        "stream_task_output",
        "max_streamed_tasks",
        "failure_tail_lines",
        "max_read_bytes",
        "sas_hours",
        "pool_check_interval",
        "idle_node_margin",
        "submit_retry_seconds",
        "quota_wait_seconds",
        "quota_retry_seconds",
        "checkpoint_interval",
        "min_deferral_seconds",
        "idle_stream_interval",
        "partial_line_seconds",
        "stream_looks_per_second",
        "account_view",
        "job_looks_per_second",
        "output_requests_per_second",
        "requests_in_flight",
        "workspace_max_mb",
        "workspace_container",
        "workspace_prefix",
        "node_logs_container",
    }
    for name, option in options.items():
        assert isinstance(option["description"], str), name
        assert option["description"].strip(), name
        assert option["type"] in CONFIG_TYPES, name
        assert isinstance(option["default"], str), name
        assert isinstance(option["example"], str), name
        assert option["version_added"] in info["versions"], name
        convert = CONFIG_TYPES[option["type"]]
        for value in (option["default"], option["example"]):
            if convert is None:
                assert value in ("True", "False"), name
            else:
                convert(value)


@pytest.mark.parametrize(
    ("option", "getter", "documented", "expected"),
    [
        ("default_conn_id", config.get_str, "azbatch_default", "azbatch_default"),
        ("poll_interval", config.get_float, "5", 5.0),
        ("stream_task_output", config.get_bool, "True", True),
        ("max_streamed_tasks", config.get_int, "20", 20),
        ("failure_tail_lines", config.get_int, "30", 30),
        ("max_read_bytes", config.get_int, "1048576", 1048576),
        ("sas_hours", config.get_float, "24", 24.0),
    ],
)
def test_getters_fall_back_to_the_documented_defaults(option, getter, documented, expected, clean_azbatch_env):
    assert CONFIG_OPTIONS[option]["default"] == documented
    value = getter(option)
    assert value == expected
    assert type(value) is type(expected)


def test_secret_connection_fields_are_passwords(connection_type):
    fields = connection_type["conn-fields"]

    assert fields is CONN_FIELDS
    for name, spec in fields.items():
        assert spec["label"], name
        assert spec["description"], name
        if name in SECRET_FIELDS:
            assert spec["schema"]["format"] == "password", name
        else:
            assert "format" not in spec["schema"], name


def test_connection_field_choices_match_the_code(connection_type):
    fields = connection_type["conn-fields"]

    assert fields["auth_method"]["schema"]["enum"] == ["auto", *(m.value for m in AuthMethod)]
    assert fields["cloud"]["schema"]["enum"] == [*CLOUDS, "custom"]


def test_the_form_shows_no_null_and_starts_at_the_defaults(connection_type):
    # What the UI's form is built from (GET /ui/connections/hook_meta serves these schemas as they are).
    fields = connection_type["conn-fields"]
    for name, spec in fields.items():
        assert None not in spec["schema"].get("enum", []), name
        assert "null" not in json.dumps(spec.get("schema", {}).get("enum", [])), name
    assert fields["auth_method"]["schema"] == {
        "type": "string",
        "enum": ["auto", "shared_key", "service_principal", "managed_identity", "workload_identity", "default"],
        "default": "auto",
    }
    assert fields["cloud"]["schema"] == {
        "type": "string",
        "enum": ["public", "us_government", "china", "custom"],
        "default": "public",
    }
    assert "(the default)" in fields["auth_method"]["description"]
    assert "(the default)" in fields["cloud"]["description"]
    # Required (the UI marks a field whose type cannot be null), and says so.
    assert fields["account_url"]["schema"] == {"type": "string"}
    assert fields["account_url"]["description"].startswith("Required.")
    assert all(
        "null" in spec["schema"]["type"]
        for name, spec in fields.items()
        if name not in ("account_url", "auth_method", "cloud")
    )


def test_auto_is_the_same_as_an_empty_auth_method():
    from airflow.sdk import Connection

    from airflow_provider_azbatch.hooks.connection import AuthMethod, BatchConnectionSettings

    def method(extra):
        conn = Connection(conn_id="c", conn_type="azbatch", login="acct", password="a2V5", extra=json.dumps(extra))
        return BatchConnectionSettings.from_connection(conn).auth_method

    assert method({"account_url": "https://a.b.batch.azure.com", "auth_method": "auto"}) is AuthMethod.SHARED_KEY
    assert method({"account_url": "https://a.b.batch.azure.com"}) is AuthMethod.SHARED_KEY


def test_every_connection_field_is_read():
    # Each form field lands in the settings attribute of the same name (or the cloud).
    values = {
        "account_url": "https://acct.westeurope.batch.azure.com",
        "auth_method": "service_principal",
        "tenant_id": "tenant",
        "client_id": "client",
        "client_secret": "secret",
        "client_certificate_path": "/c.pem",
        "client_certificate_password": "pem",
        "federated_token_file": "/token",
        "cloud": "us_government",
        "authority_host": "https://login.gov.example",
        "token_scope": "https://batch.gov.example//.default",
        "resource_manager_url": "https://management.gov.example",
        "ca_bundle": "/ca.pem",
        "subscription_id": "sub",
        "resource_group": "rg",
        "storage_account_url": "https://store.blob.core.windows.net",
        "storage_account_key": "c3RvcmFnZS1rZXk=",
    }
    assert set(values) == set(CONN_FIELDS)

    settings = make_settings(values)

    for name, value in values.items():
        if name == "cloud":
            assert settings.cloud.name == value
        elif name == "authority_host":
            assert settings.authority_host == value
        elif name == "token_scope":
            assert settings.token_scope == value
        elif name == "resource_manager_url":
            assert settings.cloud.resource_manager_url == value
        elif name == "auth_method":
            assert settings.auth_method is AuthMethod.SERVICE_PRINCIPAL
        else:
            assert getattr(settings, name) == value, name
    assert isinstance(settings, BatchConnectionSettings)


def test_ui_field_behaviour(connection_type):
    behaviour = connection_type["ui-field-behaviour"]

    assert connection_type["connection-type"] == "azbatch"
    assert behaviour["hidden-fields"] == ["schema", "port", "host"]
    assert set(behaviour["relabeling"]) == {"login", "password"}
    assert set(behaviour["placeholders"]) - {"login"} <= set(CONN_FIELDS)


# -- config getters --------------------------------------------------------------------------------


@pytest.fixture
def clean_azbatch_env(monkeypatch):
    import os

    for name in list(os.environ):
        if name.startswith("AIRFLOW__AZBATCH__"):
            monkeypatch.delenv(name)
    return monkeypatch


def test_environment_overrides(clean_azbatch_env):
    clean_azbatch_env.setenv("AIRFLOW__AZBATCH__POLL_INTERVAL", "2.5")
    clean_azbatch_env.setenv("AIRFLOW__AZBATCH__MAX_STREAMED_TASKS", " 7 ")
    clean_azbatch_env.setenv("AIRFLOW__AZBATCH__DEFAULT_CONN_ID", "azbatch_prod")
    clean_azbatch_env.setenv("AIRFLOW__AZBATCH__STREAM_TASK_OUTPUT", "False")

    assert config.get_float("poll_interval") == 2.5
    assert config.get_int("max_streamed_tasks") == 7
    assert config.get_str("default_conn_id") == "azbatch_prod"
    assert config.get_bool("stream_task_output") is False


@pytest.mark.parametrize(
    ("getter", "option", "value", "message"),
    [
        (config.get_float, "poll_interval", "abc", "[azbatch] poll_interval must be a number, got 'abc'"),
        (config.get_float, "poll_interval", "", "[azbatch] poll_interval must be a number, got ''"),
        (config.get_int, "max_streamed_tasks", "1.5", "[azbatch] max_streamed_tasks must be an integer, got '1.5'"),
        (config.get_int, "max_read_bytes", "1MB", "[azbatch] max_read_bytes must be an integer, got '1MB'"),
        (
            config.get_bool,
            "stream_task_output",
            "maybe",
            "[azbatch] stream_task_output must be True or False, got 'maybe'",
        ),
    ],
)
def test_bad_values_give_clear_errors(getter, option, value, message, clean_azbatch_env):
    clean_azbatch_env.setenv(f"AIRFLOW__AZBATCH__{option.upper()}", value)

    with pytest.raises(ValueError, match=r"^\[azbatch\] ") as info:
        getter(option)

    assert str(info.value) == message


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        *[(text, True) for text in ("true", "True", " YES ", "1", "on")],
        *[(text, False) for text in ("false", "FALSE", "no", "0", " off")],
    ],
)
def test_bool_spellings(value, expected, clean_azbatch_env):
    clean_azbatch_env.setenv("AIRFLOW__AZBATCH__STREAM_TASK_OUTPUT", value)

    assert config.get_bool("stream_task_output") is expected


def test_unknown_option_is_a_programming_error():
    with pytest.raises(KeyError):
        config.get_str("no_such_option")
