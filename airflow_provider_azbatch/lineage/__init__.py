"""What a run read and wrote: OpenLineage facets, asset events of outputs, the hook lineage collector, and the
OpenLineage parent run handed to the Batch tasks.

The operators only delegate here. Nothing of the OpenLineage provider is imported unless it is installed (and then
only by its own calls, or to read the parent run when it is enabled): :mod:`.openlineage` is imported by the
operators' ``get_openlineage_facets_*`` methods alone, which only that provider calls.
"""
