"""The data fingerprint of a run: what it trained on, so that ``--resume`` on other data is
refused naming what differs (``check_data``).

The run state records (``data_fingerprint``) the feature file's SHA-256 (streamed; files above
``FULL_HASH_LIMIT`` bytes: their size and the SHA-256 of ``SAMPLE_BLOCKS`` evenly spaced 1 MiB
blocks), the train/dev image ids and captions in order, the vocabulary and the validation files.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from grounded_text.training.run_errors import RunDirError

# Feature files up to this size are hashed whole (about 0.1 s for Flickr8k's 41 MB); larger ones
# by their size and SAMPLE_BLOCKS blocks of 1 MiB (a permutation of rows changes them too).
FULL_HASH_LIMIT = 1 << 30
SAMPLE_BLOCKS = 64


def file_digest(path: str | Path) -> str:
    """SHA-256 of a file (streamed), or, above ``FULL_HASH_LIMIT`` bytes, ``"size:<n>:sample:"``
    and the SHA-256 of ``SAMPLE_BLOCKS`` evenly spaced 1 MiB blocks. A folder (a streaming
    store): the digest of its files' relative names and digests, in sorted order."""
    path = Path(path)
    if path.is_dir():
        h = hashlib.sha256()
        for f in sorted(p for p in path.rglob("*") if p.is_file()):
            h.update(f"{f.relative_to(path).as_posix()}\0{file_digest(f)}\n".encode("utf-8"))
        return "dir:" + h.hexdigest()
    size = path.stat().st_size
    h = hashlib.sha256()
    with open(path, "rb") as f:
        if size <= FULL_HASH_LIMIT:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
            return h.hexdigest()
        for i in range(SAMPLE_BLOCKS):
            f.seek((size - (1 << 20)) * i // (SAMPLE_BLOCKS - 1))
            h.update(f.read(1 << 20))
    return f"size:{size}:sample:{h.hexdigest()}"


def _strings_digest(values) -> str:
    h = hashlib.sha256()
    for v in values:
        h.update(str(v).encode("utf-8") + b"\0")
    return h.hexdigest()


def data_fingerprint(feature_path, train_pairs, dev_pairs, vocabulary, validation=()) -> dict:
    """What a run trains on, for ``check_data``.

    Args:
      feature_path: the feature file (or store folder); None when the store has no path.
      train_pairs, dev_pairs: ``CaptionPairs`` used (slices applied).
      vocabulary: the word vocabulary (list of str).
      validation: the files or folders the run validates on each epoch (the STS16 folder, the
        SICK validation split...; ``trainer.validation_files``).

    Returns:
      ``{"feature_file": digest or None, "split_ids": sha256, "vocabulary": sha256,
      "validation": sha256}``; ``split_ids`` covers the train and dev image ids and captions,
      in order; ``validation`` every validation file's name (within its folder) and content.
    """
    split = hashlib.sha256()
    for pairs in (train_pairs, dev_pairs):
        split.update(_strings_digest(pairs.image_ids.tolist()).encode())
        split.update(_strings_digest(pairs.captions.tolist()).encode())
    features = None
    if feature_path is not None and Path(feature_path).exists():
        features = file_digest(feature_path)
    checked = _strings_digest(f"{Path(p).name}\0{file_digest(p)}" for p in validation)
    return {"feature_file": features, "split_ids": split.hexdigest(), "vocabulary": _strings_digest(vocabulary),
            "validation": checked}


_FINGERPRINT_NAMES = {"feature_file": "feature file", "split_ids": "split ids (train/dev image ids and captions)",
                      "vocabulary": "vocabulary",
                      "validation": "validation data (the STS or SICK sets scored each epoch, gold scores included)"}


def check_data(resume_state: dict | None, setup, validation=()) -> dict:
    """The data fingerprint of ``setup`` (a ``TrainingSetup``: ``flickr.store.path``,
    ``train_pairs``, ``dev_pairs``, ``vocabulary``) and of the ``validation`` files, checked
    against the interrupted run's.

    Call it before anything is written to the run directory.

    Returns:
      the fingerprint (give it to ``RunTracker(data_fingerprint=...)``).

    Raises:
      RunDirError: ``resume_state`` records another fingerprint; the message names what
        differs (feature file / split ids / vocabulary / validation data). A state written
        before a part was fingerprinted is not checked on that part.
    """
    store = getattr(setup.flickr, "store", None)
    fingerprint = data_fingerprint(getattr(store, "path", None), setup.train_pairs, setup.dev_pairs,
                                   setup.vocabulary, validation)
    old = (resume_state or {}).get("data")
    if old:  # states written before fingerprints have none
        differ = [_FINGERPRINT_NAMES[k] for k in _FINGERPRINT_NAMES if k in old and old[k] != fingerprint[k]]
        if differ:
            raise RunDirError(f"--resume: the data differ from the interrupted run's ({', '.join(differ)}); pass "
                              "the same --data-dir and data flags as that run, or --overwrite to start over.")
    return fingerprint
