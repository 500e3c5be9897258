"""Run the model once on an input of ones and report its first output and the files in the model's folder as this
script sees them (inside a container: what the backend mounted). Usage: model_folder.py MODEL."""

import json
import os
import sys

import numpy as np
import onnxruntime as ort

model = sys.argv[1]
first = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, {"x": np.ones((1, 4), np.float32)})
with open(os.environ["HARNESS_METRICS"], "a") as out:
    out.write(json.dumps({"y0": float(first[0][0][0]), "files": ",".join(sorted(os.listdir(os.path.dirname(model))))})
              + "\n")
