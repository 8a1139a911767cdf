"""The GPU tutorial's cheaper variant of its training step (docs/tutorials/gpu-training.md): the role's resources
changed to one T4 GPU per node. tests/docs/test_gpu_tutorial.py checks the VM size, price and quota the page states
for it and for the example's own A100 resources."""

from __future__ import annotations

from torchx import specs

# [START tutorial_training_t4]
resource = specs.Resource(cpu=1, gpu=1, memMB=16 * 1024, capabilities={"gpu_kind": "T4"})
# [END tutorial_training_t4]
