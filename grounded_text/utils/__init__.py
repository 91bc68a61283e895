"""Small infrastructure: crash-safe writes (``durable``), private-API shims (``compat``),
the rule for missing extras (``extras``) and lazily imported names (``lazy``)."""
