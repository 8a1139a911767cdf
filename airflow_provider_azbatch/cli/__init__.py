"""``airflow azbatch ...``: Batch jobs, their tasks' output and pools, from the command line.

Registered through the ``cli`` entry of the provider info (:mod:`.definition`); the command functions
import the hook, and with it the Batch SDK, only when a command runs.
"""
