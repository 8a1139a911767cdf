"""The report as a person reads it: a line per finding (its fix, or why it is unknown, below), then the verdict."""

from __future__ import annotations

from airflow_provider_azbatch.preflight.report import PreflightReport, Status

_LABELS = {Status.OK: "ok", Status.FAILED: "FAILED", Status.WARNING: "warning", Status.UNKNOWN: "unknown"}
_INDENT = " " * 9


def render_text(report: PreflightReport, *, strict: bool = False) -> str:
    lines = [f"Preflight of connection '{report.conn_id}'"]
    if report.account_name:
        lines[0] += f": Batch account '{report.account_name}' at {report.account_url}"
    if report.identity is not None:
        lines.append(f"Identity: {report.identity.description}")
    lines.append("")
    for finding in report.findings:
        lines.append(f"{_LABELS[finding.status]:<8} {finding.check}: {finding.detail}")
        if finding.fix:
            lines.append(f"{_INDENT}fix: {finding.fix}")
    lines.append("")
    counts = ", ".join(f"{report.count(status)} {label}" for status, label in _SUMMARY if report.count(status))
    code = report.exit_code(strict=strict)
    verdict = "Ready" if code == 0 else "Not ready"
    lines.append(f"{verdict}: {counts} (exit {code})")
    return "\n".join(lines)


_SUMMARY = ((Status.OK, "ok"), (Status.FAILED, "failed"), (Status.WARNING, "warning"), (Status.UNKNOWN, "unknown"))
