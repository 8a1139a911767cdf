from __future__ import annotations

import subprocess
import sys


def test_compute_layer_imports_no_airflow_azure_or_network_libraries() -> None:
    # A fresh interpreter, so modules other tests imported cannot hide an import made by the package.
    code = (
        "import sys, airflow_provider_azbatch.compute as c\n"
        "c.pool_spec_from_requirements(c.ResourceRequirements(gpus=1), max_nodes=2).to_rest()\n"
        "roots = {name.split('.')[0] for name in sys.modules}\n"
        "print(sorted(roots & {'airflow', 'azure', 'aiohttp', 'requests', 'urllib3', 'http', 'socket'}))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    assert result.stdout == "[]\n"
