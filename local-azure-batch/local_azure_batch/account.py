"""The well-known development account of the local Batch service.

Like Azurite's ``devstoreaccount1``, the name and key are public on purpose: they only ever
unlock a service bound to your own machine.
"""

from __future__ import annotations

DEV_ACCOUNT_NAME = "devbatchaccount1"
DEV_ACCOUNT_KEY = "PwGEBL0d3U4tOFqNxbClcM3aCjHlCigQnldxst2PzkzIrpq+JrD7ybKIH6CrOrLEBQmUZ6w7sfvqLN1Nk+a5qg=="

# Identity of the built-in token authority (used with ``--tls``): one tenant, one service principal.
# The subscription the development account lives in: subnets and public IPs of pools must be in it.
DEV_SUBSCRIPTION_ID = "00000000-0000-0000-0000-00000000ba7c"
DEV_TENANT_ID = "00000000-0000-0000-0000-0000000000ba"
DEV_CLIENT_ID = "00000000-0000-0000-0000-00000000c11e"
DEV_CLIENT_SECRET = "local-batch-service-dev-secret"
