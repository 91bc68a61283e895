"""What MTEB's encoder protocol adds to ``TextEncoder``: the texts of the ``DataLoader`` that MTEB
(2.x) hands ``encode``, and the model's description (``mteb_model_meta``). MTEB itself is the
``[mteb]`` extra, imported only when the description is asked for.

Example:
    >>> dataloader_texts(["a dog runs"])     # anything but a PyTorch DataLoader passes through
    ['a dog runs']
"""

from __future__ import annotations

from pathlib import Path

from grounded_text import __version__
from grounded_text.utils.extras import require

__all__ = ["dataloader_texts", "model_meta"]


def dataloader_texts(inputs):
    """The texts of MTEB's input (a PyTorch ``DataLoader`` of ``{"text": [...]}`` batches), in
    order, as a list of str; any other input unchanged.

    Raises:
      TypeError: a batch that is not a dict with a ``"text"`` key.

    Example:
      >>> dataloader_texts(("a", "b"))
      ('a', 'b')
    """
    if not type(inputs).__module__.startswith("torch."):
        return inputs
    texts: list = []
    for batch in inputs:
        if not isinstance(batch, dict) or "text" not in batch:
            keys = f" with keys {sorted(batch)}" if isinstance(batch, dict) else ""
            raise TypeError(f"encode: a DataLoader of {{'text': [...]}} batches is expected (MTEB's), got a batch "
                            f"of {type(batch).__name__}{keys}.")
        texts.extend(batch["text"])
    return texts


def model_meta(encoder):
    """MTEB's description of ``encoder`` (a ``TextEncoder``: ``mteb.models.ModelMeta``): the
    name ``grounded_text/<model>`` (the folder above ``export/``, else the folder itself), the
    package version as revision, the width, cosine similarity.

    Raises:
      MissingExtraError (an ImportError): mteb is not installed
        (``pip install 'grounded_text[mteb]'``).

    Example:
      >>> model_meta(gt.load("vete_bow_flickr8k")).name    # doctest: +SKIP
      'grounded_text/vete_bow_flickr8k'
    """
    meta = require("mteb.models", "MTEB's model description").ModelMeta
    path = Path(str(encoder.handle))
    name = path.parent.name if path.name == "export" else path.name
    return meta.create_empty({"name": f"grounded_text/{name}", "revision": __version__, "embed_dim": encoder.dim,
                              "framework": ["TensorFlow"], "similarity_fn_name": "cosine", "modalities": ["text"]})
