"""``python -m grounded_text.data.download``: the same command as ``grounded-text data download``."""

from grounded_text.data.download.cli import main

raise SystemExit(main())
