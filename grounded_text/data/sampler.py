"""Samplers that arrange batches by image: several captions per image (for the cluster
loss of Bordes et al. 2019), or distinct images in caption passes (Merkx & Frank's code).

The cluster loss L_C (Bordes et al. 2019, eq. 2) needs, for a sentence, a visually
equivalent sentence — another caption of the same image — in the same batch. The
plain ``make_dataset`` shuffles captions independently, so with Flickr8k's 5
captions of ~6k training images two captions of one image rarely meet. This
sampler draws P images per batch and C captions of each (the P×K sampling of
person re-identification, Hermans et al. 2017).

One epoch visits every eligible image once, in a fresh seeded order, with C of its
captions drawn afresh (without replacement) each epoch; images with fewer than C
captions are left out with a warning. Batches are image-major:
``[img_0 cap_a, img_0 cap_b, …, img_1 cap_a, …]``.

``make_caption_pass_dataset`` is the batching of Merkx & Frank's code (caption2image,
``PyTorch/functions/minibatchers.py``, ``iterate_char_5fold``): each epoch shuffles the images
once, then makes one pass over that order per caption slot, pass i serving each image's
caption i; every batch holds B distinct images, so no negative of the ranking loss is
another caption of the anchor's image.
"""

from __future__ import annotations

import warnings

import numpy as np
import tensorflow as tf

from grounded_text.data.keys import CAPTION_KEY, FEATURES_KEY, IMAGE_ID_KEY
from grounded_text.data.pairs import CaptionPairs
from grounded_text.utils.quiet import GroundedTextWarning


def caption_groups(pairs: CaptionPairs):
    """Caption indices grouped by image.

    Returns:
      ``(groups int64 [n_images, max_captions] padded with −1, counts int64 [n_images],
      rows int64 [n_images])`` in order of first appearance; ``rows`` is each image's
      feature row (its ``image_id`` in batches).
    """
    order: dict[str, list[int]] = {}
    for i, image_id in enumerate(pairs.image_ids.tolist()):
        order.setdefault(image_id, []).append(i)
    groups = list(order.values())
    width = max((len(g) for g in groups), default=0)
    table = np.full((len(groups), width), -1, dtype=np.int64)
    for r, g in enumerate(groups):
        table[r, : len(g)] = g
    counts = np.array([len(g) for g in groups], dtype=np.int64)
    rows = np.array([pairs.feature_rows[g[0]] for g in groups], dtype=np.int64)
    return table, counts, rows


def make_grouped_dataset(
    pairs: CaptionPairs,
    images_per_batch: int,
    captions_per_image: int,
    seed: int = 0,
    *,
    shuffle: bool = True,
    drop_remainder: bool = True,
    epoch: tf.Variable | None = None,
) -> tf.data.Dataset:
    """A ``tf.data`` pipeline of batches holding ``captions_per_image`` captions per image.

    Args:
      pairs: the split to serve (captions joined to feature rows).
      images_per_batch: P, distinct images per batch (>= 1; >= 2 for the
        ranking/cluster losses to see a negative).
      captions_per_image: C, captions of each image per batch (>= 1; >= 2 for the
        cluster loss). B = P × C.
      seed: seed of the image order and caption choice; each epoch (each new
        iteration of the dataset) reshuffles both, reproducibly for a given seed.
      shuffle: False keeps images in first-appearance order and takes their first
        C captions (evaluation).
      drop_remainder: drop the last batch with fewer than P images.
      epoch: an int64 ``tf.Variable`` with the 0-based epoch, read at each iteration's
        start: the image order and caption choice are then a pure function of
        ``(seed, epoch)`` (a resumed run replays them; see ``make_dataset``).

    Returns:
      Dataset of dicts ``{"caption": string[B], "image_features": float32[B, d],
      "image_id": int64[B]}``; ``image_id`` is the image's feature row, so the
      features of row b are ``pairs.features[image_id[b]]``.

    Raises:
      ValueError: P or C < 1, or no image has at least C captions.
    """
    _check_grouped_arguments(pairs, images_per_batch, captions_per_image)
    table, counts, rows = _eligible_groups(pairs, images_per_batch, captions_per_image, drop_remainder)
    num_images = table.shape[0]

    used = np.unique(rows)
    remap = np.full(pairs.features.shape[0], -1, dtype=np.int64)
    remap[used] = np.arange(used.size)
    features = tf.constant(pairs.features[used])
    captions = tf.constant(pairs.captions.astype(str))
    table_t = tf.constant(table)
    counts_t = tf.constant(counts)
    rows_t = tf.constant(rows)
    local_t = tf.constant(remap[rows])
    c = captions_per_image

    images = _image_order(num_images, seed, shuffle, epoch)
    if shuffle:
        def choose(image, key):
            n = tf.gather(counts_t, image)
            # Stateless seeded shuffle of the image's caption slots 0..n-1, first C kept.
            order = tf.random.experimental.stateless_shuffle(tf.range(n), seed=key)
            return image, tf.gather(tf.gather(table_t, image), order[:c])

        images = images.map(choose, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    else:
        images = images.map(lambda image: (image, tf.gather(table_t, image)[:c]))

    def assemble(image, chosen):
        # image: int64 [P]; chosen: int64 [P, C] caption indices of those images.
        image_rows = tf.repeat(tf.gather(rows_t, image), c)
        local_rows = tf.repeat(tf.gather(local_t, image), c)
        return {
            CAPTION_KEY: tf.gather(captions, tf.reshape(chosen, [-1])),
            FEATURES_KEY: tf.gather(features, local_rows),
            IMAGE_ID_KEY: image_rows,
        }

    ds = images.batch(images_per_batch, drop_remainder=drop_remainder)
    ds = ds.map(assemble, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    return ds.prefetch(tf.data.AUTOTUNE)


def make_caption_pass_dataset(
    pairs: CaptionPairs,
    batch_size: int,
    seed: int = 0,
    *,
    epoch: tf.Variable | None = None,
) -> tf.data.Dataset:
    """Batches of ``batch_size`` distinct images, one caption each, in caption passes.

    One epoch: the images in a fresh seeded order, then pass i = 0, 1, … over that order with
    each image's i-th caption (in the order of ``pairs``; an image with fewer than i + 1
    captions sits pass i out), each pass cut into full batches (its last incomplete batch
    dropped). This is Merkx & Frank's batching (caption2image ``minibatchers.py:70-94``,
    ``iterate_char_5fold``; the images shuffled once, ``range(0, len - B + 1, B)`` per pass).
    With Flickr8k's 5 captions an image, an epoch serves 5 × ⌊images / B⌋ batches.

    Args:
      pairs: the training split (an in-memory feature store).
      batch_size: B >= 2, images (and captions) per batch.
      seed: seed of the image order; each epoch draws a new order.
      epoch: an int64 ``tf.Variable`` with the 0-based epoch, read at each iteration's
        start: the order is then a pure function of ``(seed, epoch)`` (a resumed run
        replays it; see ``make_dataset``). ``None``: a seeded reshuffle per iteration.

    Returns:
      Dataset of dicts ``{"caption": string[B], "image_features": float32[B, d],
      "image_id": int64[B]}`` with a known cardinality (batches per epoch); ``image_id`` is
      the image's feature row.

    Raises:
      ValueError: ``batch_size`` < 2, a streaming feature store, or fewer than B images.
    """
    if batch_size < 2:
        raise ValueError(f"make_caption_pass_dataset: batch_size must be >= 2, got {batch_size}.")
    _check_grouped_arguments(pairs, batch_size, 1)
    table, counts, rows = caption_groups(pairs)
    num_images, width = table.shape
    if num_images < batch_size:
        raise ValueError(f"make_caption_pass_dataset: {num_images} image(s) < batch_size={batch_size} (no batch).")
    batches = sum(int((counts > i).sum()) // batch_size for i in range(width))
    table_t, counts_t = tf.constant(table), tf.constant(counts)
    captions = tf.constant(pairs.captions.astype(str))
    caption_rows = tf.constant(np.asarray(pairs.feature_rows, dtype=np.int64))
    features = tf.constant(pairs.features)

    def passes(order):
        # order: int64 [num_images]; per pass, the images that have a caption i, cut to
        # whole batches, so that no batch straddles two passes.
        chosen = []
        for i in range(width):
            images = tf.boolean_mask(order, tf.gather(counts_t, order) > i)
            keep = (tf.size(images) // batch_size) * batch_size
            chosen.append(tf.gather(tf.gather(table_t, images[:keep]), i, axis=1))
        return tf.data.Dataset.from_tensor_slices(tf.concat(chosen, 0))

    if epoch is not None:
        def epoch_order(e):
            key = tf.stack([tf.constant(seed, tf.int64), tf.cast(e, tf.int64)])
            return tf.random.experimental.stateless_shuffle(tf.range(num_images, dtype=tf.int64), seed=key)

        order = tf.data.Dataset.from_tensors(tf.constant(0, tf.int64)).map(lambda _: epoch_order(epoch.read_value()))
    else:
        order = tf.data.Dataset.range(num_images).shuffle(num_images, seed=seed, reshuffle_each_iteration=True).batch(
            num_images)
    chosen = order.flat_map(passes)

    def assemble(index):
        row = tf.gather(caption_rows, index)
        return {CAPTION_KEY: tf.gather(captions, index), FEATURES_KEY: tf.gather(features, row), IMAGE_ID_KEY: row}

    ds = chosen.batch(batch_size, drop_remainder=True).map(assemble, num_parallel_calls=tf.data.AUTOTUNE,
                                                           deterministic=True)
    return ds.apply(tf.data.experimental.assert_cardinality(batches)).prefetch(tf.data.AUTOTUNE)


def _check_grouped_arguments(pairs: CaptionPairs, images_per_batch: int, captions_per_image: int) -> None:
    """``make_grouped_dataset``'s argument checks (its ``Raises``, first part)."""
    if pairs.streamed:  # its rows stay on disk: no random access per image
        raise ValueError("make_grouped_dataset: the grouped sampler needs an in-memory (.npz) feature store; "
                         f"got {type(pairs.features).__name__} (a streaming store): use the random sampler.")
    if images_per_batch < 1:
        raise ValueError(f"make_grouped_dataset: images_per_batch must be >= 1, got {images_per_batch}.")
    if captions_per_image < 1:
        raise ValueError(
            f"make_grouped_dataset: captions_per_image must be >= 1, got {captions_per_image}."
        )


def _eligible_groups(pairs: CaptionPairs, images_per_batch: int, captions_per_image: int, drop_remainder: bool):
    """``caption_groups`` of the images with at least C captions (the others left out with a
    warning).

    Raises:
      ValueError: no image has C captions, or fewer than P do and ``drop_remainder``.
    """
    table, counts, rows = caption_groups(pairs)
    eligible = counts >= captions_per_image
    if not eligible.any():
        raise ValueError(
            f"make_grouped_dataset: no image has {captions_per_image} captions "
            f"(most captions per image: {int(counts.max()) if counts.size else 0})."
        )
    if not eligible.all():
        warnings.warn(
            f"make_grouped_dataset: left out {int((~eligible).sum())} image(s) with fewer than "
            f"{captions_per_image} captions.",
            GroundedTextWarning, stacklevel=3,
        )
    table, counts, rows = table[eligible], counts[eligible], rows[eligible]
    if drop_remainder and table.shape[0] < images_per_batch:
        raise ValueError(
            f"make_grouped_dataset: {table.shape[0]} eligible image(s) < images_per_batch={images_per_batch} "
            "with drop_remainder=True (no batch)."
        )
    return table, counts, rows


def _image_order(num_images: int, seed: int, shuffle: bool, epoch: tf.Variable | None) -> tf.data.Dataset:
    """One epoch of image indices 0..num_images-1: in order (``shuffle`` False), else shuffled
    and each paired with a stateless seed (int64 [2]) for its caption choice; with ``epoch``,
    both are a pure function of ``(seed, epoch)`` read at each iteration's start."""
    images = tf.data.Dataset.range(num_images)
    if shuffle and epoch is not None:
        def epoch_order(e):
            e = tf.cast(e, tf.int64)
            order = tf.random.experimental.stateless_shuffle(tf.range(num_images, dtype=tf.int64),
                                                             seed=tf.stack([tf.constant(seed, tf.int64), e]))
            keys = tf.random.stateless_uniform([num_images, 2], seed=tf.stack([tf.constant(seed + 1, tf.int64), e]),
                                               minval=None, maxval=None, dtype=tf.int64)
            return tf.data.Dataset.from_tensor_slices((order, keys))

        images = tf.data.Dataset.from_tensors(tf.constant(0, tf.int64)).map(
            lambda _: epoch.read_value()).flat_map(epoch_order).apply(
            tf.data.experimental.assert_cardinality(num_images))
    elif shuffle:
        images = images.shuffle(num_images, seed=seed, reshuffle_each_iteration=True)
        keys = tf.data.Dataset.random(seed=seed + 1, rerandomize_each_iteration=True)
        images = tf.data.Dataset.zip(images, keys.batch(2))
    return images
