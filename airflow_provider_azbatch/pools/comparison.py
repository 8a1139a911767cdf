"""Whether an existing shared pool is the pool this task would create: never reused when it is not.

A pool the provider creates carries, in its metadata (``azbatch-pool-spec``), a hash of everything it was
created with, so a pool that differs in anything that was sent (a subnet, an image version, a mount, a field of
``pool_overrides``) is reported even where the service's answer cannot show it. Left out of the hash, on purpose:

- secrets (keys, SAS tokens, passwords): rotating a key does not make a pool another pool;
- the container images the nodes pre-fetch and the registries they pull from: they depend on which task created
  the pool (a pool without a task's image is only warned about, each node then pulls it);
- the text of an autoscale formula this provider generated, of any version: what it scales and between which
  bounds is compared instead (a pool with an older version's formula is brought to this version's; see
  :mod:`.preparation`).

The message names what differs, field by field, as the service reports the existing pool.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from airflow_provider_azbatch.pools.mounts import SECRET_KEYS

SPEC_METADATA_KEY = "azbatch-pool-spec"
_ISO_DURATION = re.compile(
    r"P(?:(?P<d>\d+(?:\.\d+)?)D)?(?:T(?:(?P<h>\d+(?:\.\d+)?)H)?(?:(?P<m>\d+(?:\.\d+)?)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?",
    re.IGNORECASE,
)
# Compared by pool_differences' own checks, or not compared (see the module docstring).
_SPECIAL = {
    "id",
    "metadata",
    "vmSize",
    "virtualMachineConfiguration.imageReference.publisher",
    "virtualMachineConfiguration.imageReference.offer",
    "virtualMachineConfiguration.imageReference.sku",
    "virtualMachineConfiguration.nodeAgentSKUId",
    "virtualMachineConfiguration.containerConfiguration",
    "taskSlotsPerNode",
    "enableAutoScale",
    "autoScaleFormula",
    "targetDedicatedNodes",
    "targetLowPriorityNodes",
    "enableInterNodeCommunication",
}
# Settings a pool can have that a task asking for none of them must not get.
_FEATURES = {
    "networkConfiguration": "a network configuration",
    "mountConfiguration": "mounts",
    "startTask": "a start task",
    "userAccounts": "user accounts",
}

_GENERATED = re.compile(
    r"(?:\$tasks = \$tasks > 0 \? max\(\$tasks, (?P<floor>\d+)\) : 0;\s*)?"
    r"\$nodes = ceil\(\$tasks / (?P<slots>\d+)\);\s*"
    r"(?P<target>\$Target\w+) = max\((?P<min>\d+), min\(\$nodes, (?P<max>\d+)\)\);"
)

Bounds = tuple[Any, ...]


def formula_bounds(formula: Any) -> Bounds | None:
    """(scaled target, task slots per node, min nodes, max nodes[, multi-node floor]) of a formula this provider
    generated; the floor only where there is one (0.5.0 on), so the bounds of other pools read as before."""
    match = _GENERATED.search(formula) if isinstance(formula, str) else None
    if match is None:
        return None
    bounds: Bounds = (match["target"], int(match["slots"]), int(match["min"]), int(match["max"]))
    return (*bounds, int(match["floor"])) if match["floor"] else bounds


def formula_outdated(existing: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """The same bounds, from another version of the provider's formula."""
    have, want = existing.get("autoScaleFormula"), wanted.get("autoScaleFormula")
    return bool(wanted.get("enableAutoScale")) and formula_bounds(have) is not None and have != want


class Scaling(tuple[Any, ...]):
    """Bounds of a formula, shown in words where a difference is reported."""

    def __repr__(self) -> str:
        target, slots, low, high, *floor = self
        kind = "Spot" if target == "$TargetLowPriorityNodes" else "dedicated"
        text = f"{low} to {high} {kind} nodes of {slots} task slot{'s' if slots != 1 else ''}"
        return text + (f", at least {floor[0]} while tasks are pending" if floor else "")


def as_older_versions_made_it(wanted: Mapping[str, Any]) -> dict[str, Any] | None:
    """The pool body versions before 0.5.0 sent for the same settings, where it differs in what is compared: a
    pool for multi-node tasks had their node count as its minimum (kept for good) instead of a floor while
    tasks are pending. None where they sent the same."""
    bounds = formula_bounds(wanted.get("autoScaleFormula"))
    if bounds is None or len(bounds) < 5:
        return None
    target, slots, low, high, floor = bounds
    older = dict(wanted)
    minimum = max(low, floor)
    older["autoScaleFormula"] = f"$nodes = ceil($tasks / {slots});\n{target} = max({minimum}, min($nodes, {high}));"
    return older


def images_not_prefetched(existing: Mapping[str, Any], images: Sequence[str]) -> list[str]:
    """Images of the job's tasks that an existing pool's nodes do not pre-fetch (each node pulls them)."""
    config = existing.get("virtualMachineConfiguration", {}).get("containerConfiguration") or {}
    have = {name.lower() for name in config.get("containerImageNames") or []}
    return [image for image in images if image.lower() not in have]


# -- the specification hash ---------------------------------------------------------------------------
def _without_secrets(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _without_secrets(item) for key, item in value.items() if key not in SECRET_KEYS}
    if isinstance(value, list):
        return [_without_secrets(item) for item in value]
    return value


def _comparable(body: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = _without_secrets(copy.deepcopy(dict(body)))
    out.pop("id", None)
    out["metadata"] = [item for item in out.get("metadata") or [] if item.get("name") != SPEC_METADATA_KEY]
    container = (out.get("virtualMachineConfiguration") or {}).get("containerConfiguration")
    if isinstance(container, dict):
        container.pop("containerImageNames", None)
        container.pop("containerRegistries", None)
    bounds = formula_bounds(out.get("autoScaleFormula"))
    if bounds is not None:
        out["autoScaleFormula"] = list(bounds)
    return out


def spec_hash(body: Mapping[str, Any]) -> str:
    """``sha256:<hex>`` of the pool body as the module docstring says."""
    text = json.dumps(_comparable(body), sort_keys=True, separators=(",", ":"), default=str)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def with_spec_hash(body: Mapping[str, Any]) -> dict[str, Any]:
    """The body with its hash in its metadata."""
    out = dict(body)
    metadata = [item for item in out.get("metadata") or [] if item.get("name") != SPEC_METADATA_KEY]
    out["metadata"] = [*metadata, {"name": SPEC_METADATA_KEY, "value": spec_hash(body)}]
    return out


def recorded_hash(existing: Mapping[str, Any]) -> str | None:
    return next(
        (item.get("value") for item in existing.get("metadata") or [] if item.get("name") == SPEC_METADATA_KEY), None
    )


# -- what differs ------------------------------------------------------------------------------------
def _normal(value: Any) -> Any:
    """Values as the service may spell them back: strings without case, durations as seconds."""
    if isinstance(value, str):
        match = _ISO_DURATION.fullmatch(value)
        if match and value.upper() != "P" and any(match.groupdict().values()):
            parts = {name: float(amount or 0) for name, amount in match.groupdict().items()}
            return parts["d"] * 86400 + parts["h"] * 3600 + parts["m"] * 60 + parts["s"]
        return value.casefold()
    if isinstance(value, Mapping):
        return {key: _normal(item) for key, item in value.items() if key not in SECRET_KEYS}
    if isinstance(value, list):
        return [_normal(item) for item in value]
    return value


def _matches(have: Any, want: Any) -> bool:
    """``want`` is in ``have``: the keys it sets (not its secrets) alike; lists item by item; the service's
    defaults in ``have`` do not count."""
    if isinstance(want, Mapping):
        return isinstance(have, Mapping) and all(
            _matches(have.get(key), item) for key, item in want.items() if key not in SECRET_KEYS
        )
    if isinstance(want, list):
        return isinstance(have, list) and len(have) == len(want) and all(map(_matches, have, want))
    same: bool = _normal(have) == _normal(want)
    return same


def _leaves(value: Any, path: str = "") -> list[tuple[str, Any]]:
    """(dotted path, value) of every leaf of ``value``; lists are leaves (compared whole)."""
    if isinstance(value, Mapping) and value:
        out: list[tuple[str, Any]] = []
        for key, item in value.items():
            out.extend(_leaves(item, f"{path}.{key}" if path else key))
        return out
    return [(path, value)]


def _at(body: Mapping[str, Any], path: str) -> Any:
    value: Any = body
    for key in path.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def _covered(path: str) -> bool:
    return (
        any(path == special or path.startswith(f"{special}.") for special in _SPECIAL)
        or path.rsplit(".", 1)[-1] in SECRET_KEYS
    )


def pool_differences(existing: Mapping[str, Any], wanted: Mapping[str, Any]) -> list[str]:
    """What makes an existing pool (REST JSON, as the service returns it) differ from the pool this task would
    create (the body it would send)."""

    def image(body: Mapping[str, Any]) -> tuple[Any, ...]:
        ref = body.get("virtualMachineConfiguration", {}).get("imageReference", {})
        return tuple(str(ref.get(key, "")).lower() for key in ("publisher", "offer", "sku"))

    def containers(body: Mapping[str, Any]) -> bool:
        return body.get("virtualMachineConfiguration", {}).get("containerConfiguration") is not None

    checks: list[tuple[str, Any, Any]] = [
        ("vmSize", str(existing.get("vmSize", "")).lower(), str(wanted.get("vmSize", "")).lower()),
        ("image", image(existing), image(wanted)),
        (
            "nodeAgentSKUId",
            existing.get("virtualMachineConfiguration", {}).get("nodeAgentSKUId"),
            wanted.get("virtualMachineConfiguration", {}).get("nodeAgentSKUId"),
        ),
        ("taskSlotsPerNode", existing.get("taskSlotsPerNode", 1), wanted.get("taskSlotsPerNode", 1)),
        ("containers", containers(existing), containers(wanted)),
        ("enableAutoScale", bool(existing.get("enableAutoScale")), bool(wanted.get("enableAutoScale"))),
    ]
    if wanted.get("enableAutoScale"):
        have_bounds, want_bounds = (
            formula_bounds(existing.get("autoScaleFormula")),
            formula_bounds(wanted.get("autoScaleFormula")),
        )
        if have_bounds is not None and want_bounds is not None:
            # Formulas of this provider (of any version): what matters is what they scale, and between what.
            checks.append(("autoscale", Scaling(have_bounds), Scaling(want_bounds)))
        else:
            checks.append(("autoScaleFormula", existing.get("autoScaleFormula"), wanted.get("autoScaleFormula")))
    else:
        checks.append(
            ("targetDedicatedNodes", existing.get("targetDedicatedNodes"), wanted.get("targetDedicatedNodes"))
        )
        checks.append(
            ("targetLowPriorityNodes", existing.get("targetLowPriorityNodes"), wanted.get("targetLowPriorityNodes"))
        )
    if wanted.get("enableInterNodeCommunication"):
        checks.append(("enableInterNodeCommunication", bool(existing.get("enableInterNodeCommunication")), True))
    found = [f"{name} is {have!r}, this task wants {want!r}" for name, have, want in checks if have != want]
    # Everything else this task would send, as the service reports it back.
    for path, want in _leaves(_without_secrets(dict(wanted))):
        if _covered(path):
            continue
        have = _at(existing, path)
        if not _matches(have, want):
            found.append(f"{path} is {_without_secrets(have)!r}, this task wants {want!r}")
    for key, what in _FEATURES.items():
        if existing.get(key) and key not in wanted:
            found.append(f"{key}: the pool has {what}, this task wants none")
    have_metadata = {item.get("name"): item.get("value") for item in existing.get("metadata") or []}
    for item in wanted.get("metadata") or []:
        if item.get("name") != SPEC_METADATA_KEY and have_metadata.get(item.get("name")) != item.get("value"):
            found.append(
                f"metadata[{item.get('name')!r}] is {have_metadata.get(item.get('name'))!r}, this task wants "
                f"{item.get('value')!r}"
            )
    return found


def spec_differences(existing: Mapping[str, Any], wanted: Mapping[str, Any]) -> list[str]:
    """``pool_differences``, and a pool created by this provider with another specification hash even when the
    fields the service shows are alike (it has a setting this task does not ask for, or one it cannot show)."""
    found = pool_differences(existing, wanted)
    have = recorded_hash(existing)
    if not found and have is not None and have != spec_hash(wanted):
        found.append(
            f"it was created with another specification ({SPEC_METADATA_KEY} {have}, this task's "
            f"{spec_hash(wanted)}): it has a setting (perhaps through pool_overrides) this task does not ask for"
        )
    return found
