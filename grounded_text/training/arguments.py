"""The checks of ``train``'s arguments, made before the run directory is touched: a bad one
never costs the old run (``grounded_text.training.trainer.train`` calls them first)."""

from __future__ import annotations

import os
from pathlib import Path

import keras

from grounded_text.config.schema import ExperimentConfig
from grounded_text.data.paths import resolve_data_dir
from grounded_text.data.sts import sick_path

#: Keras ``fit``'s verbosities.
VERBOSITIES = ("auto", 0, 1, 2)


def check_callbacks(callbacks) -> tuple:
    """The user's ``callbacks`` as a tuple, each checked to be a Keras callback.

    Args:
      callbacks: a list or tuple (any iterable but a ``str``/``bytes``/``dict``) of
        ``keras.callbacks.Callback`` instances; ``None`` = none.

    Returns:
      A tuple of the callbacks.

    Raises:
      TypeError: ``callbacks`` is a string, a mapping, a single callback or not iterable,
        or an entry is not a ``keras.callbacks.Callback`` (the message gives its index and
        type), so nothing is built or deleted for a run that could not start.
    """
    if callbacks is None:
        return ()
    if isinstance(callbacks, keras.callbacks.Callback):
        raise TypeError("train: callbacks must be a list of keras.callbacks.Callback, got one callback "
                        f"({type(callbacks).__name__}); pass [it].")
    if isinstance(callbacks, (str, bytes, dict)) or not hasattr(callbacks, "__iter__"):
        raise TypeError(f"train: callbacks must be a list of keras.callbacks.Callback, got {type(callbacks).__name__} "
                        f"{callbacks!r:.60}.")
    items = tuple(callbacks)
    for i, cb in enumerate(items):
        if not isinstance(cb, keras.callbacks.Callback):
            raise TypeError(f"train: callbacks[{i}] is a {type(cb).__name__}, not a keras.callbacks.Callback.")
    return items


def check_verbose(verbose) -> None:
    """Raises ``ValueError`` unless ``verbose`` is one of Keras ``fit``'s ``"auto"``, 0, 1, 2."""
    if isinstance(verbose, bool) or verbose not in VERBOSITIES:
        raise ValueError(f"train: verbose must be one of 'auto', 0, 1, 2, got {verbose!r}.")


def _data_folders(data_dir, config: ExperimentConfig) -> list[Path]:
    """The folders the run reads its data from: the data root (when one is set) and a
    ``dataset`` folder (a prepared or TFDS export folder)."""
    folders = []
    chosen = data_dir if data_dir not in (None, "") else os.environ.get("GROUNDED_TEXT_DATA")
    if chosen:
        folders.append(Path(chosen).expanduser())
    dataset = config.data.dataset
    if dataset and dataset != "flickr8k":
        folders.append(Path(dataset).expanduser())
    return [f for f in folders if f.is_dir()]


def check_output_dir(output_dir, data_dir, config: ExperimentConfig) -> None:
    """Refuses an ``output_dir`` that is the data root (or a dataset folder), lies inside it, or
    holds it: a run (and ``--overwrite``) would write into, or delete from, the data.

    Raises:
      ValueError: one line naming both folders.
    """
    out = Path(output_dir).expanduser().resolve()
    for folder in _data_folders(data_dir, config):
        data = folder.resolve()
        if out == data or out.is_relative_to(data) or data.is_relative_to(out):
            how = "is" if out == data else "is inside" if out.is_relative_to(data) else "contains"
            raise ValueError(f"--output-dir {str(output_dir)!r} {how} the data folder {str(folder)!r}; a run would "
                             "write into the data. Choose an --output-dir outside it.")


def check_selection_data(config: ExperimentConfig, data_dir) -> None:
    """Refuses a selection whose validation data is missing: ``select_on="sick_val"`` needs the
    SICK validation split ``sts/SICK/SICK_trial.txt`` (Bordes et al. 2019 §4.4) in the data folder.

    Raises:
      ValueError: ``select_on="sick_val"`` and no such file (names the path expected).
    """
    if config.train.select_on != "sick_val":
        return

    path = sick_path(resolve_data_dir(data_dir) / "sts", "trial")
    if not path.is_file():
        raise ValueError(f"select_on='sick_val' needs the SICK validation split: no {str(path)!r} in the data "
                         "folder. Add the SICK 2014 release there or choose another --select-on.")
