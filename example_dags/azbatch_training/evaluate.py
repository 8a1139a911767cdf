"""Evaluate a saved model on fresh points of y = 3x + 2."""

import argparse
import json
from pathlib import Path

parser = argparse.ArgumentParser()
parser.add_argument("--models", default="models")
args = parser.parse_args()

model_path = next(Path(args.models).rglob("model.json"))
model = json.loads(model_path.read_text())
points = [x / 10 for x in range(0, 200, 7)]
mae = sum(abs(model["w"] * x + model["b"] - (3 * x + 2)) for x in points) / len(points)
print(f"model from {model['nodes']} nodes, {model['samples']} samples: w={model['w']:.3f} b={model['b']:.3f}")
print(f"mean absolute error {mae:.4f}")
