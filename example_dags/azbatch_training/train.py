"""Fit y = w*x + b on every shard found under --data (gradient descent), and save the model.

On a multi-node task this is the primary's command: the launcher line shows where a torchrun/MPI
job would rendezvous (AZ_BATCH_MASTER_NODE) and which hosts it would span (AZ_BATCH_HOST_LIST).
"""

import argparse
import json
import os
from pathlib import Path

parser = argparse.ArgumentParser()
parser.add_argument("--data", default="data")
parser.add_argument("--model-dir", default="model")
parser.add_argument("--epochs", type=int, default=20)
args = parser.parse_args()

hosts = os.environ.get("AZ_BATCH_HOST_LIST", "localhost").split(",")
master = os.environ.get("AZ_BATCH_MASTER_NODE", "localhost:29500")
print(f"launch: torchrun --nnodes={len(hosts)} --rdzv_endpoint={master} (hosts {','.join(hosts)})", flush=True)

samples = []
for path in sorted(Path(args.data).rglob("*.csv")):
    for line in path.read_text().splitlines()[1:]:
        x, y = line.split(",")
        samples.append((float(x), float(y)))
print(f"training on {len(samples)} samples", flush=True)

w = b = 0.0
rate = 0.01
for epoch in range(1, args.epochs + 1):
    grad_w = grad_b = loss = 0.0
    for x, y in samples:
        error = w * x + b - y
        grad_w += error * x
        grad_b += error
        loss += error * error
    w -= rate * grad_w / len(samples)
    b -= rate * grad_b / len(samples)
    print(f"epoch {epoch}/{args.epochs} loss {loss / len(samples):.4f}", flush=True)

model_dir = Path(args.model_dir)
model_dir.mkdir(parents=True, exist_ok=True)
(model_dir / "model.json").write_text(json.dumps({"w": w, "b": b, "samples": len(samples), "nodes": len(hosts)}))
print(f"saved model w={w:.3f} b={b:.3f}", flush=True)
