"""Command line of the local Batch service."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
import uuid
from pathlib import Path

from .account import DEV_ACCOUNT_KEY, DEV_ACCOUNT_NAME, DEV_LOCATION, DEV_RESOURCE_GROUP, DEV_SUBSCRIPTION_ID
from .app import EmulatorConfig, LocalBatchServer
from .auth.authority import ServicePrincipal
from .auth.roles import ROLE_NAMES, parse_roles
from .faults import FaultSpecError
from .management.settings import DEFAULT_CORE_QUOTA, POOL_ALLOCATION_MODES, ManagementSettings
from .management.skus import families
from .model.account import HOST_LIST_ORDERS
from .model.persistence import StateFileError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m local_azure_batch",
        description="A local Azure Batch service: the Batch data-plane REST API (2025-06-01), tasks run as "
        "local processes.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port to bind; 0 picks a free one (default)")
    parser.add_argument("--account-name", default=DEV_ACCOUNT_NAME, help="Batch account name")
    parser.add_argument("--account-key", default=DEV_ACCOUNT_KEY, help="base64 Shared Key of the account")
    parser.add_argument("--tls", action="store_true", help="serve HTTPS with a generated CA; enables token auth")
    parser.add_argument("--task-root", type=Path, help="where node and task directories go (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the task root on shutdown")
    parser.add_argument(
        "--state-dir",
        type=Path,
        help="save pools, jobs and tasks (and the nodes' files) in DIR and load them at the next start; running "
        "tasks are requeued then (default: state is kept in memory only)",
    )
    parser.add_argument("--faults", default="", help="fault injection rules, see the README")
    parser.add_argument("--fault-seed", type=int, help="seed for rate-based faults (reproducible runs)")
    parser.add_argument(
        "--node-start-seconds", type=float, default=1.0, help="time a new compute node takes to become idle"
    )
    parser.add_argument(
        "--schedule-time-scale",
        type=_positive_float,
        default=1.0,
        help="run job schedules this many times faster than their recurrenceInterval and startWindow say (60: a "
        "1-minute recurrence comes every second; for tests; default 1, the service's pace)",
    )
    parser.add_argument(
        "--autoscale-interval",
        type=float,
        default=5.0,
        help="seconds between autoscale evaluations (0: use each pool's own interval, like the service)",
    )
    parser.add_argument(
        "--node-quota",
        type=_non_negative_int,
        help="most nodes the account may hold, all pools together (default: no limit); a resize beyond it "
        "gets what fits and a resize error, like an account out of core quota",
    )
    parser.add_argument(
        "--spot-capacity",
        type=_non_negative_int,
        help="most Spot nodes of the account that can be up at once (default: no limit); pools short of their "
        "Spot target for want of it keep resizing, as Spot pools seek capacity (change it on /_emulator/spot)",
    )
    parser.add_argument(
        "--job-quota",
        type=_non_negative_int,
        help="active jobs the account may hold (all but completed ones; default: no limit); one more is "
        "refused with 409 ActiveJobAndScheduleQuotaReached, like the real service",
    )
    parser.add_argument(
        "--pool-quota",
        type=_non_negative_int,
        help="pools the account may hold (auto-pools included; default: no limit); one more is refused with "
        "409 PoolQuotaReached",
    )
    parser.add_argument(
        "--sp-certificate", type=Path, help="PEM certificate accepted for the development service principal"
    )
    parser.add_argument(
        "--subscription-id",
        default=DEV_SUBSCRIPTION_ID,
        help="the subscription the account is in: pools' subnets and public IPs must be in it "
        f"(default {DEV_SUBSCRIPTION_ID})",
    )
    parser.add_argument(
        "--blob-endpoint",
        action="append",
        default=[],
        type=_mapping,
        metavar="ACCOUNT=URL",
        help="the Blob endpoint of a storage account, for blobfuse mounts (e.g. "
        "devstoreaccount1=http://127.0.0.1:10000/devstoreaccount1 for Azurite); repeatable",
    )
    parser.add_argument(
        "--mount-source",
        action="append",
        default=[],
        type=_mapping,
        metavar="SOURCE=DIR",
        help="a local directory standing for an NFS export, Azure Files URL or CIFS share a pool mounts; repeatable",
    )
    parser.add_argument(
        "--vm-size",
        action="append",
        default=[],
        metavar="NAME",
        help="a VM size pools may name besides the sizes the service knows (data/vm_sizes.json), for a size "
        "newer than that list; repeatable",
    )
    parser.add_argument(
        "--host-list-order",
        choices=HOST_LIST_ORDERS,
        default="primary-first",
        help="where a multi-instance task's AZ_BATCH_HOST_LIST puts the primary's node (Batch does not document "
        "the order; AZ_BATCH_MASTER_NODE names the primary): first (default) or last",
    )
    parser.add_argument(
        "--principal",
        action="append",
        default=[],
        type=_principal,
        metavar="CLIENT_ID:SECRET:ROLES",
        help="with --tls, a service principal the token authority issues tokens to, with its role assignments: "
        f"a comma list of {', '.join(ROLE_NAMES)}, or none (besides the development principals, one with every "
        "role and one with none); repeatable",
    )
    parser.add_argument("--location", default=DEV_LOCATION, help=f"the account's Azure region (default {DEV_LOCATION})")
    parser.add_argument(
        "--unavailable-vm-size",
        action="append",
        default=[],
        metavar="NAME",
        help="a VM size the account's region does not offer: pools of it are refused (400 InvalidPropertyValue) "
        "and the management plane does not list it; repeatable",
    )
    management = parser.add_argument_group(
        "management plane (with --tls)",
        "What Azure Resource Manager says about the account: resource group, allocation mode, core quotas "
        "(reported, not enforced: --node-quota bounds the nodes).",
    )
    management.add_argument(
        "--resource-group",
        default=DEV_RESOURCE_GROUP,
        help=f"the account's resource group (default {DEV_RESOURCE_GROUP})",
    )
    management.add_argument(
        "--pool-allocation-mode",
        choices=POOL_ALLOCATION_MODES,
        default=POOL_ALLOCATION_MODES[0],
        help="BatchService (default; the account reports its core quotas) or UserSubscription (the cores are the "
        "subscription's: the account reports none)",
    )
    management.add_argument(
        "--core-quota",
        action="append",
        default=[],
        type=_mapping,
        metavar="FAMILY=VCPUS",
        help="the account's dedicated vCPU quota for a VM family (e.g. StandardNCADSA100v4Family=24; default "
        f"{DEFAULT_CORE_QUOTA} for every family); repeatable",
    )
    management.add_argument(
        "--low-priority-core-quota",
        type=_non_negative_int,
        default=DEFAULT_CORE_QUOTA,
        metavar="VCPUS",
        help=f"the account's spot/low-priority vCPU quota (default {DEFAULT_CORE_QUOTA})",
    )
    parser.add_argument("--quiet", action="store_true", help="do not log requests")
    parser.add_argument(
        "--request-log",
        type=_non_negative_int,
        default=100_000,
        metavar="N",
        help="keep the last N requests for GET /_emulator/requests (default 100000; 0: none)",
    )
    return parser


def _mapping(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name or not value:
        raise argparse.ArgumentTypeError("give NAME=VALUE")
    return name, value


def _principal(text: str) -> ServicePrincipal:
    client_id, sep, rest = text.partition(":")
    secret, sep2, roles = rest.rpartition(":")
    if not sep or not sep2 or not client_id or not secret:
        raise argparse.ArgumentTypeError("give CLIENT_ID:SECRET:ROLES (ROLES: a comma list of roles, or none)")
    try:
        assignments = parse_roles(roles)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return ServicePrincipal(client_id, secret, None, str(uuid.uuid5(uuid.NAMESPACE_OID, client_id)), assignments)


def _core_quotas(pairs: list[tuple[str, str]]) -> dict[str, int]:
    """FAMILY=VCPUS pairs, the family named as the SKU list names it (case-insensitively)."""
    known = {family.lower(): family for family in families()}
    quotas = {}
    for name, value in pairs:
        family = known.get(name.lower())
        if family is None:
            raise argparse.ArgumentTypeError(
                f"--core-quota: unknown VM family {name!r}; known: {', '.join(known.values())}"
            )
        quotas[family] = _non_negative_int(value)
    return quotas


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError("must be greater than 0")
    return value


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError("must be 0 or more")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        core_quotas = _core_quotas(args.core_quota)
    except (argparse.ArgumentTypeError, ValueError) as exc:
        parser.error(str(exc))
    if args.state_dir is not None and args.task_root is not None:
        parser.error("--task-root and --state-dir together: the state directory holds the task root; give one")
    if args.account_key:
        import base64
        import binascii

        try:
            base64.b64decode(args.account_key, validate=True)
        except binascii.Error:
            print("--account-key must be base64 (like the keys the Azure portal shows)", file=sys.stderr)
            return 2
    config = EmulatorConfig(
        host=args.host,
        port=args.port,
        account_name=args.account_name,
        account_key=args.account_key,
        tls=args.tls,
        task_root=args.task_root,
        keep=args.keep,
        faults=args.faults,
        fault_seed=args.fault_seed,
        node_start_seconds=args.node_start_seconds,
        schedule_time_scale=args.schedule_time_scale,
        autoscale_interval_seconds=args.autoscale_interval or None,
        node_quota=args.node_quota,
        spot_capacity=args.spot_capacity,
        job_quota=args.job_quota,
        pool_quota=args.pool_quota,
        sp_certificate=args.sp_certificate,
        log_requests=not args.quiet,
        subscription_id=args.subscription_id,
        blob_endpoints=dict(args.blob_endpoint),
        mount_sources=dict(args.mount_source),
        extra_vm_sizes=tuple(args.vm_size),
        host_list_order=args.host_list_order,
        request_log_size=args.request_log,
        state_dir=args.state_dir,
        principals=tuple(args.principal),
        location=args.location,
        unavailable_vm_sizes=tuple(args.unavailable_vm_size),
        management=ManagementSettings(
            resource_group=args.resource_group,
            pool_allocation_mode=args.pool_allocation_mode,
            core_quotas=core_quotas,
            low_priority_core_quota=args.low_priority_core_quota,
        ),
    )
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stdout)
    try:
        asyncio.run(_serve(config))
    except FaultSpecError as exc:
        print(f"--faults: {exc}", file=sys.stderr)
        return 2
    except StateFileError as exc:
        print(f"cannot start the local Batch service: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"cannot start the local Batch service: {exc}", file=sys.stderr)
        return 1
    return 0


async def _serve(config: EmulatorConfig) -> None:
    server = LocalBatchServer(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await server.start()
    try:
        if server.tls_files is not None:
            print(f"AZBATCH_EMULATOR_CA={server.tls_files.ca_cert}", flush=True)
        print(f"AZBATCH_EMULATOR_URL={server.url}", flush=True)
        await stop.wait()
    finally:
        await server.stop()
