"""Reports as text: the one number formatter, table builder and report writer (``tables``) and
the one registry of named figures and how to read them from a results node (``figures``). Used by
the evaluation's report and the experiments layer alike; no TensorFlow."""
