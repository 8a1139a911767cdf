"""Prepare one shard of the training data: numbered samples of y = 3x + 2 with noise, as CSV."""

import argparse
import random
from pathlib import Path

parser = argparse.ArgumentParser()
parser.add_argument("--shard", type=int, required=True)
parser.add_argument("--shards", type=int, required=True)
parser.add_argument("--out", default="shards")
args = parser.parse_args()

rng = random.Random(args.shard)
out = Path(args.out)
out.mkdir(parents=True, exist_ok=True)
rows = []
for i in range(args.shard, 2000, args.shards):
    x = i / 100
    rows.append(f"{x:.2f},{3 * x + 2 + rng.gauss(0, 0.1):.4f}")
(out / f"shard-{args.shard}.csv").write_text("x,y\n" + "\n".join(rows) + "\n")
print(f"shard {args.shard}/{args.shards}: wrote {len(rows)} samples")
