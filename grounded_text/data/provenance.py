"""What made a feature store: network, weights (a digest, or "random" with its seed), crops,
image size and preprocessing, recorded with the rows and checked before rows are resumed or
appended, so that rows of two settings are never mixed in one store without a word.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

#: The ``.npz`` member (a 0-d unicode array holding JSON) and the manifest key that record
#: what made a feature store: network, weights, crops, image size, preprocessing.
PROVENANCE_KEY = "provenance"
#: The fields compared on resume/append, in the order messages name them.
PROVENANCE_FIELDS = ("cnn", "weights", "crops", "image_size", "preprocessing")


def describe_provenance(provenance: dict | None) -> str:
    """``cnn=... weights=... crops=... image_size=... preprocessing=...`` (one line)."""
    if not provenance:
        return "nothing recorded"
    return " ".join(f"{k}={provenance.get(k)}" for k in PROVENANCE_FIELDS)


def check_provenance(recorded: dict | None, wanted: dict | None, where) -> None:
    """Refuses to add rows made one way to a store made another way.

    Args:
      recorded: what the store (or its part files) records; ``None``: a store written before
        stores recorded it (accepted: nothing to compare).
      wanted: what the new rows are made with (``None``: not known, accepted).
      where: the store, for the message.

    Raises:
      ValueError: one line naming the fields that differ, the store's settings and the new
        ones: rows of two networks, weights, crop schemes or preprocessings would otherwise
        be mixed in one store without a word.
    """
    if not recorded or not wanted:
        return
    differ = [k for k in PROVENANCE_FIELDS if recorded.get(k) != wanted.get(k)]
    if differ:
        raise ValueError(f"{where}: the store was made with {describe_provenance(recorded)}; these rows would be "
                         f"made with {describe_provenance(wanted)} ({', '.join(differ)} differ). Use the store's "
                         "settings to resume it, or write to a new --out.")


def read_npz_provenance(path: str | Path) -> dict | None:
    """The provenance an ``.npz`` store or part records, or ``None`` (none recorded)."""
    with np.load(path, allow_pickle=False) as archive:
        if PROVENANCE_KEY not in archive.files:
            return None
        try:
            return json.loads(str(archive[PROVENANCE_KEY]))
        except (ValueError, TypeError) as e:
            raise ValueError(f"{path}: unreadable '{PROVENANCE_KEY}' member ({e}).") from None

