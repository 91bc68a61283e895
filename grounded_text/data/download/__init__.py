"""Download the public evaluation and caption data into the layout the package reads.

Usage::

    grounded-text data download sts sick --data-dir DATA      # or: python -m grounded_text.data.download
    grounded-text data download flickr8k --data-dir DATA      # captions, splits and photos (~1.1 GB)
    grounded-text data download all --data-dir DATA
    grounded-text data list

Each dataset comes from its official public location (the URLs SentEval's
``data/downstream/get_transfer_data.bash`` uses for STS 2012-2016, SICK, MR, CR, SUBJ,
MPQA, TREC, MRPC and SST-2; the STS wiki for STS-B; for Flickr8k, the widely used public
copies of the original release archives ``Flickr8k_text.zip`` and ``Flickr8k_Dataset.zip``
on the ``jbrownlee/Datasets`` GitHub release, since the authors' own download form is
gone), and is unpacked into the layout of the data README::

    DATA/sts/STS1x-en-test/, DATA/sts/STSBenchmark/, DATA/sts/SICK/
    DATA/senteval/{MR,CR,SUBJ,MPQA,TREC,MRPC,SST/binary}/
    DATA/flickr8k/Flickr8k_text/, DATA/flickr8k/images/*.jpg

Files are the releases as published (SentEval also tokenises them; the package's readers
take the raw text). The photo archive is large (about 1.1 GB to download, as much again
unpacked, 8,091 JPEGs); ``data list`` states each dataset's download size. The image
features (``flickr8k/features/*.npz``) are not downloadable: ``grounded-text features``
computes them from the photos.

How a download behaves:

* **Resumable, retried**: bytes go to ``DATA/.downloads/<file>.part``; a transfer that
  breaks off, or an HTTP 408/429/5xx answer, is retried up to ``RETRIES`` times with
  exponential back-off (resuming with an HTTP ``Range`` request, or starting over when
  the server ignores the range). An HTTP 404, a name that does not resolve or a failed
  check is never retried. Progress is shown by default (``--quiet`` turns it off): a
  ``tqdm.auto`` bar in a terminal or a notebook, a plain line every few seconds in a log.
* **Not an error page**: a response served as ``text/html``, a file that starts like an
  HTML page, an archive without its format's signature, or fewer bytes than the
  ``Content-Length`` (or the registry's size) is rejected before it is checked further.
* **Checked**: a file whose registry entry has a ``sha256`` (pinned from a published
  checksum list) must match it (pooch's ``known_hash`` check, as the file is fetched).
  Every archive must also have the expected *structure*
  (``verify_structure``): the member files the readers need, each with its published
  number of non-blank lines (within ``ROW_TOLERANCE``), STS input and gold files that
  pair line by line with gold scores in 0..5. An archive whose digest is not pinned is
  trusted only once it passes that check: its digest is then recorded in
  ``DATA/.downloads/checksums.json`` and later downloads into the same data directory
  must match it. A file that fails any check is deleted and never recorded. When the
  upstream file changes, ``--force`` downloads it again and replaces the recorded digest
  if the new file passes the structure check.
* **Checked against the release**: every file a dataset unpacks to must have the SHA-256 of
  the original release's file, listed in the committed ``manifest.json`` (computed from
  copies of the releases), so a tampered archive fails on first use, naming the file, before
  anything is installed or recorded. Where the manifest is complete, a file it does not list
  (but a readme or licence) is refused too. Datasets it does not cover (STS 2014/2015, the
  Flickr8k photos) rely on the checks above. A sample (below) is not checked against it.
* **Bounded unpacking**: an archive may hold at most ``max_members`` entries (default
  ``MAX_MEMBERS``) and unpack to at most ``max_unpacked`` bytes (default
  ``MAX_UNPACKED_BYTES``, 128 MiB; the files the readers use from any one text archive take
  under 10 MB; the Flickr8k photo archive has its own, larger caps); both are checked on the archive's headers before
  anything is extracted and on the bytes actually read while extracting. Members with an
  absolute path or ``..``, links and device files are refused.
* **Atomic**: a dataset is unpacked into a temporary folder beside its destination and
  renamed into place, so an interrupted run never leaves a half-written dataset. Folders
  get the usual permissions (``0o777`` less the umask), so other users of a shared data
  directory can read them. A destination that exists is kept (``--force`` replaces it).
* **Mirrors**: ``--mirror URL`` or ``$GROUNDED_TEXT_DOWNLOAD_BASE`` fetches every file
  as ``URL/<file name>`` instead (a folder holding the archives under their registry
  file names), e.g. a lab cache or the tests' local server. The same checks apply. A
  ``user:password@`` in the URL is sent as HTTP Basic authorisation and shown as ``***``.
* **One at a time**: a second download into the same data directory waits for the first
  (a lock file in ``DATA/.downloads``), then keeps what the first installed.
* **Samples**: a mirror may serve a *sample* of a release (fewer lines or photos, e.g. a
  test fixture or a small lab copy). It is accepted only with ``--sample`` or
  ``$GROUNDED_TEXT_DOWNLOAD_SAMPLE=1``: every check stays, except that member line and
  photo counts may be lower than published (at least one each, never more). A sample's
  digest is not recorded, and the dataset's ``.download.json`` says ``"sample": true``.
* **Offline**: an unreachable host fails within a few seconds with
  ``error: cannot reach <host> ...`` (exit 2), with no retries.

The package's modules: ``catalogue`` (the datasets as data, and ``manifest.json``, the
SHA-256 of every unpacked file of each release), ``fetching`` (the transfer, on pooch's
``retrieve`` and ``HTTPDownloader``, with the checks above on top), ``verifying``, ``unpacking``,
``installing`` and ``cli``. Their public names are importable from here.
"""

from __future__ import annotations

from grounded_text.data.download.catalogue import (
    CHECKSUMS_FILE,
    DATASETS,
    DOWNLOADS_DIR,
    GROUPS,
    MANIFEST_FILE,
    MARKER_FILE,
    MAX_MEMBERS,
    MAX_UNPACKED_BYTES,
    MIRROR_ENV_VAR,
    SAMPLE_ENV_VAR,
    Dataset,
    DownloadError,
    Remote,
    expand_names,
    format_list,
)
from grounded_text.data.download.cli import main, parse_args
from grounded_text.data.download.fetching import (
    CONNECT_TIMEOUT_S,
    READ_TIMEOUT_S,
    RETRIES,
    RETRY_BACKOFF_S,
    fetch,
    redact,
)
from grounded_text.data.download.installing import download, install
from grounded_text.data.download.verifying import ROW_TOLERANCE, check_manifest, sha256_of, verify, verify_structure

__all__ = [
    "CHECKSUMS_FILE", "CONNECT_TIMEOUT_S", "DATASETS", "DOWNLOADS_DIR", "GROUPS", "MANIFEST_FILE", "MARKER_FILE",
    "MAX_MEMBERS", "MAX_UNPACKED_BYTES", "MIRROR_ENV_VAR", "READ_TIMEOUT_S", "RETRIES", "RETRY_BACKOFF_S",
    "ROW_TOLERANCE", "SAMPLE_ENV_VAR", "Dataset", "DownloadError", "Remote", "check_manifest", "download",
    "expand_names", "fetch", "format_list", "install", "main", "parse_args", "redact", "sha256_of", "verify",
    "verify_structure",
]
