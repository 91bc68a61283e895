"""``python -m grounded_text.benchmark --floors``: each speed figure beside its floor, measured
in the same process (docs/performance.md, "Figures against their floors").

1. The machine's float32 GEMM rate (2048 × 2048 matmul through TensorFlow, GFLOP/s), and
   the character model's train step (``char_gru_attention``, batch 32, length-bucketed
   real Flickr8k captions) in *useful* GFLOP/s, as a fraction of it, for the fused GRU
   (the default) and Keras' own loop, interleaved batch by batch with the GEMM.

   Useful FLOPs count real characters only (no padding), a multiply-add as 2 FLOPs, and
   the backward pass as twice the forward (dX and dW products), so fwd + bwd = 3 × fwd.
   Per character (n units per direction, d-dimensional character embeddings, a
   attention units, N = 2n)::

       GRU, both directions:   2 · 2 · 3n(d + n)          (x W and h U, 3 gates)
       vector attention:       2 · N·a + 2 · a·N          (W: N → a, V: a → N)

   and per caption the image projection 2 · F·N (F = feature dimension) and the loss's
   similarity row 2 · B·N. Embedding look-ups, gate non-linearities, softmax and Adam
   are not counted. At n = 512, d = 20, a = 128: 3.79 MFLOP per character forward.
2. Feature extraction: photos/s of ``extract_features`` (the ``features`` command's
   pipeline) on real photos against the bare network's forward pass on already-decoded,
   already-resized tensors at the same batch size, and the time per photo of each stage
   alone, one after the other: reading, decoding, resizing, the network, writing.
3. The export (a ``vete_bow`` text tower, the benchmark's default model; untrained
   weights run at the trained model's speed) against its own tokeniser alone on the same
   sentences at batch 1, 32 and 1024, interleaved call by call
   (``throughput._encode_phase``).

Every figure carries the load average before and after; a figure measured while the
1-minute load exceeded the number of cores is marked ``provisional``.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from grounded_text.benchmarks.throughput import _encode_phase
from grounded_text.config.schema import DataConfig, ExperimentConfig, ModelConfig, TextConfig
from grounded_text.data.pairs import CAPTION_KEY
from grounded_text.layers.char_encoder import CharacterEncoder, CharacterPreprocessor
from grounded_text.serving.export import export_text_tower
from grounded_text.training.preparation import prepare_training
from grounded_text.vision import crops as crops_lib
from grounded_text.vision.extractor import extract_features, image_folder_dataset, list_image_files
from grounded_text.vision.networks import FeatureNetwork
from grounded_text.vision.sinks import NpzFeatureSink

GEMM_SIZE = 2048


def char_flops_per_character(units: int, char_dim: int = 20, attention_units: int = 128) -> float:
    """Forward FLOPs of one character through the bi-GRU and the vector attention."""
    gru = 2 * 2 * 3 * units * (char_dim + units)
    width = 2 * units
    attention = 2 * width * attention_units + 2 * attention_units * width
    return float(gru + attention)


def char_step_useful_flops(lengths, units: int, batch: int, feature_dim: int, char_dim: int = 20,
                           attention_units: int = 128) -> float:
    """Forward + backward FLOPs of one training step, counting real characters only
    (``lengths``: true length of each caption of the batch)."""
    chars = float(np.sum(lengths))
    per_caption = 2 * feature_dim * 2 * units + 2 * batch * 2 * units
    forward = chars * char_flops_per_character(units, char_dim, attention_units) + len(lengths) * per_caption
    return 3.0 * forward


def provisional(load_before, load_after, cores: int | None = None) -> bool:
    cores = cores or os.cpu_count() or 1
    return max(load_before[0], load_after[0]) > cores


def gemm(size: int = GEMM_SIZE, repeats: int = 3):
    """A timer of the float32 ``size``² matmul; returns a function giving GFLOP/s (best of
    ``repeats``)."""
    a = tf.random.stateless_normal([size, size], seed=[1, 2])
    mm = tf.function(lambda x: tf.matmul(x, x))
    mm(a).numpy()

    def rate():
        best = float("inf")
        for _ in range(repeats):
            t0 = time.perf_counter()
            mm(a).numpy()
            best = min(best, time.perf_counter() - t0)
        return 2.0 * size ** 3 / best / 1e9

    return rate


def _stamp(result: dict, before) -> dict:
    after = list(os.getloadavg())
    result["loadavg"] = {"before": list(before), "after": after}
    result["provisional"] = provisional(before, after)
    return result


def char_floor_phase(a: dict) -> dict:
    """The char model's train step, fused and plain, vs GEMM, in one process."""
    units, steps, warmup, batch = int(a["units"]), int(a["steps"]), int(a.get("warmup", 2)), int(a["batch_size"])
    cfg = ExperimentConfig(
        data=DataConfig(batch_size=batch, bucket_by_length=True, max_dev_images=1),
        model=ModelConfig(name="char_gru_attention", embedding_dim=2 * units, encoder={"units": units}),
        text=TextConfig(lowercase=False))
    setup = prepare_training(cfg, a.get("data_dir"))
    model = setup.model.train_model
    layers = setup.model.text_tower.layers
    pre = next(x for x in layers if isinstance(x, CharacterPreprocessor))
    enc = next(x for x in layers if isinstance(x, CharacterEncoder))
    feature_dim = int(setup.model.image_tower.input_shape[-1])
    batches = list(setup.train_ds.take(warmup + steps))
    lengths = [np.sum(pre(b[CAPTION_KEY]).numpy() > 0, axis=1) for b in batches]
    flops = [char_step_useful_flops(x, units, batch, feature_dim, enc.char_dim, enc.attention_units) for x in lengths]

    def variant(fused: bool):
        fn = tf.function(model.train_step)

        def run(b):
            enc.fused_rnn = fused
            logs = fn(b)
            return float(np.asarray(keras.ops.convert_to_numpy(next(iter(logs.values())))).ravel()[0])

        return run

    variants = {"fused": variant(True)}
    if a.get("plain", True):
        variants["keras_loop"] = variant(False)
    gemm_rate = gemm()
    for run in variants.values():
        for b in batches[:warmup]:
            run(b)
    before = list(os.getloadavg())
    seconds = {k: [] for k in variants}
    gemm_rates = []
    for i, b in enumerate(batches[warmup:], start=warmup):
        for k, run in variants.items():  # batch by batch, each variant on the same batch
            t0 = time.perf_counter()
            run(b)
            seconds[k].append(time.perf_counter() - t0)
        gemm_rates.append(gemm_rate())
    enc.fused_rnn = True
    useful = float(np.sum(flops[warmup:]))
    g = float(np.median(gemm_rates))
    out = {"units": units, "batch_size": batch, "steps": steps, "feature_dim": feature_dim,
           "mean_true_length": float(np.mean(np.concatenate(lengths[warmup:]))),
           "mean_padded_length": float(np.mean([len(x) and int(np.max(x)) for x in lengths[warmup:]])),
           "useful_gflop_per_step": useful / steps / 1e9,
           "gflop_per_caption": useful / steps / batch / 1e9,
           "gemm_gflops": {"median": g, "max": float(np.max(gemm_rates)), "n": len(gemm_rates)},
           "variants": {}}
    for k, s in seconds.items():
        total = float(np.sum(s))
        rate = useful / total / 1e9
        out["variants"][k] = {"captions_per_second": steps * batch / total,
                              "seconds_per_step_median": float(np.median(s)),
                              "useful_gflops": rate, "fraction_of_gemm": rate / g}
    if "keras_loop" in out["variants"]:
        out["fused_over_keras_loop"] = (out["variants"]["fused"]["captions_per_second"]
                                        / out["variants"]["keras_loop"]["captions_per_second"])
    return _stamp(out, before)


def features_floor_phase(a: dict) -> dict:
    """The features pipeline vs the bare network, and the split of its time by stage."""
    batch, limit, cnn = int(a["batch_size"]), int(a["images"]), a.get("cnn", "efficientnet_lite0")
    files = list_image_files(a["images_dir"])[:limit]
    ids = [i for i, _ in files]
    network = FeatureNetwork(cnn, weights=a.get("weights", "none"))
    size = network.input_size
    before = list(os.getloadavg())
    # Stages alone, serially, each over every photo (seconds per photo).
    t0 = time.perf_counter()
    encoded = [tf.io.read_file(str(p)) for _, p in files]
    read_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    decoded = [crops_lib.decode_rgb(e) for e in encoded]
    decode_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    views = [crops_lib.make_views(x, size, 1) for x in decoded]
    resize_s = time.perf_counter() - t0
    stacked = [tf.stack(views[i:i + batch]) for i in range(0, len(views), batch)]
    network(stacked[0]).numpy()  # warm-up (tracing)
    t0 = time.perf_counter()
    feats = [network(v).numpy() for v in stacked]
    network_s = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        sink = NpzFeatureSink(Path(tmp) / "stage.npz")
        t0 = time.perf_counter()
        for i, f in zip(range(0, len(ids), batch), feats):
            sink.append(np.array(ids[i:i + batch]), f.astype(np.float32))
        write_s = time.perf_counter() - t0
        sink.close()
        # The bare network again, then the whole pipeline, then the network once more.
        bare = []
        t0 = time.perf_counter()
        for v in stacked:
            network(v).numpy()
        bare.append(len(ids) / (time.perf_counter() - t0))
        sink = NpzFeatureSink(Path(tmp) / "pipeline.npz")
        t0 = time.perf_counter()
        report = extract_features(image_folder_dataset(a["images_dir"], ids=ids), sink, cnn=cnn, crops=1,
                                  batch_size=batch, progress=False, network=network)
        pipeline_wall = time.perf_counter() - t0
        sink.close()
        t0 = time.perf_counter()
        for v in stacked:
            network(v).numpy()
        bare.append(len(ids) / (time.perf_counter() - t0))
    n = len(ids)
    stages = {"read": read_s / n, "decode": decode_s / n, "resize": resize_s / n, "network": network_s / n,
              "write": write_s / n}
    total = sum(stages.values())
    bare_rate = float(np.mean(bare))
    out = {"cnn": cnn, "weights": a.get("weights", "none"), "photos": n, "batch_size": batch,
           "pipeline_photos_per_second": report.images_per_second,
           "pipeline_wall_photos_per_second": n / pipeline_wall,
           "bare_network_photos_per_second": bare_rate, "bare_network_runs": bare,
           "pipeline_over_bare": report.images_per_second / bare_rate,
           "stage_seconds_per_photo": stages,
           "stage_share": {k: v / total for k, v in stages.items()}}
    return _stamp(out, before)


def export_floor_phase(a: dict) -> dict:
    """Exports an (untrained) ``vete_bow`` text tower and times it against its tokeniser."""
    cfg = ExperimentConfig(data=DataConfig(max_dev_images=1), model=ModelConfig(name=a.get("model", "vete_bow")))
    setup = prepare_training(cfg, a.get("data_dir"))
    export_dir = str(Path(a["work_dir"]) / "export")
    export_text_tower(setup.model.text_tower, export_dir, setup.config.to_dict())
    before = list(os.getloadavg())
    out = _encode_phase({"sentences_file": a["sentences_file"], "batch_sizes": a["batch_sizes"],
                         "repeats": a["repeats"], "min_seconds": a["min_seconds"], "export_dir": export_dir,
                         "tokenizer_floor": True})
    out["model"] = cfg.model.name
    return _stamp(out, before)


FLOOR_PHASES = {"char_floor": char_floor_phase, "features_floor": features_floor_phase,
                "export_floor": export_floor_phase}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    print(json.dumps(FLOOR_PHASES[argv[0]](json.loads(argv[1]))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
