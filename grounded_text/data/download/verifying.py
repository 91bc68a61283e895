"""Verifying a download: its size and SHA-256 (pinned, or recorded in the data directory by the
first verified download), its structure (members, line counts, STS pairs, photo counts), and
after unpacking, every file against the committed manifest of the original release.
"""

from __future__ import annotations

import fnmatch
import json
import math
import re
from pathlib import Path, PurePosixPath

from grounded_text.data.download.catalogue import CHECKSUMS_FILE, Dataset, DownloadError, Remote
from grounded_text.data.download.unpacking import _JPEG_MAGIC, _Discard, _Head, _members, _refuse, _skipped
from grounded_text.utils.durable import atomic_write, file_sha256

#: Relative tolerance of the line counts of ``verify_structure`` (at least 2 lines): copies
#: re-saved by redistributors differ by a blank or stray line, a wrong file by far more.
ROW_TOLERANCE = 0.01
def _close(n: int, want: int, sample: bool = False) -> bool:
    slack = max(2, ROW_TOLERANCE * want)
    return 1 <= n <= want + slack if sample else abs(n - want) <= slack


_STS_FILE = re.compile(r"^STS(?:\d{4})?\.(?P<what>input|gs)\.(?P<subset>.+)\.txt$")


def sha256_of(path: Path) -> str:
    """The file's SHA-256 hex digest (read in 1 MiB blocks)."""
    return file_sha256(path)


def _recorded(cache: Path) -> dict:
    path = cache / CHECKSUMS_FILE
    try:
        records = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (ValueError, OSError) as e:
        raise DownloadError(f"{path}: cannot read the recorded checksums ({e}); delete it to start over.") from None
    if not isinstance(records, dict):
        raise DownloadError(f"{path}: the recorded checksums are not a JSON object; delete it to start over.")
    return records


def _record(cache: Path, remote: Remote, digest: str, size: int, source: str) -> None:
    records = _recorded(cache)
    records[remote.url] = {"sha256": digest, "size": size, "verified": True, "source": source}
    text = (json.dumps(records, indent=2, sort_keys=True) + "\n").encode("utf-8")
    # A temporary file of an unpredictable name, created exclusively (a planted link is never
    # followed), synced and renamed over the old record.
    atomic_write(cache / CHECKSUMS_FILE, lambda f: f.write(text))


def known_digest(remote: Remote, cache: Path, *, force: bool = False) -> str | None:
    """The SHA-256 a download of ``remote`` must have: the pinned one, else the one recorded by an
    earlier verified download into this data directory (not with ``force``: a new file may then
    replace it), else ``None`` (the file is structure-checked, then its digest recorded)."""
    if remote.sha256 is not None:
        return remote.sha256
    known = _recorded(cache).get(remote.url)
    if force or not isinstance(known, dict) or known.get("verified") is not True:
        return None
    return known.get("sha256") if isinstance(known.get("sha256"), str) else None


def mismatch(remote: Remote, cache: Path, problem: str) -> DownloadError:
    """The error of a file whose size or digest is not the expected one (already deleted)."""
    return DownloadError(f"checksum mismatch for {remote.filename} (from {remote.url}): {problem}; "
                         "the file was deleted. A mirror with a different file, or a corrupted "
                         "transfer: run again, or check the source.")


def digest_problem(remote: Remote, cache: Path, digest: str, expected: str) -> str:
    """How ``digest`` differs from ``expected`` (``known_digest``: pinned, or recorded in ``cache``)."""
    if remote.sha256 is not None:
        return f"sha256 {digest}, expected {expected} (pinned)"
    return (f"sha256 {digest}, expected {expected} (recorded in {cache / CHECKSUMS_FILE} by the first verified "
            "download; if the published file changed, --force downloads it again and replaces the recorded "
            "digest once the new file passes the structure check)")


def verify(path: Path, remote: Remote, cache: Path, *, force: bool = False, log=print,
           checked: str | None = None) -> tuple[str, bool]:
    """Checks a complete download against its size and ``known_digest``: the pinned digest, or
    else the one recorded by an earlier verified download into this data directory.

    A digest recorded by an earlier version of this tool (without ``"verified": true``:
    it may be an error page's) or, with ``force``, a verified one that differs, does not
    stop the file: the caller replaces it once ``verify_structure`` passes.

    Args:
      path: the complete download. remote: its registry entry. cache: the data directory's
        download folder (the recorded digests). force, log: see above.
      checked: the SHA-256 pooch already checked the file against as it fetched it (the
        ``known_digest``): not computed again.

    Returns:
      ``(sha256 hex digest, whether the caller should record it after the structure check)``.

    Raises:
      DownloadError: size or SHA-256 mismatch (the message names the file, the source
        and both values). The bad file is deleted so the next run fetches it afresh.
    """
    size = path.stat().st_size
    expected = known_digest(remote, cache, force=force)
    digest = checked if checked is not None and checked == expected else None
    problem = f"size {size} bytes, expected {remote.size}" if remote.size not in (None, size) else None
    if problem is None:
        digest = digest or sha256_of(path)
        if expected is not None and digest != expected:
            problem = digest_problem(remote, cache, digest, expected)
    if problem is not None:
        path.unlink()
        raise mismatch(remote, cache, problem)
    if remote.sha256 is not None:
        return digest, False
    known = _recorded(cache).get(remote.url)
    known = known if isinstance(known, dict) else {}
    recorded, verified = known.get("sha256"), known.get("verified") is True
    if recorded is not None and recorded != digest:  # --force, or a record made without a structure check
        why = "--force" if verified else "it was recorded without a structure check"
        log(f"  {remote.filename}: sha256 {digest} differs from the digest recorded in {cache / CHECKSUMS_FILE} "
            f"({why}); it replaces that digest if the file passes the structure check")
    # An unchecked record of this same file is recorded again, as verified, after the check.
    return digest, not (verified and recorded == digest)



def verify_structure(remote: Remote, path: Path, *, sample: bool = False) -> None:
    """Checks that a downloaded file is the expected one before it is trusted.

    Checks ``remote.rows`` (each member there, with its number of non-blank lines within
    ``ROW_TOLERANCE`` or 2 lines, decoded as UTF-8 with replacement as the readers do) and
    ``remote.sts`` (each subset's input and gold files present and of equal length, gold
    lines blank or a number in 0..5, scored input lines with two tab-separated
    sentences, the scored pairs within the tolerance of the count given) and
    ``remote.files`` (the number of members matching each pattern; every JPEG member
    starts with the JPEG signature), while unpacking within the caps of ``_members``.

    Args:
      remote: the registry entry.
      path: the complete download.
      sample: accept a sample of the release: line, pair and file counts may be lower
        than published (at least 1, never more than the tolerance allows).

    Raises:
      DownloadError: listing what is missing or wrong (at most five problems), or see
        ``_members``.
    """
    wanted = dict(remote.rows)
    found: dict[str, tuple[str, int]] = {}
    sts: dict[tuple[str, str], list[str]] = {}
    counts = dict.fromkeys((pattern for pattern, _ in remote.files), 0)
    problems = []
    for name, read in _members(remote, path):
        if _skipped(name):
            continue
        matched = [pattern for pattern in counts if fnmatch.fnmatch(name, pattern)]
        if matched:
            for pattern in matched:
                counts[pattern] += 1
            if name.lower().endswith((".jpg", ".jpeg")):
                head = _Head()
                read(dst=head)
                if head.data[:3] != _JPEG_MAGIC and len(problems) < 6:
                    problems.append(f"{name} is not a JPEG (it starts with {head.data[:8]!r})")
            else:
                read(dst=_Discard)
            continue
        key = next((k for k in wanted if name == k or name.endswith("/" + k)), None)
        m = _STS_FILE.match(PurePosixPath(name).name) if remote.sts else None
        if key is None and m is None:
            read(dst=_Discard)  # counted against the cap all the same
            continue
        lines = read().decode("utf-8-sig", errors="replace").splitlines()
        if key is not None:
            if key in found:
                raise _refuse(remote, f"two members match {key!r} ({found[key][0]!r}, {name!r})")
            found[key] = (name, sum(1 for line in lines if line.strip()))
        if m is not None:
            sts[m.group("what"), m.group("subset")] = lines
    for pattern, want in remote.files:
        # A release's photos are counted exactly (no re-saved copy adds or drops one).
        if not (1 <= counts[pattern] <= want if sample else counts[pattern] == want):
            problems.append(f"{counts[pattern]} members match {pattern!r}, expected {want}"
                            + (" at most" if sample else ""))
    for key, want in remote.rows:
        if key not in found:
            problems.append(f"no member {key!r}")
        elif not _close(found[key][1], want, sample):
            problems.append(f"{found[key][0]} has {found[key][1]} non-blank lines, expected {want}"
                            + (" at most" if sample else ""))
    for subset, want in remote.sts:
        inputs, golds = sts.get(("input", subset)), sts.get(("gs", subset))
        if inputs is None or golds is None:
            problems.append(f"STS subset {subset!r} lacks its {'input' if inputs is None else 'gold'} file")
            continue
        if len(inputs) != len(golds):
            problems.append(f"STS subset {subset!r}: {len(inputs)} input lines but {len(golds)} gold lines")
            continue
        scored = 0
        for lineno, (line, gold) in enumerate(zip(inputs, golds), 1):
            if not gold.strip():
                continue
            try:
                score = float(gold.strip())
            except ValueError:
                score = math.nan
            if not 0.0 <= score <= 5.0:
                problems.append(f"STS subset {subset!r} line {lineno}: gold {gold.strip()[:20]!r} is not a score 0..5")
                break
            if len(line.split("\t")) < 2:
                problems.append(f"STS subset {subset!r} line {lineno}: not two tab-separated sentences")
                break
            scored += 1
        else:
            if scored == 0 or (want and not _close(scored, want, sample)):
                problems.append(f"STS subset {subset!r} has {scored} scored pairs, expected {want or 'some'}")
    if problems:
        raise DownloadError(f"{remote.filename} is not the expected file: " + "; ".join(problems[:5])
                            + ("; ..." if len(problems) > 5 else "") + ". It was deleted and nothing was recorded.")



def _readme(name: str) -> bool:
    return re.search(r"readme|license", name, re.IGNORECASE) is not None


def check_manifest(dataset: Dataset, folder: Path, files: list[str]) -> None:
    """Checks the files unpacked into ``folder`` against the dataset's manifest (the SHA-256
    of every file of the original release, ``catalogue.MANIFEST_FILE``).

    Every file the manifest lists must be there with its digest (a readme or licence may be
    missing). Where the manifest is complete (``Dataset.manifest_complete``: it lists every file
    of the release the dataset installs), a file it does not list is refused too, except a
    readme or licence: an added ``STS.input.*`` file would be scored as a new subset. A dataset without a
    manifest entry passes (its structure checks and recorded digests still apply).

    Raises:
      DownloadError: naming the first files that differ, are missing or are unexpected.
    """
    if not dataset.manifest:
        return
    expected = dict(dataset.manifest)
    problems = []
    for name in sorted(files):
        want = expected.get(name)
        if want is None:
            if dataset.manifest_complete and not _readme(name):
                problems.append(f"{name} is not a file of the release")
            continue
        got = sha256_of(folder / name)
        if got != want:
            problems.append(f"{name} has sha256 {got}, the release's is {want}")
    problems += [f"{name} is missing" for name in sorted(set(expected) - set(files)) if not _readme(name)]
    if problems:
        sources = ", ".join(r.filename for r in dataset.remotes)
        raise DownloadError(f"{dataset.name}: the files unpacked from {sources} differ from the release "
                            f"(the manifest shipped with grounded_text): " + "; ".join(problems[:5])
                            + ("; ..." if len(problems) > 5 else "") + ". A tampered or wrong archive: refused, "
                            "nothing installed.")


def compute_manifest(data_dir: str | Path, datasets) -> dict:
    """The manifest (``catalogue.MANIFEST_FILE``) of the installed copies of the original
    releases under ``data_dir``: ``{name: {"complete": bool, "files": {file name: sha256}}}``
    for each dataset whose folder is there, over the files its ``members`` patterns take.

    Args:
      data_dir: a data root holding the releases in the layout ``download`` installs.
      datasets: ``(Dataset, complete)`` pairs: ``complete`` when the folder holds every file of
        the release the dataset installs (see ``check_manifest``).
    """
    out = {}
    for dataset, complete in datasets:
        folder = Path(data_dir) / dataset.dest
        if not folder.is_dir():
            continue
        files = {p.name: sha256_of(p) for p in sorted(folder.iterdir())
                 if p.is_file() and any(fnmatch.fnmatch(p.name, m) for m in dataset.members)}
        if files:
            out[dataset.name] = {"complete": complete, "files": files}
    return out
