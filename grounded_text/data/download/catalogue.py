"""The catalogue of datasets, as data: each dataset's published files, where they unpack to,
what they must hold, and the caps and names the other download modules share.

``DATASETS`` (name → ``Dataset``) and ``GROUPS`` (a name for several datasets) are what
``grounded-text data download`` and ``data list`` read. The SHA-256 of every file a dataset
unpacks to, computed from the original releases, is the committed ``manifest.json`` beside
this module (``Dataset.manifest``; ``verifying.check_manifest``).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

MIRROR_ENV_VAR = "GROUNDED_TEXT_DOWNLOAD_BASE"
#: Set to 1 to accept a mirror's sample of a release (see the package docstring).
SAMPLE_ENV_VAR = "GROUNDED_TEXT_DOWNLOAD_SAMPLE"
DOWNLOADS_DIR = ".downloads"
CHECKSUMS_FILE = "checksums.json"
MARKER_FILE = ".download.json"
#: The SHA-256 of every unpacked file of each dataset (from the original releases).
MANIFEST_FILE = Path(__file__).with_name("manifest.json")
#: Default cap on the bytes one archive unpacks to (all members, wanted or not).
MAX_UNPACKED_BYTES = 128 << 20
#: Default cap on the number of entries of one archive.
MAX_MEMBERS = 10_000


class DownloadError(Exception):
    """A download, its check or its unpacking failed; the message names the file or host."""


@dataclasses.dataclass(frozen=True)
class Remote:
    """One published file.

    Attributes:
      url: its official location.
      filename: its name in the download cache and on a mirror (``MIRROR/filename``).
      kind: ``"zip"``, ``"tar.gz"`` or ``"file"`` (kept as is).
      sha256: the expected digest when a published one is known (pinned), else ``None``:
        the file is then trusted once ``verify_structure`` passes, and its digest is
        recorded in the data directory.
      size: the expected size in bytes, or ``None``.
      rows: ``(member, non-blank lines)`` the file must hold; ``member`` is the member's
        path or its trailing part (``"stsbenchmark/sts-test.csv"``, ``"SICK_train.txt"``;
        for ``kind="file"``, the file name).
      sts: for an STS test archive, ``(subset, scored pairs)``: each subset needs an input
        and a gold file of equal length; ``scored pairs`` 0 means any positive number.
      max_unpacked: cap on the bytes the archive unpacks to (and on its download).
      max_members: cap on the archive's entries (``None``: ``MAX_MEMBERS``).
      files: ``(pattern, count)``: the exact number of members whose path matches the ``fnmatch``
        pattern (e.g. ``"Flicker8k_Dataset/*.jpg"``); each ``.jpg``/``.jpeg`` member must
        also start with the JPEG signature.
      approx_bytes: the download's size in bytes, rounded, for ``list`` and the docs
        (``size`` is the exact one, when published).
    """

    url: str
    filename: str
    kind: str
    sha256: str | None = None
    size: int | None = None
    rows: tuple[tuple[str, int], ...] = ()
    sts: tuple[tuple[str, int], ...] = ()
    max_unpacked: int = MAX_UNPACKED_BYTES
    max_members: int | None = None
    files: tuple[tuple[str, int], ...] = ()
    approx_bytes: int | None = None


@dataclasses.dataclass(frozen=True)
class Dataset:
    """A dataset: its files and where their members go.

    Attributes:
      name: the CLI name.
      dest: destination folder, relative to the data directory.
      remotes: the files to fetch.
      members: ``fnmatch`` patterns on the archive member's file name; matching files
        are written to ``dest`` by file name (archive folders are dropped).
      folder: when set, only members whose parent folder is named so are taken (one
        archive holding several datasets, e.g. SentEval's ``datasmall_NB_ACL12.zip``).
      description: one line for ``list``.
      manifest: ``(file name, sha256)`` of every file the dataset unpacks to, from the
        original release (``manifest.json``); empty where no release copy was at hand to
        compute it (the structure checks and the recorded digests still apply).
      manifest_complete: the manifest lists every file the dataset installs (any other,
        but a readme or licence, is refused); else it lists the files the readers use
        (Flickr8k's text archive also holds annotations and a lemmatised token file).
    """

    name: str
    dest: str
    remotes: tuple[Remote, ...]
    members: tuple[str, ...] = ("*",)
    folder: str | None = None
    description: str = ""
    manifest: tuple[tuple[str, str], ...] = ()
    manifest_complete: bool = False


# Both hosts serve the same paths over https (the Hugging Face ``sick`` loader and
# sentence-transformers fetch them so); SentEval's script predates that.
_STS_WIKI = "https://ixa2.si.ehu.eus/stswiki/images/"
_SICK = "https://alt.qcri.org/semeval2014/task1/data/uploads/"
_SENTEVAL = "https://dl.fbaipublicfiles.com/senteval/senteval_data/"
_TREC = "https://cogcomp.seas.upenn.edu/Data/QA/QC/"
_SST2 = "https://raw.githubusercontent.com/PrincetonML/SIF/master/data/"
_FLICKR8K = "https://github.com/jbrownlee/Datasets/releases/download/Flickr8k/"

# Line counts (non-blank lines, header included) are the published sizes of each file,
# which the data README lists: SICK 4,500 / 500 / 4,927 pairs, STS-B 5,749 / 1,500 / 1,379,
# MR 5,331 + 5,331, CR 3,775, SUBJ 5,000 + 5,000, MPQA 10,606, TREC 5,452 / 500, MRPC 4,076 /
# 1,725 pairs, SST-2 67,349 / 872 / 1,821, Flickr8k 40,460 captions and 6,000 / 1,000 / 1,000
# split images. STS scored pairs per subset are those of the SemEval releases.
_BINCLASSIF = Remote(_SENTEVAL + "datasmall_NB_ACL12.zip", "datasmall_NB_ACL12.zip", "zip",
                     rows=(("rt10662/rt-polarity.pos", 5331), ("rt10662/rt-polarity.neg", 5331),
                           ("customerr/custrev.pos", 2405), ("customerr/custrev.neg", 1366),
                           ("subj/subj.objective", 5000), ("subj/subj.subjective", 5000),
                           ("mpqa/mpqa.pos", 3311), ("mpqa/mpqa.neg", 7292)))

_STS_SUBSETS = {
    2012: (("MSRpar", 750), ("MSRvid", 750), ("SMTeuroparl", 459), ("surprise.OnWN", 750),
           ("surprise.SMTnews", 399)),
    # SMT has a gold file but no input file (withheld by its licence).
    2013: (("FNWN", 189), ("OnWN", 561), ("headlines", 750)),
    2014: (("deft-forum", 0), ("deft-news", 0), ("headlines", 0), ("images", 0), ("OnWN", 0), ("tweet-news", 0)),
    2015: (("answers-forums", 0), ("answers-students", 0), ("belief", 0), ("headlines", 0), ("images", 0)),
    2016: (("answer-answer", 254), ("headlines", 249), ("plagiarism", 230), ("postediting", 244),
           ("question-question", 209)),
}


def _sts(year: int, path: str) -> Dataset:
    name = f"STS{year}-en-test.zip"
    return Dataset(f"sts{year % 100}", f"sts/STS{year % 100}-en-test",
                   (Remote(_STS_WIKI + path + name, name, "zip", sts=_STS_SUBSETS[year]),),
                   members=("STS*.txt", "*readme*", "*README*", "LICENSE*"),
                   description=f"SemEval STS {year} English test set (gold scores)")


def _binclassif(name: str, folder: str, files: tuple[str, ...], what: str) -> Dataset:
    return Dataset(name, f"senteval/{name.upper()}", (_BINCLASSIF,), members=files, folder=folder,
                   description=what)


def _file(base: str, name: str, rows: int, sha256: str | None = None, size: int | None = None) -> Remote:
    return Remote(base + name, name, "file", sha256=sha256, size=size, rows=((name, rows),))


def _sick(split: str, rows: int) -> Remote:
    return Remote(f"{_SICK}sick_{split}.zip", f"sick_{split}.zip", "zip", rows=((f"SICK_{split}.txt", rows),))


def _with_manifest(datasets) -> dict[str, Dataset]:
    """``{name: dataset}``, each with its entry of ``manifest.json`` (sorted by file name)."""
    manifest = json.loads(MANIFEST_FILE.read_text(encoding="utf-8")) if MANIFEST_FILE.is_file() else {}
    return {d.name: dataclasses.replace(d, manifest=tuple(sorted(manifest.get(d.name, {}).get("files", {}).items())),
                                        manifest_complete=bool(manifest.get(d.name, {}).get("complete")))
            for d in datasets}


#: NAME → dataset. A ``sha256`` is pinned where a published checksum list gives one for
#: the same URL; the others are trusted once their structure verifies (package docstring).
#: Every unpacked file is checked against ``manifest.json`` where it has an entry.
DATASETS: dict[str, Dataset] = _with_manifest((
    _sts(2012, "4/40/"),
    _sts(2013, "2/2f/"),
    _sts(2014, "8/8c/"),
    _sts(2015, "d/da/"),
    _sts(2016, "9/98/"),
    Dataset("stsb", "sts/STSBenchmark",
            (Remote(_STS_WIKI + "4/48/Stsbenchmark.tar.gz", "Stsbenchmark.tar.gz", "tar.gz",
                    rows=(("stsbenchmark/sts-train.csv", 5749), ("stsbenchmark/sts-dev.csv", 1500),
                          ("stsbenchmark/sts-test.csv", 1379))),),
            members=("sts-*.csv", "readme.txt", "LICENSE.txt"), folder="stsbenchmark",
            description="STS Benchmark train/dev/test (Cer et al. 2017)"),
    Dataset("sick", "sts/SICK", (_sick("train", 4501), _sick("trial", 501), _sick("test_annotated", 4928)),
            members=("SICK_*.txt",), description="SICK 2014 relatedness and entailment (CC BY-NC-SA 3.0)"),
    _binclassif("mr", "rt10662", ("rt-polarity.pos", "rt-polarity.neg"), "MR movie-review polarity"),
    _binclassif("cr", "customerr", ("custrev.pos", "custrev.neg"), "CR customer-review polarity"),
    _binclassif("subj", "subj", ("subj.objective", "subj.subjective"), "SUBJ subjectivity"),
    _binclassif("mpqa", "mpqa", ("mpqa.pos", "mpqa.neg"), "MPQA opinion polarity"),
    Dataset("trec", "senteval/TREC", (_file(_TREC, "train_5500.label", 5452), _file(_TREC, "TREC_10.label", 500)),
            description="TREC question types"),
    # sha256 and size: tensorflow_datasets 4.9 url_checksums/glue.txt (its GLUE MRPC config
    # fetches these two URLs); the data README's reference copies hash the same.
    Dataset("mrpc", "senteval/MRPC",
            (_file(_SENTEVAL, "msr_paraphrase_train.txt", 4077, size=1047044,
                   sha256="60a9b09084528f0673eedee2b69cb941920f0b8cd0eeccefc464a98768457f89"),
             _file(_SENTEVAL, "msr_paraphrase_test.txt", 1726, size=441275,
                   sha256="a04e271090879aaba6423d65b94950c089298587d9c084bf9cd7439bd785f784")),
            description="MRPC paraphrase pairs (Microsoft research licence)"),
    Dataset("sst2", "senteval/SST/binary",
            (_file(_SST2, "sentiment-train", 67349), _file(_SST2, "sentiment-dev", 872),
             _file(_SST2, "sentiment-test", 1821)),
            description="SST-2 binary sentiment, as SentEval uses it"),
    Dataset("flickr8k-text", "flickr8k/Flickr8k_text",
            (Remote(_FLICKR8K + "Flickr8k_text.zip", "Flickr8k_text.zip", "zip",
                    rows=(("Flickr8k.token.txt", 40460), ("Flickr_8k.trainImages.txt", 6000),
                          ("Flickr_8k.devImages.txt", 1000), ("Flickr_8k.testImages.txt", 1000)),
                    approx_bytes=2_300_000),),
            members=("*.txt",), description="Flickr8k captions and the official train/dev/test split files"),
    # The photo archive holds Flicker8k_Dataset/<id>.jpg (the release's own spelling) and
    # macOS resource forks under __MACOSX/ (skipped), so it needs higher caps than the
    # text archives: 8,091 photos, about 1.1 GB packed and unpacked (JPEGs do not compress).
    Dataset("flickr8k-images", "flickr8k/images",
            (Remote(_FLICKR8K + "Flickr8k_Dataset.zip", "Flickr8k_Dataset.zip", "zip",
                    files=(("Flicker8k_Dataset/*.jpg", 8091),), max_unpacked=3 << 30, max_members=20_000,
                    approx_bytes=1_115_000_000),),
            members=("*.jpg",), folder="Flicker8k_Dataset",
            description="Flickr8k photos, 8,091 JPEGs (download about 1.1 GB; research use, (c) their owners)"),
))

#: Names that stand for several datasets.
GROUPS: dict[str, tuple[str, ...]] = {
    "sts": ("sts12", "sts13", "sts14", "sts15", "sts16", "stsb"),
    "senteval": ("mr", "cr", "subj", "mpqa", "trec", "mrpc", "sst2"),
    "flickr8k": ("flickr8k-text", "flickr8k-images"),
    "all": tuple(DATASETS),
}



def expand_names(names: list[str]) -> list[str]:
    """Dataset and group names → dataset names, in order, without repeats.

    Raises:
      ValueError: an unknown name (the message lists the known ones).
    """
    out: list[str] = []
    for name in names:
        key = name.lower()
        if key not in DATASETS and key not in GROUPS:
            raise ValueError(f"unknown dataset {name!r}; choose from {', '.join([*DATASETS, *GROUPS])}.")
        for one in GROUPS.get(key, (key,)):
            if one not in out:
                out.append(one)
    return out



def _size(n: int) -> str:
    return f"{n / 1e9:.1f} GB" if n >= 1e9 else f"{n / 1e6:.0f} MB" if n >= 1e6 else f"{n / 1e3:.0f} kB"



def format_list() -> str:
    """One line per dataset: name, destination, description (and, where the release manifest
    covers it, ``[files checked against the release]``); then its source URLs, each marked
    ``(sha256 pinned)`` or ``(structure-checked)`` and, where known, its size."""
    lines = []
    for d in DATASETS.values():
        lines.append(f"{d.name:<16} {d.dest:<26} {d.description}"
                     + (" [files checked against the release]" if d.manifest else ""))
        for r in d.remotes:
            size = r.size or r.approx_bytes
            about = "" if r.size else "about "
            lines.append(f"{'':<16} {r.url} ({'sha256 pinned' if r.sha256 else 'structure-checked'})"
                         + (f" {about}{_size(size)}" if size else ""))
    return "\n".join(lines)
