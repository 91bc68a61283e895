"""The train command in a subprocess on a tiny slice of the real data: shared by the reliability
and run-directory tests (64 training images, 32 dev images, N = 16)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TINY = ["--max-train-images", "64", "--max-dev-images", "32", "--embedding-dim", "16", "--all-captions",
        "--batch-size", "32", "--steps-per-execution", "2", "--no-evaluate", "--verbose", "0"]


def env_for_subprocess(**extra) -> dict:
    """This process's environment with the checkout first on ``PYTHONPATH``, TensorFlow quiet and
    on the CPU, and ``extra`` on top."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env["CUDA_VISIBLE_DEVICES"] = ""
    env.update(extra)
    return env


def train_cli(args, data_dir, timeout=600, **env) -> subprocess.CompletedProcess:
    """``python -m grounded_text.train --data-dir DATA_DIR ARGS`` (output captured, text)."""
    return subprocess.run([sys.executable, "-m", "grounded_text.train", "--data-dir", str(data_dir), *args],
                          cwd=REPO, env=env_for_subprocess(**env), capture_output=True, text=True, timeout=timeout)
