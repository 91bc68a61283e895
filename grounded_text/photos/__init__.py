"""A folder of photos searched by a sentence: the photo index (``index``: ``gt.ImageIndex``, kept
on disk, incremental and resumable; its files are ``table``'s) and the contact sheet of the
results (``contact_sheet``). ``grounded-text search`` is the command; photos reach a model's
space through its image side (``grounded_text.serving.images``)."""
