"""Where ``TextEncoder.encode(device=...)`` runs: a device name as sentence-transformers users
write it ("cpu", "gpu:1", "cuda"), turned into a TensorFlow device scope, or refused in one line."""

from __future__ import annotations

import contextlib
import re

import tensorflow as tf

#: ``encode``'s device forms: cpu, gpu, gpu:N, cuda, cuda:N (with an optional "/device:" prefix).
DEVICE = re.compile(r"(?:/(?:device:)?)?(cpu|gpu|cuda)(?::(\d+))?", re.IGNORECASE)


def device_scope(device):
    """A context placing the computation on ``device`` (``encode``'s forms), or a no-op for None.

    Raises:
      ValueError: a form not listed in ``encode``, or a GPU index this machine does not have
        (TensorFlow would otherwise fall back to the CPU without a word).
    """
    if device is None:
        return contextlib.nullcontext()
    match = DEVICE.fullmatch(str(device).strip())
    if match is None:
        raise ValueError(f"encode: unknown device {str(device)!r}; expected 'cpu', 'gpu', 'gpu:N', 'cuda' or "
                         "'cuda:N'.")
    kind = "CPU" if match.group(1).lower() == "cpu" else "GPU"
    index = int(match.group(2) or 0)
    found = len(tf.config.list_logical_devices(kind))
    if index >= found:
        raise ValueError(f"encode: device {str(device)!r} asks for {kind} {index}, but TensorFlow sees "
                         f"{found} {kind}{'' if found == 1 else 's'} here.")
    return tf.device(f"/{kind}:{index}")
