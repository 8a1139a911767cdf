import traceback
import pytest
runner_api = pytest.importorskip("torchx.runner")
from torchx.components.utils import echo
from tests.helpers import wait_until

@pytest.mark.azurite
def test_debug(azbatch_with_storage, batch_client):
    with runner_api.get_runner() as runner:
        handle = runner.run(echo(msg="hello", image="alpine:latest"), "azure_batch", cfg={}, workspace=None)
        job_id = handle.rsplit(":", 1)[1]
        wait_until(lambda: batch_client.get_job(job_id).state == "completed", timeout=120, what="the app")
        print(runner.status(handle))
        try:
            print(list(runner.log_lines(handle, "echo", 0)))
        except Exception:
            traceback.print_exc()
            raise
