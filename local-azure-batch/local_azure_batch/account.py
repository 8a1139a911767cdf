"""The well-known development account of the local Batch service.

Like Azurite's ``devstoreaccount1``, the name and key are public on purpose: they only ever
unlock a service bound to your own machine.
"""

from __future__ import annotations

DEV_ACCOUNT_NAME = "devbatchaccount1"
DEV_ACCOUNT_KEY = "PwGEBL0d3U4tOFqNxbClcM3aCjHlCigQnldxst2PzkzIrpq+JrD7ybKIH6CrOrLEBQmUZ6w7sfvqLN1Nk+a5qg=="

# Identity of the built-in token authority (used with ``--tls``): one tenant, two service principals.
# The subscription the development account lives in: subnets and public IPs of pools must be in it.
DEV_SUBSCRIPTION_ID = "00000000-0000-0000-0000-00000000ba7c"
DEV_TENANT_ID = "00000000-0000-0000-0000-0000000000ba"
DEV_CLIENT_ID = "00000000-0000-0000-0000-00000000c11e"
DEV_CLIENT_SECRET = "local-batch-service-dev-secret"
# Its object id in the tenant. It holds Azure Batch Data Contributor on the account and Reader on the subscription.
DEV_OBJECT_ID = "00000000-0000-0000-0000-0000000000b1"
# A second principal of the tenant, with no role at all: its tokens are valid, Batch and ARM refuse them (403).
DEV_NO_ROLE_CLIENT_ID = "00000000-0000-0000-0000-00000000c120"
DEV_NO_ROLE_CLIENT_SECRET = "local-batch-service-no-role-secret"
DEV_NO_ROLE_OBJECT_ID = "00000000-0000-0000-0000-0000000000b2"
# Where the management plane (``--tls``) says the account is.
DEV_RESOURCE_GROUP = "local-batch"
DEV_LOCATION = "westeurope"
