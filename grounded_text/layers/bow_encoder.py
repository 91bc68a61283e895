"""Bag-of-words sentence encoder (VETE-BOW, Kurach et al. 2017, §3; Table 3, §5.1), and its
serving math: ``bag_of_words_chain`` recognises a text tower that is exactly string →
``TextPreprocessor`` → ``BagOfWordsEncoder``, and ``pool_bag_of_words`` computes that tower
on ragged ids (the exported tower's fast path, ``grounded_text.export``)."""

from __future__ import annotations

import keras
import tensorflow as tf

import grounded_text.layers.examples as examples
from grounded_text.layers.examples import LayerExample
from grounded_text.layers.text_preprocessor import PADDING_ID, TextPreprocessor


@keras.saving.register_keras_serializable(package="grounded_text")
class BagOfWordsEncoder(keras.layers.Layer):
    """Token ids → pooled word embeddings, L2-normalised.

    ``e(s) = pool_{t in s} E[w_t]``, ``pool`` = mean (VETE BOW-mean) or sum
    (BOW-sum), padding (id 0) excluded; then ``e / max(||e||_2, 1e-12)``.

    Args:
      vocabulary_size: number of ids (padding and OOV buckets included).
      embedding_dim: N, the sentence embedding size.
      pooling: ``"mean"`` or ``"sum"``.
      normalize: L2-normalise the output.
      embeddings_initializer: Keras initializer for E [vocabulary_size, N].
      trainable_embeddings: False freezes E (e.g. pretrained GloVe vectors set
        with ``set_embeddings``, as Kolluru's averaged GloVe text branch).

    Call args:
      ids: ``int`` [B, T] token ids (0 = padding).

    Returns:
      ``float32`` [B, N]. A sentence with no tokens (possible only without
      boundary tokens) gives the all-zero vector, never NaN.

    Raises:
      ValueError: unknown ``pooling`` or non-positive sizes.

    Example:
      >>> encoder = BagOfWordsEncoder(vocabulary_size=4, embedding_dim=2)
      >>> encoder.set_embeddings(tf.constant([[0.0, 0.0], [3.0, 0.0], [0.0, 4.0], [1.0, 1.0]]))
      >>> print(encoder(tf.constant([[1, 2, 0], [1, 0, 0]])).numpy().round(4))  # mean [1.5, 2], then L2
      [[0.6 0.8]
       [1.  0. ]]
      >>> summed = BagOfWordsEncoder(4, 2, pooling="sum", normalize=False, embeddings_initializer="ones")
      >>> summed(tf.constant([[1, 2, 3], [0, 0, 0]])).numpy().tolist()  # no token: zeros
      [[3.0, 3.0], [0.0, 0.0]]
    """

    def __init__(
        self,
        vocabulary_size: int,
        embedding_dim: int = 128,
        pooling: str = "mean",
        normalize: bool = True,
        embeddings_initializer="uniform",
        trainable_embeddings: bool = True,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if pooling not in ("mean", "sum"):
            raise ValueError(f"BagOfWordsEncoder: pooling must be 'mean' or 'sum', got {pooling!r}.")
        if vocabulary_size < 1 or embedding_dim < 1:
            raise ValueError("BagOfWordsEncoder: vocabulary_size and embedding_dim must be >= 1.")
        self.vocabulary_size = int(vocabulary_size)
        self.embedding_dim = int(embedding_dim)
        self.pooling = pooling
        self.normalize = bool(normalize)
        self.embeddings_initializer = keras.initializers.get(embeddings_initializer)
        self.embedding = keras.layers.Embedding(
            self.vocabulary_size,
            self.embedding_dim,
            embeddings_initializer=self.embeddings_initializer,
            dtype=self.dtype_policy,
            name="word_embedding",
        )
        self.trainable_embeddings = bool(trainable_embeddings)
        self.embedding.trainable = self.trainable_embeddings

    def build(self, input_shape):
        self.embedding.build(input_shape)
        self.built = True

    def set_embeddings(self, matrix):
        """Sets E from a [vocabulary_size, N] array (e.g. ``word_vectors.embedding_matrix``).

        Raises:
          ValueError: shape mismatch.
        """
        if tuple(matrix.shape) != (self.vocabulary_size, self.embedding_dim):
            raise ValueError(
                f"BagOfWordsEncoder.set_embeddings: expected shape {(self.vocabulary_size, self.embedding_dim)}, "
                f"got {tuple(matrix.shape)}."
            )
        if not self.built:
            self.build((None, None))
        self.embedding.embeddings.assign(tf.cast(matrix, self.embedding.embeddings.dtype))

    def call(self, ids):
        vectors = self.embedding(ids)
        mask = tf.cast(tf.not_equal(ids, PADDING_ID), vectors.dtype)[..., None]
        summed = tf.reduce_sum(vectors * mask, axis=1)
        summed = tf.cast(summed, tf.float32)
        if self.pooling == "mean":
            count = tf.reduce_sum(tf.cast(tf.not_equal(ids, PADDING_ID), tf.float32), axis=1, keepdims=True)
            summed = summed / tf.maximum(count, 1.0)
        if self.normalize:
            summed = tf.math.l2_normalize(summed, axis=-1, epsilon=1e-24)
        return summed

    def compute_output_spec(self, ids):
        return keras.KerasTensor((ids.shape[0], self.embedding_dim), dtype="float32")

    @classmethod
    def example(cls) -> LayerExample:
        """Small constructor arguments and an input batch, for the shared layer tests."""
        return LayerExample({"vocabulary_size": 11, "embedding_dim": 6, "pooling": "sum"}, examples.word_ids())

    def get_config(self):
        config = super().get_config()
        config.update(
            vocabulary_size=self.vocabulary_size,
            embedding_dim=self.embedding_dim,
            pooling=self.pooling,
            normalize=self.normalize,
            embeddings_initializer=keras.initializers.serialize(self.embeddings_initializer),
            trainable_embeddings=self.trainable_embeddings,
        )
        return config


def layer_chain(model: keras.Model) -> list | None:
    """The layers of ``model`` in call order when it is a plain chain, else ``None``.

    A plain chain: one input, one output, and each layer called exactly once within the
    model, with no keyword tensors, on the previous layer's output (the first on the
    input). Read from the model's functional config (``get_config()["layers"]`` and their
    ``inbound_nodes``, Keras's saving format), which lists only this model's calls: a
    layer shared with another model still counts once here. A model without a functional
    config (subclassed) is not a chain.

    Returns:
      ``[layer, ...]`` without the ``InputLayer``, or ``None``.

    Example:
      >>> x = keras.Input((3,))
      >>> chain = keras.Model(x, keras.layers.Dense(1, name="b")(keras.layers.Dense(2, name="a")(x)))
      >>> [layer.name for layer in layer_chain(chain)]
      ['a', 'b']
      >>> print(layer_chain(keras.Model(x, keras.layers.Add()([x, x]))))  # two inputs to one call
      None
    """
    try:
        config = model.get_config()
    except (NotImplementedError, TypeError, ValueError, KeyError, AttributeError):
        return None
    specs = config.get("layers") if isinstance(config, dict) else None
    if not specs or specs[0].get("class_name") != "InputLayer" or specs[0].get("inbound_nodes"):
        return None
    previous = specs[0]["name"]
    for spec in specs[1:]:
        nodes = spec.get("inbound_nodes") or []
        if len(nodes) != 1 or nodes[0].get("kwargs"):
            return None
        args = nodes[0].get("args") or []
        if len(args) != 1 or not isinstance(args[0], dict) or args[0].get("class_name") != "__keras_tensor__":
            return None
        if args[0]["config"]["keras_history"][0] != previous:
            return None
        previous = spec["name"]
    if config.get("output_layers") not in ([previous, 0, 0], [[previous, 0, 0]]):
        return None
    return [model.get_layer(spec["name"]) for spec in specs[1:]]


def bag_of_words_chain(text_tower: keras.Model):
    """``(preprocessor, encoder)`` when ``text_tower`` is exactly string → ``TextPreprocessor`` →
    ``BagOfWordsEncoder`` (``layer_chain``) with float32 weights and compute (VETE-BOW and its
    BOW-sum and frozen-GloVe variants), else ``None``. Such a tower computes the same in
    training and inference (no dropout, no batch statistics), and ``pool_bag_of_words``
    computes it without a padded batch.

    Example:
      >>> preprocessor = TextPreprocessor(["<S>", "</S>", "a", "dog"])
      >>> sentences = keras.Input(shape=(), dtype="string")
      >>> ids = preprocessor(sentences)
      >>> tower = keras.Model(sentences, BagOfWordsEncoder(preprocessor.vocabulary_size, 4)(ids))
      >>> [type(layer).__name__ for layer in bag_of_words_chain(tower)]
      ['TextPreprocessor', 'BagOfWordsEncoder']
      >>> print(bag_of_words_chain(keras.Model(sentences, ids)))  # no encoder
      None
    """
    layers = [layer for layer in text_tower.layers if not isinstance(layer, keras.layers.InputLayer)]
    if len(layers) != 2 or not (isinstance(layers[0], TextPreprocessor) and type(layers[1]) is BagOfWordsEncoder):
        return None
    chain = layer_chain(text_tower)
    if chain is None or len(chain) != 2 or chain[0] is not layers[0] or chain[1] is not layers[1]:
        return None
    pre, enc = chain
    if enc.compute_dtype != "float32" or enc.embedding.embeddings.dtype != "float32":
        return None
    return pre, enc


def pool_bag_of_words(preprocessor: TextPreprocessor, encoder: BagOfWordsEncoder, sentences) -> tf.Tensor:
    """``encoder(preprocessor(sentences))`` computed on the ragged ids.

    A fused gather + per-sentence sum of the embedding rows (``tf.sparse.segment_sum``)
    over the word ids, plus the ``<S>`` and ``</S>`` rows added to every sentence, instead of
    padding to [B, T], gathering [B, T, N] and masking; then the encoder's pooling (mean or
    sum) and L2 normalisation (``BagOfWordsEncoder``; Kurach et al. 2017, §3). Equal to the
    Keras layers up to float32 summation order.

    Args:
      preprocessor, encoder: a ``bag_of_words_chain`` pair.
      sentences: ``tf.string`` [B].

    Returns:
      ``float32`` [B, N].

    Example:
      >>> preprocessor = TextPreprocessor(["<S>", "</S>", "a", "dog"])
      >>> encoder = BagOfWordsEncoder(preprocessor.vocabulary_size, embedding_dim=4)
      >>> sentences = tf.constant(["A dog.", "a zebra", ""])
      >>> padded = encoder(preprocessor(sentences))  # the Keras layers (and builds the encoder)
      >>> fast = pool_bag_of_words(preprocessor, encoder, sentences)
      >>> tuple(fast.shape), float(tf.reduce_max(tf.abs(fast - padded))) < 1e-6
      ((3, 4), True)
    """
    table = getattr(encoder.embedding.embeddings, "value", encoder.embedding.embeddings)
    ids, row_splits = preprocessor.flat_ids(sentences)
    batch = tf.shape(row_splits, out_type=tf.int64)[0] - 1
    rows = tf.ragged.row_splits_to_segment_ids(row_splits)
    # One extra segment (number B) after the sentences': the <S> and </S> rows, summed once for
    # the batch (or, without boundary tokens, the padding row, unused). It keeps the ids never
    # empty: in TF 2.21 the gradient of tf.sparse.segment_sum for a batch with no ids (only
    # empty sentences) is uninitialised memory, which would corrupt fine-tuning of an export.
    extra = list(preprocessor.boundary_ids) if preprocessor.boundary_tokens else [PADDING_ID]
    # Fused gather + sum: no [ids, N] copy of the rows, and no tf.gather of the table. A
    # ResourceGather puts the variable in copy-on-read mode, after which every plain read of
    # it (a slice, this op's input) copies the whole table: milliseconds per call.
    summed = tf.sparse.segment_sum(table, tf.concat([ids, tf.constant(extra, tf.int64)], 0),
                                   tf.concat([rows, tf.fill([len(extra)], batch)], 0), num_segments=batch + 1)
    summed, extra_sum = summed[:-1], summed[-1]
    if preprocessor.boundary_tokens:
        summed = summed + extra_sum
    if encoder.normalize:
        # The mean's division by the count is skipped: L2 normalisation gives the same direction
        # (to float32 rounding; unless the mean's norm is below 1e-12, the epsilon), and the
        # broadcast division of [B, N] by [B, 1] cost ~5 % of a batch of 1024 sentences.
        return tf.math.l2_normalize(summed, axis=-1, epsilon=1e-24)
    if encoder.pooling == "mean":
        count = tf.cast(row_splits[1:] - row_splits[:-1], tf.float32)[:, None]
        if preprocessor.boundary_tokens:
            count = count + 2.0
        summed = summed / tf.maximum(count, 1.0)
    return summed
