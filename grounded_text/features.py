"""CLI: CNN image features from a folder of images into an ``.npz`` feature store.

::

    python -m grounded_text.features --images DIR --out STORE.npz \\
        [--cnn efficientnet_lite0|efficientnet_lite0_ra|inception_v3|resnet152|resnet50|vgg19|efficientnet_b0] \\
        [--crops 1|10] [--weights imagenet|none|PATH] [--batch-size N] [--ids-file F] [--mixed-precision]

The store is what ``python -m grounded_text.train --features STORE.npz`` reads
(``ids`` = image file names, ``features`` float32 [n, d]); ``--cnn efficientnet_lite0``
(the default) into ``DATA/flickr8k/features/efficientnet_lite0.npz`` makes the features the trainer
reads by default, with Google's Lite0 ImageNet weights shipped in the package (offline; the network of
the shipped models' image towers). Re-running with the same
``--out`` resumes: ids already stored (also from an interrupted run) are skipped.
Images that cannot be decoded are listed (id and reason) and skipped, and so are
images above ``--max-pixels`` (40 million by default; read from the header, never
decoded) and, with ``--crops 10``, above a 16:1 aspect ratio. Ids from ``--ids-file``
must stay inside ``--images`` (no absolute paths, no ``..``). See docs/features.md. (The
reader of stores is :mod:`grounded_text.data.features`.)

The store records what made its rows (network, weights: the ImageNet file or preset, a
weights file's SHA-256 or ``random:seed=N``; crops, image size, preprocessing; ``orientation:
exif``, photos turned upright by their EXIF orientation); resuming
or appending with other settings is refused, naming both (``--weights none`` builds a
random network seeded with ``--seed``, the same in every process).

Exit status: 0 on success (even with undecodable images, which are listed); 2 for
bad arguments, a missing folder/file, an ``--out`` that cannot be written (checked
before any image is read), a store made with other settings, unavailable ImageNet
weights, or a missing extra.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

# The CNN names without the TensorFlow side: --help answers at once.
from grounded_text.config.choices import NETWORK_NAMES


def _parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="python -m grounded_text.features",
        description="Extract pooled ImageNet-CNN features of a folder of images into an .npz "
        "feature store (resumable).",
    )
    parser.add_argument("--images", required=True, help="folder of JPEG/PNG images")
    parser.add_argument("--out", required=True, help="output .npz store (resumed if present)")
    parser.add_argument("--cnn", default="efficientnet_lite0", choices=NETWORK_NAMES,
                        help="the network (default efficientnet_lite0: Google's Lite0 ImageNet weights, shipped in "
                        "the package, offline; the features the shipped models and train read by default); "
                        "efficientnet_lite0_ra is keras-hub's RandAugment Lite0, another network (the [images] "
                        "extra)")
    parser.add_argument("--crops", default=1, type=int, choices=(1, 10),
                        help="1: whole image resized; 10: ten-crop average")
    parser.add_argument("--weights", default="imagenet",
                        help="'imagenet' (default: ImageNet weights; efficientnet_lite0's ship in the package, "
                        "offline; the other networks' are fetched once into Keras' or keras-hub's cache), 'none' "
                        "(random init) or a .weights.h5/.h5 file")
    parser.add_argument("--seed", default=0, type=int,
                        help="with --weights none: the seed of the random network (recorded in the store)")
    parser.add_argument("--batch-size", default=32, type=int)
    parser.add_argument("--ids-file", default=None,
                        help="only these image ids (one per line; Flickr8k split or token file)")
    parser.add_argument("--mixed-precision", action="store_true",
                        help="run the CNN under mixed_float16 (GPU); features stay float32")
    parser.add_argument("--max-pixels", type=int, default=None,
                        help="refuse (report FAILED, skip) images whose header declares more pixels "
                        "(decompression-bomb guard; default 40000000, 0: no limit)")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    if args.batch_size < 1:
        parser.error(f"--batch-size must be >= 1, got {args.batch_size}")
    if args.max_pixels is not None and args.max_pixels < 0:
        parser.error(f"--max-pixels must be >= 0, got {args.max_pixels}")
    return args


def main(argv=None) -> int:
    """The CLI. Exit status: 0 done; 2 bad input or a failed write (one ``error: ...`` line);
    130 interrupted (Ctrl-C: one line; the batches written so far stay, and the same command
    resumes)."""
    args = _parse_args(argv)
    from grounded_text.utils.extras import NETWORK_MODULES, check_extras

    if args.cnn in NETWORK_MODULES:  # said before TensorFlow loads, not after
        check_extras([(NETWORK_MODULES[args.cnn], f"The {args.cnn} network (--cnn)")])
    try:
        return _extract(args)
    except KeyboardInterrupt:
        parts = Path(args.out).with_name(Path(args.out).name + ".parts")
        kept = (f"the batches written so far are kept in {str(parts)!r}" if parts.is_dir()
                else "no new batch was written")
        print(f"interrupted: {kept}; the same command resumes, skipping the images already stored.",
              file=sys.stderr)
        return 130


def _extract(args) -> int:
    from grounded_text.utils.extras import MissingExtraError
    from grounded_text.vision import extractor
    from grounded_text.vision.crops import MAX_IMAGE_PIXELS
    from grounded_text.vision.extractor import (
        extract_features,
        image_folder_dataset,
        read_ids_file,
    )
    from grounded_text.vision.networks import DEFAULT_RANDOM_SEED, WeightsUnavailableError
    from grounded_text.vision.sinks import NpzFeatureSink

    max_pixels = MAX_IMAGE_PIXELS if args.max_pixels is None else (args.max_pixels or None)

    try:
        ids = read_ids_file(args.ids_file) if args.ids_file else None
        images = image_folder_dataset(args.images, ids, max_pixels)
        # What makes the rows, recorded in the store: resuming or appending with other settings is refused.
        provenance = extractor.row_provenance(args.cnn, args.crops, args.weights, seed=args.seed)
        sink = NpzFeatureSink(args.out, provenance=provenance)
        network = None  # the extractor builds it; a random one is seeded with DEFAULT_RANDOM_SEED there
        if provenance["weights"].startswith("random:") and args.seed != DEFAULT_RANDOM_SEED:
            network = extractor.FeatureNetwork(args.cnn, weights=None, mixed_precision=args.mixed_precision,
                                               seed=args.seed)
        report = extract_features(
            images, sink, cnn=args.cnn, crops=args.crops, weights=args.weights,
            batch_size=args.batch_size, progress=not args.no_progress,
            mixed_precision=args.mixed_precision, max_pixels=max_pixels, network=network,
        )
    except (FileNotFoundError, ValueError, WeightsUnavailableError, MissingExtraError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # a write failing mid-run (disk full); the batches written so far stay
        print(f"error: --out {args.out!r}: {e}", file=sys.stderr)
        return 2
    for image_id, reason in report.failed:
        print(f"FAILED {image_id}: {reason}", file=sys.stderr)
    if sink.existing_ids():
        try:
            path = sink.close()
        except OSError as e:  # e.g. the disk filled up: the part files stay for a resume
            print(f"error: --out {args.out!r}: cannot write the store ({e}); the written batches are kept in "
                  f"{str(sink.parts_dir)!r} and a re-run with the same --out resumes.", file=sys.stderr)
            return 2
        print(f"Store: {path} ({len(sink.existing_ids())} images, dim {sink.dim})")
    else:
        print("Store: nothing written (no decodable images).")
    print(
        f"{report.cnn} crops={report.crops} dim={report.dim}: wrote {report.written}, "
        f"skipped {report.skipped_existing} already stored, {len(report.failed)} failed; "
        f"{report.seconds:.1f} s total; {report.images_per_second:.2f} images/s "
        "(decode + CNN + write)"
    )
    return 0


if __name__ == "__main__":
    from grounded_text.utils.extras import run_command

    raise SystemExit(run_command(main))
