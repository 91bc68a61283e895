"""Serving a trained model: its exports and the clients that load them.

``export`` writes the text and image towers as TF Hub SavedModels (``integrity`` records their
files, ``model_card`` describes them); ``loader`` loads a text tower (``grounded_text.load``) into
the text client ``encoder.TextEncoder``, whose photos go to its image side (``images``) and whose
MTEB additions are ``mteb_glue``'s (its cosines are ``grounded_text.utils.similarity``'s)."""
