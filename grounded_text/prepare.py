"""Prepare a standard image–caption dataset for training: captions + image features (+ TFDS).

Usage::

    # COCO 2014 from the official files, Karpathy splits, features extracted here:
    python -m grounded_text.prepare --source coco_json \\
        --captions annotations/captions_train2014.json --captions annotations/captions_val2014.json \\
        --karpathy dataset_coco.json --images coco2014 --out prepared/coco \\
        --cnn inception_v3 --crops 1 [--tfds]
    # TFDS coco_captions (images come from the TFDS records):
    python -m grounded_text.prepare --source tfds_coco --tfds-data-dir ~/tensorflow_datasets --out prepared/coco
    # Flickr8k / Flickr30k, reusing an existing feature store:
    python -m grounded_text.prepare --source flickr8k --captions $GROUNDED_TEXT_DATA \\
        --features $GROUNDED_TEXT_DATA/flickr8k/features/efficientnet_lite0.npz --out prepared/f8k
    python -m grounded_text.prepare --source flickr30k --captions results_20130124.token \\
        --karpathy dataset_flickr30k.json --images flickr30k-images --out prepared/f30k

Then train with ``python -m grounded_text.train --dataset prepared/coco ...``.
Writes ``OUT/dataset.json``, ``OUT/captions.jsonl``, ``OUT/features.npz`` (unless
``--features`` names an existing store) and, with ``--tfds``, ``OUT/tfds/`` (see
``grounded_text.data.prepared``). Extraction is resumable: rerunning skips images
already in ``OUT/features.npz``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from grounded_text.utils.extras import NETWORK_MODULES, check_extras

#: the caption sources ``--source`` names, each read by ``build_source``
SOURCES = ("coco_json", "karpathy", "flickr8k", "flickr30k", "tfds_coco")


def build_source(a: argparse.Namespace):
    """The ``grounded_text.data.sources.CaptionSource`` named by the flags (see ``parse_args``)."""
    caps = a.captions or []
    if a.source != "tfds_coco" and not caps:
        raise SystemExit(f"--source {a.source} needs --captions.")
    # The readers load TensorFlow: imported once the flags are checked, so that --help and a flag
    # error answer at once.
    from grounded_text.data import sources

    split = None if a.split == "none" else a.split
    if a.source == "coco_json":
        return sources.coco_json_source(caps, a.images, karpathy=a.karpathy, split=split)
    if a.source == "karpathy":
        return sources.karpathy_source(caps[0], a.images)
    if a.source == "flickr8k":
        return sources.flickr8k_source(caps[0], a.images)
    if a.source == "flickr30k":
        return sources.flickr30k_source(caps[0], a.images, karpathy=a.karpathy,
                                        split=None if a.split == "auto" else split)
    return sources.tfds_coco_captions(a.tfds_data_dir, splits=a.tfds_splits or sources.TFDS_COCO_SPLITS,
                                      download=a.download)


def prepare(a: argparse.Namespace) -> dict:
    """Runs the preparation; returns the manifest (also written to ``OUT/dataset.json``)."""
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    src = build_source(a)  # the flags' last check, before TensorFlow loads
    from grounded_text.data import features, prepared

    extra = {"inputs": {"captions": [str(c) for c in a.captions or []], "images": a.images,
                        "karpathy": a.karpathy, "tfds_data_dir": a.tfds_data_dir}}
    if a.features:
        store_path = Path(a.features)
        features.open_feature_store(store_path)  # validate now, not at training time
    else:
        try:
            from grounded_text.vision.extractor import extract_features
            from grounded_text.vision.sinks import NpzFeatureSink
        except ImportError as e:
            raise SystemExit(f"Feature extraction is not available in this install ({e}); pass --features STORE.")
        sink = NpzFeatureSink(out / prepared.FEATURES_FILE)
        report = extract_features(src.images(missing=a.missing_images), sink, cnn=a.cnn, crops=a.crops,
                                  weights=a.weights, batch_size=a.batch_size, progress=True)
        store_path = sink.close()
        extra["extraction"] = {"cnn": a.cnn, "crops": a.crops, "weights": a.weights,
                               "written": report.written, "skipped_existing": report.skipped_existing,
                               "failed": [list(f) for f in report.failed][:100],
                               "num_failed": len(report.failed), "seconds": report.seconds,
                               "images_per_second": report.images_per_second}
    prepared.write_prepared(out, src.captions, store_path, source=src.name, extra=extra)
    if a.tfds:
        store = features.open_feature_store(store_path)
        extra["tfds"] = str(prepared.export_tfds(src.captions, store, out / prepared.TFDS_DIR, name=a.tfds_name))
        prepared.write_prepared(out, src.captions, store_path, source=src.name, extra=extra)
    return json.loads((out / "dataset.json").read_text())


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m grounded_text.prepare", description=__doc__.split("\n\n")[0])
    p.add_argument("--source", required=True, choices=SOURCES)
    p.add_argument("--captions", action="append", help="caption file(s) (coco_json: repeatable), "
                   "Karpathy file (karpathy), data root (flickr8k), token/CSV file (flickr30k)")
    p.add_argument("--karpathy", default=None, help="Karpathy split file dataset_*.json (coco_json, flickr30k)")
    p.add_argument("--split", default="auto", choices=["auto", "train", "dev", "test", "none"],
                   help="split of every caption without --karpathy (auto: from the file name)")
    p.add_argument("--images", default=None, help="image folder (ids = file names)")
    p.add_argument("--missing-images", default="error", choices=["error", "skip"])
    p.add_argument("--tfds-data-dir", default=None, help="TFDS data folder (tfds_coco)")
    p.add_argument("--tfds-splits", nargs="+", default=None)  # None: every split (sources.TFDS_COCO_SPLITS)
    p.add_argument("--download", action="store_true", help="tfds_coco: download and prepare when absent")
    p.add_argument("--out", required=True, help="prepared dataset folder")
    p.add_argument("--features", default=None, help="use this existing feature store instead of extracting")
    p.add_argument("--cnn", default="efficientnet_lite0",
                   help="the network of the features (default efficientnet_lite0, shipped in the package)")
    p.add_argument("--crops", type=int, default=1, choices=[1, 10])
    p.add_argument("--weights", default="imagenet")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--tfds", action="store_true", help="also export OUT/tfds (a TFDS dataset)")
    p.add_argument("--tfds-name", default="grounded_text_pairs")
    return p.parse_args(argv)


def main(argv=None) -> int:
    """The CLI; bad input (missing files, malformed captions, a missing flag) prints one
    ``error: ...`` line and returns 2, as every grounded_text command does."""
    args = parse_args(argv)
    # the extras the chosen source, export and network need, said before any work
    needs = [("tensorflow_datasets", f"--{flag}") for flag, wanted in
             (("source tfds_coco", args.source == "tfds_coco"), ("tfds", args.tfds)) if wanted]
    if args.features is None and args.cnn in NETWORK_MODULES:
        needs.append((NETWORK_MODULES[args.cnn], f"The {args.cnn} network (--cnn)"))
    check_extras(needs)
    try:
        manifest = prepare(args)
    except SystemExit as e:  # build_source / prepare's own messages
        if not isinstance(e.code, str):
            raise
        print(f"error: {e.code}", file=sys.stderr)
        return 2
    except (FileNotFoundError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    json.dump({k: manifest[k] for k in ("source", "features", "splits")}, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    from grounded_text.utils.extras import run_command

    raise SystemExit(run_command(main))
