"""A folder of photos searched by a sentence: the photo index (``index``: ``gt.ImageIndex``, kept
on disk, incremental and resumable; its files are ``table``'s) and the contact sheet of the
results (``contact_sheet``). ``grounded-text search`` is the command; its queries (a sentence,
a photo, a vector, a weighted mix) are ``queries``'. ``grounded-text annotate`` (``annotate``)
gives each photo its best sentences of a file, whose vectors ``sentences`` keeps. Photos reach
a model's space through its image side (``grounded_text.serving.images``)."""
