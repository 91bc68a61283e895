"""A folder's photos through a model's image network at the network's speed: the ``features``
command's input pipeline, reused.

Reading and decoding a photo eagerly (``read_image``: 8 to 11 ms a JPEG on a CPU) cost about as
much as the network itself, and ran one photo after another before each network call. Here the
files are read, their headers probed, decoded (JPEG with the accurate integer DCT, as PIL decodes
it; TIFF by Pillow) and resized inside a ``tf.data`` graph, in a parallel map, batched and
prefetched while the network runs (``grounded_text.vision.extractor``'s ``_view_batches`` and
``_write_batches``, the pipeline of ``grounded-text features``): the same pixels, the same views,
the same features as ``encode_images``.

A photo that cannot be decoded drops out of the stream (``ignore_errors``); the photos missing at
the end are decoded again, one by one, for their reason (``_failures``), one line each.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from grounded_text.vision.crops import MAX_IMAGE_PIXELS, photo_files_dataset
from grounded_text.vision.extractor import _failures, _view_batches, _write_batches
from grounded_text.vision.folders import PhotoFile

__all__ = ["network_features"]


class _Batches:
    """The sink ``_write_batches`` appends to: hands each batch on, as photos and features."""

    def __init__(self, photos: list[PhotoFile], on_batch: Callable[[list[PhotoFile], np.ndarray], None]):
        self.by_rel = {p.rel: p for p in photos}
        self.on_batch = on_batch

    def append(self, ids: np.ndarray, features: np.ndarray) -> None:
        self.on_batch([self.by_rel[str(i)] for i in ids], features)


def network_features(side, folder: Path, photos: list[PhotoFile], batch_size: int,
                     on_batch: Callable[[list[PhotoFile], np.ndarray], None], progress=None,
                     max_pixels: int | None = MAX_IMAGE_PIXELS) -> list[tuple[str, str]]:
    """Runs the image network of ``side`` over ``photos``, batch by batch.

    Args:
      side: a model's ``grounded_text.serving.images.ImageSide`` (its network is built here).
      folder: the photo folder; ``photos`` are relative to it.
      photos: the photos to read.
      batch_size: photos per network call.
      on_batch: called with each batch, ``(photos, float32 [b, d] features)``, in the order the
        batches come (not the order of ``photos``: the decoding map runs out of order).
      progress: something with ``add(n)`` (a ``CountProgress``), or ``None``.
      max_pixels: the decompression-bomb guard's pixel limit.

    Returns:
      ``(relative path, reason)`` of the photos that could not be read (one line each, without
      the path).

    Raises:
      whatever ``on_batch`` raises (``KeyboardInterrupt`` included), after the batches before it.
    """
    if not photos:
        return []
    network = side.network()
    crops = int(side.record.get("crops", 1))
    size = network.input_size
    rels = [p.rel for p in photos]
    images = photo_files_dataset(rels, [Path(folder) / rel for rel in rels], max_pixels)
    ds = _view_batches(images, rels, size, crops, int(batch_size), max_pixels)
    written = _write_batches(ds, network, _Batches(photos, on_batch), size, crops, progress)
    return _failures(images, [rel for rel in rels if rel not in written], size, crops, max_pixels)
