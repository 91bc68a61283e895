"""Distribution strategies and mixed precision for the one trainer.

``make_strategy(name)`` gives the ``tf.distribute.Strategy`` that ``train.py`` builds
and compiles the model under (Keras 3 with the TensorFlow backend runs ``fit`` under
any ``tf.distribute`` strategy). The global batch is ``DataConfig.batch_size``: Keras
splits each batch across the replicas, and the in-batch losses gather the replicas'
embeddings back into the global batch (``grounded_text.losses.common.BatchLoss``), so a
step under a strategy computes the same loss over the same negatives as a single
device.

* ``default``: no distribution (one device).
* ``mirrored``: ``MirroredStrategy`` over the local GPUs (or the logical CPU devices).
* ``multi_worker``: ``MultiWorkerMirroredStrategy``; the cluster comes from the
  ``TF_CONFIG`` environment variable (see docs/performance.md), and it must be made
  before other TensorFlow work in the process.
* ``tpu``: ``TPUStrategy`` via ``TPUClusterResolver`` (Colab/Cloud TPU).

Mixed precision (``resolve_mixed_precision``): Micikevicius et al. (2018), as in the
Keras mixed-precision guide: ``mixed_float16`` (with dynamic loss scaling, which
Keras' ``compile`` adds) on GPUs, ``mixed_bfloat16`` on TPUs and CPUs with
AVX512-BF16 or AMX; the losses and every tower's output stay ``float32``.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import keras
import tensorflow as tf

from grounded_text.config.schema import STRATEGIES  # noqa: F401 (re-exported)
from grounded_text.utils.compat import in_multi_worker_mode

log = logging.getLogger("grounded_text.distribute")
PRECISIONS = (None, "float32", "mixed_float16", "mixed_bfloat16", "auto")


def make_strategy(name: str = "default") -> tf.distribute.Strategy:
    """The ``tf.distribute.Strategy`` called ``name``.

    Args:
      name: one of ``STRATEGIES``.

    Returns:
      The strategy (``tf.distribute.get_strategy()`` for ``"default"``).

    Raises:
      ValueError: unknown name; ``"multi_worker"`` with a ``TF_CONFIG`` that is not
        JSON or has no ``cluster``/``task``; ``"tpu"`` where no TPU is found.
    """
    if name not in STRATEGIES:
        raise ValueError(f"Unknown strategy {name!r}; choose one of {STRATEGIES}.")
    if name == "default":
        return tf.distribute.get_strategy()
    if name == "mirrored":
        gpus = tf.config.list_logical_devices("GPU")
        cpus = tf.config.list_logical_devices("CPU")
        devices = [d.name for d in gpus] if gpus else [d.name for d in cpus]
        return tf.distribute.MirroredStrategy(devices=devices)
    if name == "multi_worker":
        raw = os.environ.get("TF_CONFIG")
        if raw:
            try:
                tf_config = json.loads(raw)
            except json.JSONDecodeError as e:
                raise ValueError(f"TF_CONFIG is not valid JSON: {e}") from None
            if "cluster" not in tf_config or "task" not in tf_config:
                raise ValueError("TF_CONFIG needs 'cluster' and 'task' entries (see docs/performance.md).")
        else:
            log.warning("multi_worker strategy without TF_CONFIG: a single local worker.")
        return tf.distribute.MultiWorkerMirroredStrategy()
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver()
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
    except (ValueError, RuntimeError, tf.errors.OpError) as e:
        raise ValueError(f"strategy 'tpu': no TPU found ({type(e).__name__}: {e}).") from None
    return tf.distribute.TPUStrategy(resolver)


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    """True where this process should write checkpoints and exports.

    Single-process strategies: always. Multi-worker: the ``chief`` task, or worker 0
    when the cluster has no chief (the TF multi-worker guide's rule).
    """
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not in_multi_worker_mode(strategy):
        return True
    task_type, task_id = resolver.task_type, resolver.task_id
    return task_type is None or task_type == "chief" or (
        task_type == "worker" and task_id == 0 and "chief" not in resolver.cluster_spec().as_dict())


def shard_by_data(ds: tf.data.Dataset) -> tf.data.Dataset:
    """Sets the auto-shard policy to ``DATA`` (in-memory datasets have no files to shard)."""
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return ds.with_options(options)


def cpu_supports_bfloat16() -> bool:
    """True when ``/proc/cpuinfo`` lists AVX512-BF16 or AMX-BF16 (Linux only)."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def resolve_mixed_precision(name: str | None) -> str:
    """The Keras dtype policy name for ``TrainConfig.mixed_precision``.

    Args:
      name: ``None``/``"float32"`` (float32), ``"mixed_float16"``, ``"mixed_bfloat16"``
        or ``"auto"``: ``mixed_float16`` on GPU, ``mixed_bfloat16`` on TPU or a CPU
        with AVX512-BF16/AMX, else ``float32`` with a warning.

    Returns:
      ``"float32"``, ``"mixed_float16"`` or ``"mixed_bfloat16"``.

    Raises:
      ValueError: unknown name.
    """
    if name not in PRECISIONS:
        raise ValueError(f"Unknown mixed_precision {name!r}; choose one of {PRECISIONS}.")
    if name in (None, "float32"):
        return "float32"
    if name != "auto":
        if name == "mixed_float16" and not tf.config.list_physical_devices("GPU"):
            log.warning("mixed_float16 without a GPU: float16 math on CPU is emulated and slow.")
        return name
    if tf.config.list_physical_devices("GPU"):
        return "mixed_float16"
    if tf.config.list_logical_devices("TPU") or cpu_supports_bfloat16():
        return "mixed_bfloat16"
    log.warning("mixed_precision='auto': no GPU, TPU or bfloat16-capable CPU (AVX512-BF16/AMX) found; "
                "training in float32.")
    return "float32"


def apply_mixed_precision(name: str | None) -> str:
    """Sets the global Keras dtype policy (``resolve_mixed_precision``); returns its name."""
    policy = resolve_mixed_precision(name)
    keras.mixed_precision.set_global_policy(policy)
    return policy
