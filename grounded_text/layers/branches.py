"""Image branches and the grounded-space projection.

* ``LinearImageEncoder``: ``v = W x + b`` (VETE's affine image branch, Kurach et al.
  2017, §3) or ``v = (W x + b) / ||W x + b||`` (Merkx & Frank 2019, §3.1: a linear
  projection of the CNN features, L2-normalised).
* ``MLPBranch``: FC–ReLU–Dropout–…–FC–BatchNorm–L2, one branch of Kolluru's
  two-branch network (§3.1, after Wang et al. 2016); used for both the image and
  the text side (over averaged word vectors).
* ``GroundedProjection``: Bordes et al. (2019, §3.2) projection g from the
  textual space to the grounded space where the grounding losses act.
"""

from __future__ import annotations

import keras
import tensorflow as tf

import grounded_text.layers.examples as examples
from grounded_text.layers.examples import LayerExample
from grounded_text.layers.torch_init import fan_in_uniform


def _l2(x):
    return tf.math.l2_normalize(tf.cast(x, tf.float32), axis=-1, epsilon=1e-24)


@keras.saving.register_keras_serializable(package="grounded_text")
class LinearImageEncoder(keras.layers.Layer):
    """Image features [B, d] → float32 [B, N] by ``W x + b`` (optionally L2-normalised).

    Args:
      output_dim: N.
      normalize: L2-normalise (Merkx & Frank) or not (VETE's affine W).
      use_bias: add b.
      torch_bias: draw b U(−1/√d, 1/√d), ``nn.Linear``'s default (``torch_init``), as the
        authors' code of Merkx & Frank leaves it (``encoders.py:52-53`` draws only W anew,
        Xavier-uniform, which is Keras' Glorot-uniform). Default ``False``: zero.

    Raises:
      ValueError: ``output_dim < 1``.

    Example:
      >>> encoder = LinearImageEncoder(output_dim=4, normalize=True)
      >>> v = encoder(tf.ones([2, 10]))
      >>> tuple(v.shape), v.dtype.name, tf.norm(v, axis=-1).numpy().round(4).tolist()
      ((2, 4), 'float32', [1.0, 1.0])
    """

    def __init__(self, output_dim: int, normalize: bool = False, use_bias: bool = True, torch_bias: bool = False,
                 **kwargs):
        super().__init__(**kwargs)
        if output_dim < 1:
            raise ValueError(f"LinearImageEncoder: output_dim must be >= 1, got {output_dim}.")
        self.output_dim, self.normalize, self.use_bias = int(output_dim), bool(normalize), bool(use_bias)
        self.torch_bias = bool(torch_bias)
        self.dense = keras.layers.Dense(self.output_dim, use_bias=self.use_bias, dtype=self.dtype_policy,
                                        name="W")

    def build(self, input_shape):
        if self.torch_bias:  # the fan-in is known only now
            self.dense.bias_initializer = fan_in_uniform(int(input_shape[-1]))
        self.dense.build(input_shape)
        self.built = True

    def call(self, x):
        v = self.dense(x)
        return _l2(v) if self.normalize else tf.cast(v, tf.float32)

    def compute_output_spec(self, x):
        return keras.KerasTensor((x.shape[0], self.output_dim), dtype="float32")

    @classmethod
    def example(cls) -> LayerExample:
        """Small constructor arguments and an input batch, for the shared layer tests."""
        return LayerExample({"output_dim": 3, "normalize": True}, examples.image_features())

    def get_config(self):
        config = super().get_config()
        config.update(output_dim=self.output_dim, normalize=self.normalize, use_bias=self.use_bias,
                      torch_bias=self.torch_bias)
        return config


@keras.saving.register_keras_serializable(package="grounded_text")
class MLPBranch(keras.layers.Layer):
    """x [B, d] → FC–ReLU–Dropout (per hidden layer) → FC → BatchNorm → L2 → float32 [B, N].

    Kolluru (§3.1), after Wang et al. (2016) two-branch networks: paper sizes
    hidden (2048,), N = 512, dropout 0.5.

    Args:
      hidden_units: sizes of the hidden FC layers (may be empty: FC–BN–L2).
      output_dim: N.
      dropout: rate after each hidden ReLU (training only).
      batch_norm: BatchNorm after the last FC.
      normalize: L2-normalise the output.

    Raises:
      ValueError: non-positive sizes or dropout outside [0, 1).

    Example:
      >>> branch = MLPBranch(hidden_units=(16,), output_dim=4, dropout=0.5)
      >>> x = tf.random.stateless_uniform([3, 10], seed=[0, 1])
      >>> v = branch(x, training=False)
      >>> tuple(v.shape), tf.norm(v, axis=-1).numpy().round(4).tolist()
      ((3, 4), [1.0, 1.0, 1.0])
    """

    def __init__(self, hidden_units=(2048,), output_dim: int = 512, dropout: float = 0.5,
                 batch_norm: bool = True, normalize: bool = True, **kwargs):
        super().__init__(**kwargs)
        hidden = tuple(int(h) for h in hidden_units)
        if (hidden and min(hidden) < 1) or output_dim < 1:
            raise ValueError("MLPBranch: hidden_units and output_dim must be >= 1.")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"MLPBranch: dropout must be in [0, 1), got {dropout}.")
        self.hidden_units, self.output_dim, self.dropout = hidden, int(output_dim), float(dropout)
        self.batch_norm, self.normalize = bool(batch_norm), bool(normalize)
        self.hidden = [keras.layers.Dense(h, activation="relu", dtype=self.dtype_policy, name=f"fc{i}")
                       for i, h in enumerate(hidden)]
        self.drops = [keras.layers.Dropout(self.dropout) for _ in hidden]
        self.out = keras.layers.Dense(self.output_dim, dtype=self.dtype_policy, name=f"fc{len(hidden)}")
        self.bn = keras.layers.BatchNormalization(dtype=self.dtype_policy, name="bn") if self.batch_norm else None

    def build(self, input_shape):
        shape = tuple(input_shape)
        for layer in self.hidden:
            layer.build(shape)
            shape = shape[:-1] + (layer.units,)
        self.out.build(shape)
        if self.bn is not None:
            self.bn.build(shape[:-1] + (self.output_dim,))
        self.built = True

    def call(self, x, training=None):
        for layer, drop in zip(self.hidden, self.drops):
            x = drop(layer(x), training=training)
        x = self.out(x)
        if self.bn is not None:
            x = self.bn(x, training=training)
        return _l2(x) if self.normalize else tf.cast(x, tf.float32)

    def compute_output_spec(self, x, training=None):
        return keras.KerasTensor((x.shape[0], self.output_dim), dtype="float32")

    @classmethod
    def example(cls) -> LayerExample:
        """Small constructor arguments and an input batch, for the shared layer tests."""
        return LayerExample({"hidden_units": (5, 4), "output_dim": 3, "dropout": 0.2}, examples.image_features())

    def get_config(self):
        config = super().get_config()
        config.update(hidden_units=list(self.hidden_units), output_dim=self.output_dim, dropout=self.dropout,
                      batch_norm=self.batch_norm, normalize=self.normalize)
        return config


@keras.saving.register_keras_serializable(package="grounded_text")
class GroundedProjection(keras.layers.Layer):
    """Projection g: textual space → grounded space (Bordes et al. 2019, §3.2).

    ``kind="mlp"``: ``g(u) = W_2 ReLU(W_1 u + b_1) + b_2`` (2-layer MLP);
    ``kind="identity"``: ``g(u) = u`` (the grounding losses then act on the
    textual space itself). ``bordes_cg_pg`` exports both u and g(u) (g(u) by default).

    Args:
      kind: ``"mlp"`` or ``"identity"``.
      hidden_units: width of the hidden layer (mlp).
      output_dim: grounded-space size (mlp).

    Returns:
      float32 [B, N_g] (N_g = N for identity).

    Raises:
      ValueError: unknown kind or non-positive sizes.

    Example:
      >>> u = tf.ones([2, 6])
      >>> tuple(GroundedProjection(kind="mlp", hidden_units=8, output_dim=4)(u).shape)
      (2, 4)
      >>> GroundedProjection(kind="identity")(u).numpy().tolist() == u.numpy().tolist()
      True
    """

    def __init__(self, kind: str = "mlp", hidden_units: int = 512, output_dim: int = 512, **kwargs):
        super().__init__(**kwargs)
        if kind not in ("mlp", "identity"):
            raise ValueError(f"GroundedProjection: kind must be 'mlp' or 'identity', got {kind!r}.")
        if hidden_units < 1 or output_dim < 1:
            raise ValueError("GroundedProjection: hidden_units and output_dim must be >= 1.")
        self.kind, self.hidden_units, self.output_dim = kind, int(hidden_units), int(output_dim)
        if kind == "mlp":
            self.fc1 = keras.layers.Dense(self.hidden_units, activation="relu", dtype=self.dtype_policy, name="g1")
            self.fc2 = keras.layers.Dense(self.output_dim, dtype=self.dtype_policy, name="g2")

    def build(self, input_shape):
        if self.kind == "mlp":
            self.fc1.build(input_shape)
            self.fc2.build(tuple(input_shape[:-1]) + (self.hidden_units,))
        self.built = True

    def call(self, u):
        if self.kind == "identity":
            return tf.cast(u, tf.float32)
        return tf.cast(self.fc2(self.fc1(u)), tf.float32)

    def compute_output_spec(self, u):
        dim = u.shape[-1] if self.kind == "identity" else self.output_dim
        return keras.KerasTensor((u.shape[0], dim), dtype="float32")

    @classmethod
    def example(cls) -> LayerExample:
        """Small constructor arguments and an input batch, for the shared layer tests."""
        return LayerExample({"kind": "mlp", "hidden_units": 5, "output_dim": 2}, examples.image_features())

    def get_config(self):
        config = super().get_config()
        config.update(kind=self.kind, hidden_units=self.hidden_units, output_dim=self.output_dim)
        return config
