"""The keys of a training batch (every dataset builder emits them; the trainer reads them).

Kept in a module of their own, with no imports, so that the in-memory path
(``data.pairs``), the grouped sampler (``data.sampler``) and the streaming store
(``data.streaming``) share them without importing each other.
"""

#: string [B]: the caption text.
CAPTION_KEY = "caption"
#: float32 [B, d]: the caption's image features.
FEATURES_KEY = "image_features"
#: int64 [B]: the image of each caption, as its row in the feature store (same id = same
#: image); the in-batch losses use it to drop false negatives (two captions of one image
#: are never a negative pair).
IMAGE_ID_KEY = "image_id"
