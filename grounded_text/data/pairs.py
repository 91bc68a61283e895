"""Image–caption pairs: captions joined to feature rows by image id, and tf.data input.

The join is by id, never by position, so a feature file in any row order pairs
correctly. Captions whose image has no feature row (the official release's stray
``2258277193_586949ec62.jpg.1`` id) are dropped with a counted warning.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections import Counter
from pathlib import Path

import numpy as np
import tensorflow as tf

from grounded_text.data.features import FeatureStore, open_feature_store, resolve_features_path
from grounded_text.data.flickr8k import (
    SPLIT_FILES,
    SPLITS,
    TOKEN_FILE,
    Caption,
    flickr8k_text_dir,
    read_flickr8k,
    read_split_files,
)
from grounded_text.data.keys import CAPTION_KEY, FEATURES_KEY, IMAGE_ID_KEY  # noqa: F401 (re-exported)
from grounded_text.data.streaming import make_streaming_dataset
from grounded_text.utils.quiet import GroundedTextWarning


@dataclasses.dataclass(frozen=True)
class CaptionPairs:
    """Captions of one split, each with the feature row of its image.

    Attributes:
      captions: [m] ``str`` array of raw captions.
      image_ids: [m] ``str`` array, the image of each caption.
      feature_rows: [m] ``int64`` array, row of ``features`` for each caption.
      features: [n, d] ``float32`` feature matrix (shared, not copied per caption), or a
        streaming store (``streamed``), whose rows stay on disk.
    """

    captions: np.ndarray
    image_ids: np.ndarray
    feature_rows: np.ndarray
    features: np.ndarray

    def __len__(self) -> int:
        return int(self.captions.shape[0])

    @property
    def streamed(self) -> bool:
        """True when ``features`` is a streaming store (rows read from disk by ``tf.data``)."""
        return bool(getattr(self.features, "streamed", False))

    @property
    def num_images(self) -> int:
        return len(set(self.image_ids.tolist()))

    def subset(self, mask_or_index) -> "CaptionPairs":
        return CaptionPairs(
            self.captions[mask_or_index],
            self.image_ids[mask_or_index],
            self.feature_rows[mask_or_index],
            self.features,
        )

    def first_images(self, num_images: int) -> "CaptionPairs":
        """Keeps the captions of the first ``num_images`` distinct images (a data slice)."""
        keep = set(list(dict.fromkeys(self.image_ids.tolist()))[:num_images])
        return self.subset(np.array([i in keep for i in self.image_ids.tolist()], dtype=bool))

    def one_caption_per_image(self, seed: int) -> "CaptionPairs":
        """Keeps one caption per image, chosen uniformly with ``seed`` (VETE §4.1).

        One caption per image keeps the image from acting as a bridge between
        paraphrases: two captions of one photo are never both trained towards it.
        The choice is fixed for the whole training run (not resampled per epoch).
        """
        rng = np.random.default_rng(seed)
        groups: dict[str, list[int]] = {}
        for i, image_id in enumerate(self.image_ids.tolist()):
            groups.setdefault(image_id, []).append(i)
        chosen = [rows[int(rng.integers(len(rows)))] for rows in groups.values()]
        return self.subset(np.array(sorted(chosen), dtype=np.int64))

    def image_features(self) -> np.ndarray:
        """[m, d] float32 features, one row per caption (materialised)."""
        return self.features[self.feature_rows]


@dataclasses.dataclass(frozen=True)
class SplitPairs:
    """A captioned dataset's splits (Flickr8k, a prepared COCO / Flickr30k folder or a TFDS
    export) joined to one feature store.

    Attributes:
      splits: ``{"train"|"dev"|"test": CaptionPairs}``.
      store: the ``FeatureStore`` used.
      num_images_with_features: distinct captioned images that have a feature row.
      dropped_captions: captions dropped because their image has no features.
      dropped_image_ids: those images' ids.
    """

    splits: dict
    store: FeatureStore
    num_images_with_features: int
    dropped_captions: int
    dropped_image_ids: tuple
    #: split → captions the source assigns to it, before the join to the features.
    listed_captions: dict = dataclasses.field(default_factory=dict)
    #: split → what defines it (``{"file": path, "images": n listed}`` for Flickr8k's split
    #: files; ``{"file": path}`` for a prepared or TFDS folder), for error messages.
    sources: dict = dataclasses.field(default_factory=dict)

    def describe_split(self, split: str) -> str:
        """Why ``split`` holds what it holds, for an error about an empty or short split: the
        file that defines it and whether it lists no image, images with no caption, or
        captions whose images have no feature row."""
        source = self.sources.get(split, {})
        where = source.get("file") or "the dataset"
        listed, kept = self.listed_captions.get(split, 0), len(self.splits.get(split, ()))
        if source.get("images") == 0:
            return f"the {split} split file {where} lists no image"
        if listed == 0:
            images = f" {source['images']} image(s), but" if source.get("images") else ""
            captions = f" in {source['captions']}" if source.get("captions") else ""
            return f"the {split} split ({where}) lists{images} no image with a caption{captions}"
        if kept == 0:
            return (f"none of the {listed} caption(s) of the {split} split ({where}) has an image with a row in "
                    f"{self.store.path or 'the feature store'}")
        return f"the {split} split ({where}) has {kept} caption(s) with image features (of {listed} listed)"


def join_captions(captions: list[Caption], store: FeatureStore) -> SplitPairs:
    """Joins captions to feature rows by image id; see module docstring."""
    row_of = store.index()
    dropped = Counter(c.image_id for c in captions if c.image_id not in row_of)
    if dropped:
        warnings.warn(
            f"Dropped {sum(dropped.values())} caption(s) of {len(dropped)} image id(s) "
            f"with no row in {store.path or 'the feature store'}: "
            f"{sorted(dropped)[:5]}",
            GroundedTextWarning, stacklevel=2,
        )
    kept = [c for c in captions if c.image_id in row_of]
    splits = {}
    for split in SPLITS:
        rows = [c for c in kept if c.split == split]
        splits[split] = CaptionPairs(
            captions=np.array([c.text for c in rows], dtype=object).astype(str),
            image_ids=np.array([c.image_id for c in rows], dtype=object).astype(str),
            feature_rows=np.array([row_of[c.image_id] for c in rows], dtype=np.int64),
            features=store.features,
        )
    listed = Counter(c.split for c in captions)
    return SplitPairs(
        splits=splits,
        store=store,
        num_images_with_features=len({c.image_id for c in kept}),
        dropped_captions=sum(dropped.values()),
        dropped_image_ids=tuple(sorted(dropped)),
        listed_captions={split: listed.get(split, 0) for split in SPLITS},
    )


def load_flickr8k_pairs(root: str | Path, features: str = "efficientnet_lite0") -> SplitPairs:
    """Reads Flickr8k captions and splits and joins them to a feature file.

    Args:
      root: the data root (``ROOT/flickr8k/...``).
      features: a feature file stem under ``ROOT/flickr8k/features``, an ``.npz``
        path, or a streaming store directory (rows then stay on disk).

    Returns:
      ``SplitPairs``; see ``join_captions``.
    """
    store = open_feature_store(resolve_features_path(root, features))
    pairs = join_captions(read_flickr8k(root), store)
    text_dir = flickr8k_text_dir(root)
    listed = Counter(read_split_files(text_dir).values())
    sources = {split: {"file": str(text_dir / SPLIT_FILES[split]), "images": listed.get(split, 0),
                       "captions": str(text_dir / TOKEN_FILE)} for split in SPLITS}
    return dataclasses.replace(pairs, sources=sources)


def make_dataset(
    pairs: CaptionPairs,
    batch_size: int,
    *,
    shuffle: bool = True,
    seed: int = 0,
    drop_remainder: bool = True,
    bucket_by_length: bool = False,
    bucket_pool: int = 64,
    epoch: tf.Variable | None = None,
) -> tf.data.Dataset:
    """A ``tf.data`` pipeline of caption/feature batches.

    Captions stay ``tf.string`` (tokenised by the model's own text layer). Features
    are gathered per batch from one in-graph copy, not duplicated per caption.

    Args:
      pairs: the split to serve.
      batch_size: B (>= 2 for the in-batch losses).
      shuffle: reshuffle every epoch with ``seed``.
      seed: shuffle seed.
      drop_remainder: drop the last short batch (training).
      bucket_by_length: batches of captions of similar length (in characters), so
        that a batch padded to its longest caption carries little padding (the RNN
        encoders' cost grows with the padded length). Each epoch, the shuffled
        pairs are cut into pools of ``bucket_pool`` batches, each pool is sorted by
        length and cut into batches, and the batches are shuffled. Every pair is
        still served once per epoch; negatives in a batch are then of similar length.
      bucket_pool: batches per sorting pool (>= 1).
      epoch: an int64 ``tf.Variable`` holding the 0-based epoch (set by the trainer at
        each epoch's start), read when an iteration starts: each epoch's order is then a
        pure function of ``(seed, epoch)``, so a run resumed at epoch e sees the batches
        the uninterrupted run saw. ``None``: a new order per iteration of the dataset
        (``rerandomize_each_iteration``), which depends on how often it was iterated.

    Returns:
      Dataset of dicts ``{"caption": string[B], "image_features": float32[B, d],
      "image_id": int64[B]}``; ``image_id`` is the caption's feature row (the
      image's index in ``pairs.features``), so two captions of one image carry the
      same id.

    Raises:
      ValueError: empty split or ``batch_size < 1``.

    Pairs joined to a streaming store (``grounded_text.data.streaming``) are
    served by ``make_streaming_dataset`` (same batches, rows streamed from disk).
    """
    if pairs.streamed:  # rows stay on disk
        return _streaming_dataset(pairs, batch_size, shuffle, seed, drop_remainder, bucket_by_length, epoch)
    if len(pairs) == 0:
        raise ValueError("make_dataset: the split has no caption/image pairs.")
    if batch_size < 1:
        raise ValueError(f"make_dataset: batch_size must be >= 1, got {batch_size}.")
    used = np.unique(pairs.feature_rows)
    remap = np.full(pairs.features.shape[0], -1, dtype=np.int64)
    remap[used] = np.arange(used.size)
    table = tf.constant(pairs.features[used])
    # Speed: the batches are gathered by index from in-graph copies, with one
    # permutation per epoch (vectorised: about half the cost of an element-wise
    # shuffle buffer over the 30k Flickr8k pairs; docs/performance.md).
    captions = tf.constant(pairs.captions.tolist(), tf.string)
    rows = tf.constant(remap[pairs.feature_rows])
    ids = tf.constant(pairs.feature_rows.astype(np.int64))
    n = len(pairs)
    num_batches = n // batch_size if drop_remainder else -(-n // batch_size)
    if bucket_by_length:
        if bucket_pool < 1:
            raise ValueError(f"make_dataset: bucket_pool must be >= 1, got {bucket_pool}.")
        lengths = np.fromiter((len(c) for c in pairs.captions.tolist()), dtype=np.int64, count=n)
        ds = _bucketed_orders(lengths, batch_size, num_batches, bucket_pool, seed, shuffle, epoch)
    else:
        ds = _epoch_orders(n, shuffle, seed, epoch).flat_map(lambda order: tf.data.Dataset.range(num_batches).map(
            lambda k: order[k * batch_size:(k + 1) * batch_size]))
    ds = ds.apply(tf.data.experimental.assert_cardinality(num_batches))
    ds = ds.map(
        lambda i: {CAPTION_KEY: tf.gather(captions, i), FEATURES_KEY: tf.gather(table, tf.gather(rows, i)),
                   IMAGE_ID_KEY: tf.gather(ids, i)},
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    )
    return ds.prefetch(tf.data.AUTOTUNE)


def _streaming_dataset(pairs: CaptionPairs, batch_size: int, shuffle: bool, seed: int, drop_remainder: bool,
                       bucket_by_length: bool, epoch: tf.Variable | None) -> tf.data.Dataset:
    """``make_dataset`` for pairs joined to a streaming store (``make_streaming_dataset``)."""
    if bucket_by_length:
        # The streaming store shuffles rows through a bounded buffer; sorting pools by
        # length would need the captions up front, which the store does not keep.
        warnings.warn("make_dataset: length bucketing is not available for a streaming feature store; "
                      "serving shuffled pairs.", GroundedTextWarning, stacklevel=3)
    return make_streaming_dataset(pairs, batch_size, shuffle=shuffle, seed=seed, drop_remainder=drop_remainder,
                                  epoch=epoch)


def _epoch_orders(n: int, shuffle: bool, seed: int, epoch: tf.Variable | None) -> tf.data.Dataset:
    """One element per iteration: the epoch's order of the n pairs (int64 [n]); see
    ``make_dataset``'s ``shuffle``, ``seed`` and ``epoch``."""
    if shuffle and epoch is not None:
        return tf.data.Dataset.from_tensors(tf.constant(seed, tf.int64)).map(
            lambda s: tf.random.experimental.stateless_shuffle(
                tf.range(n, dtype=tf.int64), seed=tf.stack([s, tf.cast(epoch.read_value(), tf.int64)])))
    if shuffle:
        seeds = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True).take(1)
        return seeds.map(lambda s: tf.random.experimental.stateless_shuffle(
            tf.range(n, dtype=tf.int64), seed=tf.stack([s, s // 2])))
    return tf.data.Dataset.from_tensors(tf.range(n, dtype=tf.int64))


def _bucketed_orders(lengths: np.ndarray, batch_size: int, num_batches: int, pool: int, seed: int,
                     shuffle: bool, epoch_var: tf.Variable | None = None) -> tf.data.Dataset:
    """Batches of pair indices (int64 [<= batch_size]) of similar caption lengths, a new
    arrangement each epoch (see ``make_dataset``'s ``bucket_by_length``; ``epoch_var``:
    its ``epoch``)."""
    n = lengths.size
    epoch = [0]

    def batches():
        if epoch_var is not None:
            rng = np.random.default_rng([seed, int(epoch_var.numpy())])
        else:
            rng = np.random.default_rng([seed, epoch[0]])
            epoch[0] += 1
        order = rng.permutation(n) if shuffle else np.arange(n)
        out = []
        step = pool * batch_size
        for start in range(0, n, step):
            chunk = order[start:start + step]
            chunk = chunk[np.argsort(lengths[chunk], kind="stable")]
            out += [chunk[k:k + batch_size] for k in range(0, chunk.size, batch_size)]
        full = [b for b in out if b.size == batch_size]
        short = [b for b in out if b.size < batch_size]
        if shuffle:
            full = [full[i] for i in rng.permutation(len(full))]
        kept = (full + short)[:num_batches]  # drop_remainder keeps the full batches only
        for b in kept:
            yield b.astype(np.int64)

    return tf.data.Dataset.from_generator(batches, output_signature=tf.TensorSpec([None], tf.int64))
