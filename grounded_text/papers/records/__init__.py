"""The preset records as data, one module per paper (``grounded_text.papers.presets`` lists
them in its registry, ``PRESETS``)."""
