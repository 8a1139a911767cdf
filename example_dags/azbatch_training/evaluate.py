"""Evaluate a saved model on fresh points of y = 3x + 2 (the evaluation step imports it from workspace/)."""

import json
from pathlib import Path


def evaluate(models_dir: str = "models") -> dict:
    """The model's mean absolute error on points it was not trained on, and what it is."""
    model_path = next(Path(models_dir).rglob("model.json"))
    model = json.loads(model_path.read_text())
    points = [x / 10 for x in range(0, 200, 7)]
    mae = sum(abs(model["w"] * x + model["b"] - (3 * x + 2)) for x in points) / len(points)
    print(f"model from {model['nodes']} nodes, {model['samples']} samples: w={model['w']:.3f} b={model['b']:.3f}")
    print(f"mean absolute error {mae:.4f}")
    return {"mae": round(mae, 4), "w": model["w"], "b": model["b"], "nodes": model["nodes"]}
