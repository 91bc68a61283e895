"""Benchmark phases of ``python -m grounded_text.benchmark``, each run in a fresh process.

Each phase runs in a fresh Python process (``python -m grounded_text.benchmarks.throughput
PHASE JSON_ARGS``) so its peak resident memory (``ru_maxrss``) is its own; it prints one
JSON line with its results. Phases:

* ``fit``: training pairs/s through the real ``fit`` path (``grounded_text.training.trainer.
  prepare_training``: the same data, vocabulary, model and compile as ``train.py``);
  one fit call of ``repeats`` epochs (each timed by a callback), after a warm-up epoch.
  Then the same model's bare compiled train step (``train_model.train_step`` in a
  ``tf.function``) on the same batches already in memory as tensors (strings and
  features), so the ratio fit / bare is the input pipeline's efficiency. Optionally
  exports the trained text tower (for the ``encode`` phase).
* ``encode``: sentences/s of an exported hub module (``tf.saved_model.load``) at
  several batch sizes on a fixed sentence list; each repeat encodes consecutive
  batches until ``min_seconds`` have passed (at least one batch).
* ``char_speed``: the character model (``char_gru_attention``, Merkx & Frank 2019) at
  one size (``units`` per direction) with or without length-bucketed batches
  (``DataConfig.bucket_by_length``): the model built through ``prepare_training``, the
  first ``warmup + steps`` batches of the real train pipeline, the compiled train step
  timed over the last ``steps``; the padding of those batches as the model's own
  character preprocessor pads them, and the GRU layers' cuDNN eligibility
  (``grounded_text.benchmarks.cudnn``).
* ``textvectorization``: the fallback reference encoder (``keras.layers.
  TextVectorization`` + mean of a 384-d embedding, in a ``tf.function``), used when
  no reference preset is given.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the ops of the exported module)

from grounded_text.benchmarks.cudnn import mask_statistics, padding_report, rnn_cudnn_report
from grounded_text.config.schema import DataConfig, ExperimentConfig, ModelConfig, TextConfig, TrainConfig
from grounded_text.data.pairs import CAPTION_KEY, FEATURES_KEY, IMAGE_ID_KEY
from grounded_text.layers.bow_encoder import layer_chain
from grounded_text.layers.char_encoder import CharacterPreprocessor
from grounded_text.layers.text_preprocessor import TextPreprocessor, tokenize, tokenize_reference
from grounded_text.serving.export import export_text_tower
from grounded_text.training.preparation import compile_for_training, prepare_training


def rss_mib() -> float:
    """Peak resident set size of this process so far (``VmHWM``), MiB.

    Not ``getrusage(RUSAGE_SELF).ru_maxrss`` where ``/proc`` is readable: on Linux
    that keeps the high-water mark of the process image from before ``exec``, so a
    phase subprocess could report its parent's peak. Elsewhere ``ru_maxrss`` (KiB
    on Linux)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def summary(values) -> dict:
    """Median, min, max, IQR (25th–75th percentile) and the raw values."""
    v = np.asarray(values, dtype=np.float64)
    q1, med, q3 = np.percentile(v, [25, 50, 75])
    return {"median": float(med), "min": float(v.min()), "max": float(v.max()), "q1": float(q1), "q3": float(q3),
            "n": int(v.size), "values": [float(x) for x in v]}


class GpuSampler:
    """Samples ``nvidia-smi --query-gpu=utilization.gpu`` every ``interval`` s in a thread
    (no-op where there is no ``nvidia-smi``); ``stop()`` → {"mean", "max", "samples"} or None."""

    def __init__(self, interval: float = 0.5):
        self.interval = interval
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = None
        if shutil.which("nvidia-smi"):
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            try:
                out = subprocess.run(["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"],
                                     capture_output=True, text=True, timeout=5).stdout
                vals = [float(x) for x in out.split() if x.strip().replace(".", "", 1).isdigit()]
                if vals:
                    self.samples.append(max(vals))
            except (OSError, subprocess.SubprocessError, ValueError):
                pass
            self._stop.wait(self.interval)

    def stop(self):
        self._stop.set()
        if self._thread is None:
            return None
        self._thread.join(timeout=10)
        if not self.samples:
            return None
        return {"mean_percent": float(np.mean(self.samples)), "max_percent": float(np.max(self.samples)),
                "samples": len(self.samples)}


def machine_info() -> dict:
    """CPU count, load, Python/TF/Keras versions, accelerator names."""
    gpus = tf.config.list_physical_devices("GPU")
    names = []
    for g in gpus:
        try:
            names.append(tf.config.experimental.get_device_details(g).get("device_name", g.name))
        except (ValueError, RuntimeError):
            names.append(g.name)
    cpu_model = ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return {"cpu_count": os.cpu_count(), "cpu_affinity": affinity, "cpu_model": cpu_model,
            "platform": platform.platform(), "python": platform.python_version(),
            "tensorflow": tf.__version__, "keras": keras.__version__,
            "device": names[0] if names else f"CPU ({cpu_model or platform.processor()})", "gpus": names,
            "loadavg_1_5_15": list(os.getloadavg())}


def _fit_config(a: dict):
    """The ``ExperimentConfig`` of a ``fit`` phase from its JSON arguments."""
    per_execution = {"steps_per_execution": a["steps_per_execution"]} if a.get("steps_per_execution") else {}
    return ExperimentConfig(
        data=DataConfig(batch_size=a["batch_size"], max_train_images=a.get("max_train_images"), max_dev_images=1),
        model=ModelConfig(name=a["model"], **({"encoder": a["encoder"]} if a.get("encoder") else {})),
        train=TrainConfig(select_on="val_loss", mixed_precision=a.get("mixed_precision"),
                          strategy=a.get("strategy", "default"), **per_execution),
    )


def _bare_step(setup, model):
    """``(step_fn, batches)``: the model's compiled train step (under the run's strategy) and
    one epoch of the pipeline's batches in memory, as eager tensors (distributed per replica
    when there are several); the step is traced once here."""
    batches = list(setup.train_ds)
    if setup.strategy.num_replicas_in_sync > 1:
        step_fn = tf.function(lambda b: setup.strategy.run(model.train_step, args=(b,)))
        batches = [next(iter(setup.strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensors(b))))
                   for b in batches]
    else:
        step_fn = tf.function(model.train_step)
    step_fn(batches[0])
    return step_fn, batches


def _epoch_timer(seconds: list, after_epoch=None):
    """A Keras callback that appends each epoch's seconds (``on_epoch_begin`` to
    ``on_epoch_end``) to ``seconds``, then calls ``after_epoch()`` outside the timing."""
    class EpochTimer(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.t0 = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            seconds.append(time.perf_counter() - self.t0)
            if after_epoch is not None:
                after_epoch()

    return EpochTimer()


def _timed_fit_and_bare_steps(model, train_ds, step_fn, batches, repeats: int) -> tuple[list, list]:
    """One ``fit`` call of ``repeats`` epochs, as train.py runs it, each epoch timed; after
    each epoch (outside its timing) one pass of the bare compiled train step over the same
    batches in memory, so both see the same machine load.

    Returns:
      ``(epoch_seconds, bare_seconds)``, ``repeats`` each.
    """
    epoch_seconds, bare_seconds = [], []

    def bare_pass():
        t0 = time.perf_counter()
        for b in batches:
            logs = step_fn(b)
        _ = float(np.asarray(keras.ops.convert_to_numpy(next(iter(logs.values())))).ravel()[0])  # sync
        bare_seconds.append(time.perf_counter() - t0)

    model.fit(train_ds, epochs=repeats, verbose=0, callbacks=[_epoch_timer(epoch_seconds, bare_pass)])
    return epoch_seconds, bare_seconds


def _tokenize_in_pipeline_timing(setup, repeats: int, pairs_per_epoch: int) -> dict:
    """Epoch times of ``tokenize_in_pipeline_variant`` (tokenisation inside tf.data, same
    weights), after a warm-up epoch; ``{"skipped": why}`` for a tower it does not apply to."""
    built = tokenize_in_pipeline_variant(setup)
    if built is None:
        return {"skipped": "the text tower is not a preprocessor → layers chain"}
    ids_model, ids_ds = built
    ids_model.fit(ids_ds, epochs=1, verbose=0)  # warm-up
    secs = []
    ids_model.fit(ids_ds, epochs=repeats, verbose=0, callbacks=[_epoch_timer(secs)])
    return {"epoch_seconds": summary(secs), "fit_pairs_per_second": summary([pairs_per_epoch / x for x in secs]),
            "note": "measured after the in-model repeats (not interleaved)"}


def _fit_phase(a: dict) -> dict:
    rss0 = rss_mib()
    cfg = _fit_config(a)
    t0 = time.perf_counter()
    setup = prepare_training(cfg, a.get("data_dir"))
    build_seconds = time.perf_counter() - t0
    model, steps, batch = setup.model.train_model, setup.steps_per_epoch, cfg.data.batch_size
    pairs_per_epoch = steps * batch
    gpu = GpuSampler()

    # Warm-up (tracing, table initialisation, shuffle buffer) of both paths, excluded.
    t0 = time.perf_counter()
    model.fit(setup.train_ds, epochs=1, verbose=0)
    warmup = time.perf_counter() - t0
    step_fn, batches = _bare_step(setup, model)
    epoch_seconds, bare_seconds = _timed_fit_and_bare_steps(model, setup.train_ds, step_fn, batches, a["repeats"])
    rss_fit = rss_mib()
    # Optional: tokenisation inside tf.data instead of inside the model (same weights).
    variant = (_tokenize_in_pipeline_timing(setup, a["repeats"], pairs_per_epoch) if a.get("tokenize_in_pipeline")
               else None)
    gpu_util = gpu.stop()

    fit_rate = summary([pairs_per_epoch / s for s in epoch_seconds])
    bare_rate = summary([len(batches) * batch / s for s in bare_seconds])
    result = {
        "model": a["model"], "precision": setup.precision, "strategy": cfg.train.strategy,
        "replicas": setup.strategy.num_replicas_in_sync, "batch_size": batch,
        "steps_per_execution": cfg.train.steps_per_execution,
        "train_pairs": len(setup.train_pairs), "pairs_per_epoch": pairs_per_epoch, "steps_per_epoch": steps,
        "setup_seconds": build_seconds, "warmup_epoch_seconds": warmup,
        "epoch_seconds": summary(epoch_seconds), "fit_pairs_per_second": fit_rate,
        "bare_step_pairs_per_second": bare_rate,
        "input_pipeline_efficiency": fit_rate["median"] / bare_rate["median"],
        "input_pipeline_efficiency_per_repeat": summary([b / f for f, b in zip(epoch_seconds, bare_seconds)]),
        "rss_mib": {"after_imports": rss0, "peak_after_timing": rss_fit, "peak": rss_mib()},
        "gpu_utilization": gpu_util,
        "tokenize_in_pipeline": variant,
    }
    if a.get("export_dir"):
        export_text_tower(setup.model.text_tower, a["export_dir"], cfg.to_dict())
        result["export_dir"] = a["export_dir"]
    return result


def tokenize_in_pipeline_variant(setup):
    """The alternative input pipeline: tokenisation + vocabulary lookup as a parallel
    ``tf.data`` map (``num_parallel_calls=AUTOTUNE``) and a training model on token ids
    that shares every weight with ``setup.model`` (the text tower minus its
    ``TextPreprocessor``). Only for towers that are a chain string → preprocessor →
    layers; returns ``(train_model, dataset)`` or ``None``.
    """
    layers = layer_chain(setup.model.text_tower)
    if not layers or not isinstance(layers[0], TextPreprocessor):
        return None
    pre = layers[0]
    ids = keras.Input(shape=(None,), dtype="int64", name=CAPTION_KEY)
    x = ids
    for layer in layers[1:]:
        x = layer(x)
    train = setup.model.train_model
    loss_layer = train.layers[-1]
    features = keras.Input(shape=setup.model.image_tower.input_shape[1:], dtype="float32", name=FEATURES_KEY)
    image_id = keras.Input(shape=(), dtype="int64", name=IMAGE_ID_KEY)
    loss = loss_layer(x, setup.model.image_tower(features), image_ids=image_id)
    ids_model = keras.Model({CAPTION_KEY: ids, FEATURES_KEY: features, IMAGE_ID_KEY: image_id}, loss)
    compile_for_training(ids_model, setup.config.train, setup.steps_per_epoch)
    ds = setup.train_ds.map(lambda d: {**d, CAPTION_KEY: pre(d[CAPTION_KEY])},
                            num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)
    return ids_model, ds


def _encode_loop(encode, sentences, batch_sizes, repeats, min_seconds) -> dict:
    out = {}
    n = len(sentences)
    for bs in batch_sizes:
        def batch_at(i):
            idx = [(i * bs + j) % n for j in range(bs)]
            return [sentences[k] for k in idx]

        encode(batch_at(0))  # warm-up
        rates, cursor = [], 1
        for _ in range(repeats):
            done, t0 = 0, time.perf_counter()
            while True:
                encode(batch_at(cursor))
                cursor += 1
                done += bs
                elapsed = time.perf_counter() - t0
                if elapsed >= min_seconds:
                    break
            rates.append(done / elapsed)
        out[str(bs)] = summary(rates)
    return out


def _side_by_side_loop(encoders: dict, sentences, batch_sizes, repeats, min_seconds) -> dict:
    """``_encode_loop`` for several encoders in one process, interleaved call by call: each
    batch goes through every encoder in turn (the order rotating from batch to batch), and
    each encoder's calls are timed on their own, so all see the same machine load even
    when it swings within a second. A repeat runs until every encoder has spent at least
    ``min_seconds``. Returns ``{name: {batch size: summary of sentences/s}}`` and
    ``{batch size: summary of the per-repeat ratio of the first encoder to each other}``."""
    names = list(encoders)
    out = {name: {} for name in names}
    ratios = {name: {} for name in names[1:]}
    n = len(sentences)
    for bs in batch_sizes:
        batches = [[sentences[(i * bs + j) % n] for j in range(bs)] for i in range(max(1, min(64, -(-n // bs))))]
        for encode in encoders.values():
            encode(batches[0])  # warm-up
        rates = {name: [] for name in names}
        for _ in range(repeats):
            spent, done, cursor = dict.fromkeys(names, 0.0), 0, 0
            while min(spent.values()) < min_seconds:
                batch = batches[cursor % len(batches)]
                for k in range(len(names)):
                    name = names[(cursor + k) % len(names)]
                    t0 = time.perf_counter()
                    encoders[name](batch)
                    spent[name] += time.perf_counter() - t0
                cursor += 1
                done += bs
            for name in names:
                rates[name].append(done / spent[name])
        for name in names:
            out[name][str(bs)] = summary(rates[name])
        for name in names[1:]:
            ratios[name][str(bs)] = summary([a / b for a, b in zip(rates[names[0]], rates[name])])
    return out, ratios


def _encode_phase(a: dict) -> dict:
    rss0 = rss_mib()
    sentences = json.loads(open(a["sentences_file"]).read())
    module = tf.saved_model.load(a["export_dir"])

    def encode(batch):
        return module(tf.constant(batch)).numpy()

    dim = int(encode(sentences[:2]).shape[-1])
    gpu = GpuSampler()
    result = {"export_dir": a["export_dir"], "embedding_dim": dim, "sentences": len(sentences),
              "concrete_functions": len(getattr(module.__call__, "concrete_functions", []))}
    if a.get("tokenizer_floor"):
        config_file = Path(a["export_dir"]) / "assets" / "config.json"
        config = json.loads(config_file.read_text()) if config_file.is_file() else {}
        lowercase = bool((config.get("text") or {}).get("lowercase", True))
        spec = tf.TensorSpec([None], tf.string)

        def ragged_parts(fn):
            f = tf.function(lambda x: (lambda t: (t.flat_values, t.row_splits))(fn(x, lowercase)),
                            input_signature=[spec])
            return lambda batch: f(tf.constant(batch))[1].numpy()  # the int64 row splits to NumPy

        encoders = {"export": encode, "tokenizer": ragged_parts(tokenize_reference),
                    "tokenizer_ascii_shortcut": ragged_parts(tokenize)}
        if a.get("compare_dir"):  # another export (e.g. the same weights exported by older code)
            other = tf.saved_model.load(a["compare_dir"])
            encoders["compare"] = lambda batch: other(tf.constant(batch)).numpy()
            encoders["compare"](sentences[:2])
        rates, ratios = _side_by_side_loop(encoders, sentences, a["batch_sizes"], a["repeats"], a["min_seconds"])
        if a.get("compare_dir"):
            other, floor = rates["compare"], rates["tokenizer"]
            result["compare"] = {
                "export_dir": a["compare_dir"], "sentences_per_second": other,
                "compare_over_tokenizer": {bs: other[bs]["median"] / floor[bs]["median"] for bs in other},
                "compare_over_tokenizer_per_repeat": {  # repeat by repeat ("values" are in repeat order)
                    bs: summary([c / t for c, t in zip(other[bs]["values"], floor[bs]["values"])]) for bs in other},
                "export_over_compare_per_repeat": ratios["compare"]}
        result.update(sentences_per_second=rates["export"], tokenizer_sentences_per_second=rates["tokenizer"],
                      tokenizer_ascii_shortcut_sentences_per_second=rates["tokenizer_ascii_shortcut"],
                      tokenizer_lowercase=lowercase,
                      export_over_tokenizer={bs: rates["export"][bs]["median"] / rates["tokenizer"][bs]["median"]
                                             for bs in rates["export"]},
                      export_over_tokenizer_per_repeat=ratios["tokenizer"],
                      timing="interleaved call by call (export, tokeniser, ASCII-shortcut tokeniser"
                             + (", compared export" if a.get("compare_dir") else "")
                             + " in rotating order on each batch); each repeat until every encoder has spent "
                             "min_seconds")
    else:
        result["sentences_per_second"] = _encode_loop(encode, sentences, a["batch_sizes"], a["repeats"],
                                                      a["min_seconds"])
    result.update(rss_mib={"after_imports": rss0, "peak": rss_mib()}, gpu_utilization=gpu.stop())
    return result


def _textvectorization_phase(a: dict) -> dict:
    rss0 = rss_mib()
    sentences = json.loads(open(a["sentences_file"]).read())
    vectorizer = keras.layers.TextVectorization(max_tokens=30000, output_mode="int")
    vectorizer.adapt(tf.constant(sentences))
    embedding = keras.layers.Embedding(vectorizer.vocabulary_size(), 384, mask_zero=True)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def encode_tf(x):
        ids = vectorizer(x)
        e = embedding(ids)
        mask = tf.cast(ids > 0, e.dtype)[..., None]
        return tf.math.l2_normalize(tf.reduce_sum(e * mask, 1) / tf.maximum(tf.reduce_sum(mask, 1), 1.0), -1)

    def encode(batch):
        return encode_tf(tf.constant(batch)).numpy()

    rates = _encode_loop(encode, sentences, a["batch_sizes"], a["repeats"], a["min_seconds"])
    return {"encoder": "keras.layers.TextVectorization + mean of 384-d embeddings (tf.function)",
            "embedding_dim": 384, "sentences": len(sentences), "sentences_per_second": rates,
            "rss_mib": {"after_imports": rss0, "peak": rss_mib()}}


def _char_speed_phase(a: dict) -> dict:
    units, steps, warmup = int(a["units"]), int(a["steps"]), int(a.get("warmup", 3))
    rss0 = rss_mib()
    # The paper's configuration as train.py builds it: N = 2 × units, case and
    # punctuation kept (§3.2.1); the preset's loss and schedule come from resolve_config.
    cfg = ExperimentConfig(
        data=DataConfig(batch_size=a["batch_size"], bucket_by_length=bool(a["bucket_by_length"]), max_dev_images=1),
        model=ModelConfig(name="char_gru_attention", embedding_dim=2 * units, encoder={"units": units}),
        text=TextConfig(lowercase=False),
    )
    t0 = time.perf_counter()
    setup = prepare_training(cfg, a.get("data_dir"))
    setup_seconds = time.perf_counter() - t0
    model = setup.model.train_model
    pre = next(layer for layer in setup.model.text_tower.layers if isinstance(layer, CharacterPreprocessor))
    if warmup + steps > setup.steps_per_epoch:
        raise ValueError(f"warmup + steps = {warmup + steps} > {setup.steps_per_epoch} batches in an epoch.")
    # The first batches of the first epoch, in memory, so the timing is the train step alone.
    batches = list(setup.train_ds.take(warmup + steps))
    measured = batches[warmup:]
    stats = [mask_statistics(pre(b[CAPTION_KEY]).numpy()) for b in measured]
    # The step fit compiles (Keras' one_step_on_data: train_step in a tf.function, with
    # the model's resolved jit_compile), called once per batch; the loss is read back
    # after every step so each step's time is its own.
    step_fn = tf.function(model.train_step, jit_compile=bool(model.jit_compile))

    def run(b):
        logs = step_fn(b)
        return float(np.asarray(keras.ops.convert_to_numpy(next(iter(logs.values())))).ravel()[0])

    t0 = time.perf_counter()
    for b in batches[:warmup]:
        run(b)
    warmup_seconds = time.perf_counter() - t0
    load_before = list(os.getloadavg())
    step_seconds = []
    for b in measured:
        t0 = time.perf_counter()
        run(b)
        step_seconds.append(time.perf_counter() - t0)
    load_after = list(os.getloadavg())
    total = float(sum(step_seconds))
    captions = setup.train_pairs.captions.tolist()
    return {
        "model": "char_gru_attention", "units": units, "embedding_dim": 2 * units,
        "bucket_by_length": bool(a["bucket_by_length"]), "batch_size": cfg.data.batch_size,
        "steps": steps, "warmup_steps": warmup, "jit_compile": bool(model.jit_compile),
        "parameters": int(model.count_params()), "character_vocabulary": int(pre.vocabulary_size),
        "train_pairs": len(setup.train_pairs), "steps_per_epoch": setup.steps_per_epoch,
        "setup_seconds": setup_seconds, "warmup_seconds": warmup_seconds,
        "seconds": total, "pairs_per_second": steps * cfg.data.batch_size / total,
        "seconds_per_step": summary(step_seconds), "padded_length_per_step": [s["padded_length"] for s in stats],
        "padding": padding_report(stats),
        "empty_train_captions": sum(1 for c in captions if not c.strip()),
        "cudnn": rnn_cudnn_report(setup.model.text_tower),
        "gpus": [d.name for d in tf.config.list_physical_devices("GPU")],
        "loadavg_timing": {"before": load_before, "after": load_after},
        "rss_mib": {"after_imports": rss0, "peak": rss_mib()},
    }


PHASES = {"fit": _fit_phase, "encode": _encode_phase, "textvectorization": _textvectorization_phase,
          "char_speed": _char_speed_phase}


def run_phase_subprocess(phase: str, args: dict, timeout: float | None = None,
                         module: str = "grounded_text.benchmarks.throughput") -> dict:
    """Runs ``phase`` of ``module`` (this one, or ``grounded_text.benchmarks.floors``) in a fresh
    interpreter; returns its JSON result plus the load average before/after and the wall
    seconds of the whole subprocess.

    Raises:
      RuntimeError: the subprocess failed (its stderr tail is in the message).
    """
    load_before = list(os.getloadavg())
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", module, phase, json.dumps(args)],
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"benchmark phase {phase!r} failed:\n{proc.stderr[-4000:]}")
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    result = json.loads(lines[-1])
    result["process"] = {"wall_seconds": time.perf_counter() - t0, "loadavg_before": load_before,
                         "loadavg_after": list(os.getloadavg())}
    return result


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    phase, args = argv[0], json.loads(argv[1])
    if phase not in PHASES:
        raise SystemExit(f"unknown phase {phase!r}; choose one of {sorted(PHASES)}")
    print(json.dumps(PHASES[phase](args)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
