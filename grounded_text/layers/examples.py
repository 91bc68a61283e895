"""Each registered layer's small example: the constructor arguments and input batch that the
shared layer tests run it on.

Every Keras layer of the package registered for ``.keras`` files
(``@keras.saving.register_keras_serializable(package="grounded_text")``) has a classmethod
``example() -> LayerExample``. The layer tests find the layers in Keras' registry and run
each on its example (config round trip, ``.keras`` file, eager = ``tf.function``, a training
step, mixed precision), so a new layer is covered by declaring its example, with no test to
edit. The arguments are chosen away from the defaults, so that one missing from
``get_config`` changes a clone's outputs.

The batches below are shared by the examples: word ids with right padding and a row of
padding only, captions with an empty one and a long one, a padded sequence with its mask,
and image features.
"""

from __future__ import annotations

import dataclasses

import numpy as np

#: Captions of an example batch: an empty one and one longer than the others.
CAPTIONS = ("A dog runs on the beach .", "A dog jumps .", "Two kids play in the snow", "a cat", "",
            "a very long sentence about a dog that runs and jumps on the beach near two kids who play in the snow")


@dataclasses.dataclass(frozen=True)
class LayerExample:
    """A layer's example for the shared layer tests.

    Attributes:
      init_kwargs: the constructor arguments.
      input_data: a NumPy array, or a tuple of arrays passed positionally.
      call_kwargs: extra call arguments (not ``training``).
      output_dtype: the output dtype under the float32 policy.
      mixed_output_dtype: the output dtype under ``mixed_float16``, where it differs
        (the encoders promise float32 outputs; a block inside one may give float16).
      trainable: whether the layer has trainable weights (one training step must change
        them; if False it must have none).
      skip: why the shared tests cannot run the layer on its own (a file it must load, an
        input that is a list); empty when they can. The reason names the tests that cover it.
    """

    init_kwargs: dict
    input_data: object = None
    call_kwargs: dict = dataclasses.field(default_factory=dict)
    output_dtype: str = "float32"
    mixed_output_dtype: str | None = None
    trainable: bool = True
    skip: str = ""


def word_ids() -> np.ndarray:
    """int64 [3, 5] ids < 11, right padding (0), the last row one token.

    Example:
      >>> word_ids().shape, int(word_ids().max())
      ((3, 5), 10)
    """
    return np.array([[3, 4, 5, 0, 0], [6, 7, 8, 9, 10], [3, 0, 0, 0, 0]], dtype=np.int64)


def sequence_and_mask() -> tuple[np.ndarray, np.ndarray]:
    """float32 [3, 5, 3] states and their bool [3, 5] mask (lengths 5, 2, 0).

    Example:
      >>> h, mask = sequence_and_mask()
      >>> h.shape, mask.sum(axis=1).tolist()
      ((3, 5, 3), [5, 2, 0])
    """
    h = np.random.default_rng(2).normal(size=(3, 5, 3)).astype(np.float32)
    return h, np.arange(5)[None, :] < np.array([5, 2, 0])[:, None]


def image_features(dim: int = 6) -> np.ndarray:
    """float32 [3, dim] features.

    Example:
      >>> image_features().shape
      (3, 6)
    """
    return np.random.default_rng(3).normal(size=(3, dim)).astype(np.float32)


def captions() -> np.ndarray:
    """``CAPTIONS`` as a NumPy array of ``str`` [6].

    Example:
      >>> captions()[4] == ""
      True
    """
    return np.array(CAPTIONS)
