"""Snapshot ensembles of text towers (Merkx & Frank 2019, §3.3; Huang et al. 2017).

The ensemble embeds a sentence with every snapshot, averages the embeddings and
re-normalises the mean to unit L2 norm:

    e(s) = m(s) / ‖m(s)‖₂,   m(s) = (1/M) Σ_k f_k(s).

The re-normalisation keeps the ensemble on the unit sphere like each snapshot
(the caption2image reference code averages without it; for cosine similarity the
two agree, for dot products and distances they do not).
"""

from __future__ import annotations

import keras
import tensorflow as tf

from grounded_text.layers.examples import LayerExample
from grounded_text.losses.common import l2_normalize


@keras.saving.register_keras_serializable(package="grounded_text")
class MeanNormalize(keras.layers.Layer):
    """Mean of M float[B, N] inputs, re-normalised to unit L2 norm (``float32``).

    A zero mean vector stays zero (norm floor 1e-12).
    """

    def __init__(self, **kwargs):
        kwargs.setdefault("dtype", "float32")
        super().__init__(**kwargs)

    def call(self, embeddings):
        stacked = tf.stack([tf.cast(e, tf.float32) for e in embeddings], axis=0)
        return l2_normalize(tf.reduce_mean(stacked, axis=0))

    def compute_output_spec(self, embeddings):
        return keras.KerasTensor(embeddings[0].shape, dtype="float32")

    @classmethod
    def example(cls) -> LayerExample:
        """Small constructor arguments and an input batch, for the shared layer tests."""
        return LayerExample({}, skip="its one input is a list of towers' outputs: tests/test_schedules.py runs it "
                            "inside build_snapshot_ensemble, through a saved ensemble")


def build_snapshot_ensemble(text_towers, name: str = "snapshot_ensemble") -> keras.Model:
    """One tower from M snapshots: input[B, ...] → float32[B, N], mean then L2-normalise.

    Text towers (string[B]) give the text ensemble; image towers (float[B, d]) the
    image ensemble, for retrieval (Merkx & Frank ensemble both encoders).

    Args:
      text_towers: list of M >= 1 Keras models with the same input and the same
        output width N, string[B] → float[B, N] or float[B, d] → float[B, N] (e.g.
        from ``load_snapshot_towers``). They are shared, not copied.
      name: model name.

    Returns:
      ``keras.Model`` input[B, ...] → float32[B, N]; export a text ensemble with
      ``grounded_text.serving.export.export_text_tower`` like any text tower, an image one
      with ``export_image_tower``.

    Raises:
      ValueError: empty list or differing output widths.
    """
    towers = list(text_towers)
    if not towers:
        raise ValueError("build_snapshot_ensemble: text_towers is empty.")
    widths = {tuple(t.output_shape[1:]) for t in towers}
    if len(widths) != 1:
        raise ValueError(f"build_snapshot_ensemble: snapshots differ in output shape: {sorted(widths)}.")
    first = towers[0].inputs[0]
    sentences = keras.Input(shape=tuple(first.shape[1:]), dtype=first.dtype, name=first.name)
    outputs = []
    for k, tower in enumerate(towers):
        # A renamed functional view over the same layers, so M towers named
        # "text_tower" can live in one model.
        view = keras.Model(tower.inputs[0], tower.outputs[0], name=f"{name}_{k + 1:02d}")
        outputs.append(view(sentences))
    ensemble = MeanNormalize(name="mean_normalize")(outputs)
    return keras.Model(sentences, ensemble, name=name)
