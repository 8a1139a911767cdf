"""Watching a Batch job: what to read next, what it means, and when the job is over.

``core.JobWatcher`` decides (no I/O); ``drivers`` run its steps against a sync or an async hook.
"""
