"""Small infrastructure: crash-safe writes (``durable``), private-API shims (``compat``),
the rule for missing extras (``extras``), lazily imported names (``lazy``) and the progress
displays of long sections (``progress``)."""
