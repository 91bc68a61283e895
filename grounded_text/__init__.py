"""grounded_text: visually grounded sentence embeddings in Keras 3 / TensorFlow.

Text encoders learn from image–caption pairs to agree with pretrained-CNN image
features, then serve as general sentence encoders. See README.md.

The Python API, each name loaded from its own module on first use, so that ``import
grounded_text`` and ``gt.models()`` import no TensorFlow::

    import grounded_text as gt
    enc = gt.load("vete_bow_flickr8k")          # a shipped model (gt.models()), or an export folder
    enc.encode(["a dog runs", "a cat sleeps"])   # float32 [2, N]
    gt.ImageIndex("photos", enc).search("a dog runs on the grass")   # the best photos, with their cosine
"""

import sys
import types

from grounded_text.utils.lazy import lazy_getattr
from grounded_text.utils.quiet import quiet_startup

# TensorFlow's C++ start-up lines (cuInit, CPU-instruction notices) and the pkg_resources
# warning are left out, unless GROUNDED_TEXT_VERBOSE=1 (grounded_text/utils/quiet.py).
quiet_startup()

__version__ = "0.2.0"

# Each public name → the module that defines it (the package's only lazy door: the modules
# themselves import what they need at their top).
_API = {"TextEncoder": "serving.encoder", "ImageIndex": "photos.index", "load": "serving.loader",
        "models": "api", "Run": "api", "train": "api", "evaluate": "api", "presets": "api"}
__all__ = [*_API, "__version__"]
__getattr__ = lazy_getattr(__name__, _API)


def __dir__():
    return sorted({*globals(), *_API})


class _Package(types.ModuleType):
    """Keeps the API's functions ``grounded_text.train`` and ``grounded_text.evaluate``: importing
    the command modules of the same names (``python -m grounded_text.train``, ``from
    grounded_text.train import main``) would otherwise bind the module over the function. The
    modules stay in ``sys.modules``."""

    def __setattr__(self, name, value):
        if name in _API and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def _register_keras_objects(_keras=None) -> None:
    """Registers the package's Keras layers, so that ``keras.saving.load_model`` finds them in a
    fresh process after ``import grounded_text`` (Keras looks custom classes up by name)."""
    import grounded_text.layers.hub_text_embedding  # noqa: F401  (its decorator registers it)


# Run once Keras is imported (at once if it already is): the package itself stays TF-free.
import wrapt  # noqa: E402  (TensorFlow's own dependency; imports nothing heavy)

wrapt.register_post_import_hook(_register_keras_objects, "keras")
