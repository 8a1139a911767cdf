"""The edit docs/tutorials/first-job.md asks for in example_dags/example_azbatch_hello.py: shard 2 fails.

tests/docs/test_first_job.py makes this edit in a copy of the example and runs it, checking the failure the
tutorial describes.
"""

from __future__ import annotations

# The line of the example's `command_line` the edit goes after,
ANCHOR = """f'sleep 0.3; done; echo "shard {n}: done" >&2'"""
# and the line it adds (the tutorial shows it between the markers):
EDIT = """
                    # [START first_job_failure]
                    + ('; echo "shard 2: cannot read its input" >&2; exit 3' if n == 2 else "")
                    # [END first_job_failure]
"""
