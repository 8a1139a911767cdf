"""A minimal management plane (Azure Resource Manager, ``Microsoft.Batch``) next to the Batch data plane.

Served with ``--tls`` (ARM takes bearer tokens only, and tokens need https), on the service's own host::

    GET /subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Batch/batchAccounts/{account}
    GET /subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Batch/batchAccounts
    GET /subscriptions/{sub}/providers/Microsoft.Batch/batchAccounts
    GET /subscriptions/{sub}/providers/Microsoft.Batch/locations/{location}/virtualMachineSkus

the Batch account (its region, pool allocation mode and quotas, per VM family too), the accounts a caller can
read, and the VM sizes Batch offers in the account's region with their quota family. That is what a client
needs to say whether a pool fits the account before creating it (``airflow azbatch check``); nothing here
changes anything, and no other resource provider is modelled.
"""
