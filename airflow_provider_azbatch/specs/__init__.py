"""What a user declares: tasks, identities, inputs and outputs, containers, exit conditions, overrides and
workspaces, as plain values checked when they are made. No I/O: submission and pools build requests from them."""
