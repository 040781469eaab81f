"""`bundle export`: run and night folders -> one BagIt bag in a deterministic tar.

The top folder is named from the bundled folders, never the output name or the clock.
The folders are judged exactly as `bundle verify` will judge the bag, their seals on the
digests of the bytes written, before the bundle is linked into place: a (signed) bundle
never vouches for a run that does not verify, nor for bytes other than those checked."""

from __future__ import annotations

import hashlib
import io
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from harness.base.atomic import fsync_dir
from harness.base.errors import EnvironmentFault, InvalidInput, Refused
from harness.base.timeutil import parse_or_none
from harness.base.tree import NotRegular
from harness.measure.runfolder import manifest
from harness.readers.bundle import bag, chain, listing
from harness.readers.bundle.archive import DeterministicTar
from harness.readers.bundle.bag import bundled_folder, is_night_folder
from harness.readers.bundle.facts import RunFacts, read_run_facts, time_span
from harness.readers.bundle.payload import Payload, collect_payload
from harness.readers.bundle.safe_extract import file_sha256
from harness.readers.bundle.seals import bag_runs, layout_problems, run_digests, run_problems
from harness.readers.bundle.statement import StatementSpool
from harness.readers.bundle.sums import BundleFault, one_line


@dataclass
class ExportResult:
    output: Path
    top: str
    files: int
    runs: list[str]
    signed: bool
    sha256: str = ""  # of the bundle file written, to send out of band


SUFFIXES = (".tar.gz", ".tgz", ".tar")  # the names of a bundle file: gzip, or a plain tar


def compression_for(output: Path) -> bool:
    """True for gzip (.tar.gz/.tgz), False for plain .tar; anything else is a usage error."""
    if output.name.endswith(SUFFIXES):
        return not output.name.endswith(".tar")
    raise InvalidInput(
        f"{one_line(str(output))}: the output name must end in .tar, .tar.gz or .tgz"
    )


def top_folder(names: list[str]) -> str:
    """The archive's top folder: from the names of the folders given (a night's runs come
    with its name), so the output name and the order of arguments do not change the bytes."""
    if len(names) == 1:
        return f"evidence-{names[0]}"
    joined = "\n".join(sorted(names)).encode("utf-8")
    return f"evidence-{hashlib.sha256(joined).hexdigest()[:16]}"


def archive_mtime(runs: list[RunFacts]) -> int:
    """One fixed mtime for every entry: the newest run's end, else the epoch."""
    _, end = time_span(runs)
    when = parse_or_none(end)
    return max(int(when.timestamp()), 0) if when else 0


class ExportRefused(Refused):
    """The folders do not verify as they are; `problems` names each one (exit 1)."""

    def __init__(self, problems: list[BundleFault]) -> None:
        super().__init__(f"not bundled: {len(problems)} problem(s) in the given folders; "
                         "a bundle only vouches for runs that `harness verify` accepts")
        self.problems = problems


def _sources(payload: Payload) -> dict[str, Path]:
    """{bag folder data/<name>/<rel>: where it is on disk} for each run of the payload."""
    roots = {f"{bag.PAYLOAD_DIR}/{where}": source for where, source in payload.roots}
    out = {}
    for run in bag_runs([f.arcname for f in payload.files]):
        folder = bundled_folder(f"{run}/{bag.PAYLOAD_DIR}") or run  # data/<name>, nights too
        rel = run[len(folder) + 1:]
        out[run] = roots[folder] / rel if rel else roots[folder]
    return out


def judge(payload: Payload, subjects: dict[str, str] | None = None) -> list[BundleFault]:
    """Everything `bundle verify` would say about the runs of this payload, said now: the payload's
    shape, and `harness verify`'s verdict on each source run folder. `subjects` are the digests of
    the very bytes written, so each file is read once and checked as bagged."""
    sources = _sources(payload)
    problems = layout_problems([f.arcname for f in payload.files], list(sources))
    digests = run_digests(subjects or {}, list(sources))
    for run, source in sources.items():
        problems.extend(run_problems(source, run, digests[run] if subjects else None))
    return problems


def read_runs(payload: Payload, spool: StatementSpool) -> list[RunFacts]:
    """The facts of each run of the payload, each read once, in folder order: the
    statement's share goes into `spool`, the rest is kept slim (`RunFacts.slim`)."""
    sources = _sources(payload)
    runs = []
    for folder in sorted(sources):
        facts = read_run_facts(folder, sources[folder])
        spool.add(facts)
        runs.append(facts.slim())
    return runs


def _write_archive(fh, payload: Payload, runs: list[RunFacts], spool: StatementSpool,
                   top: str, compress: bool, sign_key: Path | None,
                   chain_tags: dict[str, bytes]) -> dict[str, str]:
    with DeterministicTar(fh, top=top, mtime=archive_mtime(runs), compress=compress) as tar, \
            tempfile.TemporaryFile() as statement:
        subjects = {f.arcname: tar.add_file(f.arcname, f.root, f.rel, f.size)
                    for f in payload.files}
        oxum = bag.payload_oxum([f.size for f in payload.files])
        info = bag.bag_info(runs, oxum, signed=sign_key is not None)  # signed: it says so
        tags = {
            bag.BAGIT_TXT: bag.bagit_txt().encode("utf-8"),
            bag.BAG_INFO: info.encode("utf-8"),
            bag.MANIFEST: manifest.render(subjects).encode("utf-8"),
            **chain_tags,  # approvals and gate records (harness.readers.bundle.chain)
            **listing_tags(top, runs, payload, chain_tags),  # index.html, README.txt
        }
        # The statement grows with the runs (~10 KiB each): spooled to a file, not held.
        digests = {name: hashlib.sha256(data).hexdigest() for name, data in tags.items()}
        digests[bag.STATEMENT] = spool.write(statement, runs, subjects)
        tagmanifest = manifest.render(digests).encode("utf-8")
        tags[bag.TAGMANIFEST] = tagmanifest
        if sign_key is not None:
            tags[bag.SIGNATURE] = bag.sign(tagmanifest, sign_key)
        files: dict[str, tuple[BinaryIO, int]] = {
            name: (io.BytesIO(data), len(data)) for name, data in tags.items()}
        files[bag.STATEMENT] = (statement, statement.tell())
        statement.seek(0)
        for name in sorted(files):
            tar.add_stream(name, *files[name])
    return subjects


def listing_tags(top: str, runs: list[RunFacts], payload: Payload,
                 chain_tags: dict[str, bytes]) -> dict[str, bytes]:
    """The bag's index.html and README.txt (`listing`): which run is which, links to each night's
    summary and run folder, how to verify. Tag files, so the tag manifest (and the signature)
    cover them. Pure."""
    lines = listing.run_lines(runs, listing.approval_docs(chain_tags))
    nights = [f"{bag.PAYLOAD_DIR}/{where}" for where, _ in payload.roots
              if is_night_folder(where)]
    return {listing.INDEX_HTML: listing.index_html(top, lines, nights).encode("utf-8"),
            listing.README: listing.readme_text(top, lines, nights).encode("utf-8")}


def check_output(output: Path, sign_key: Path | None) -> bool:
    """The output may be written and the key is a file; returns whether to gzip. InvalidInput
    (exit 2) otherwise."""
    compress = compression_for(output)
    if output.exists() or output.is_symlink():
        raise InvalidInput(f"{one_line(str(output))} exists; bundles are never overwritten")
    if not output.parent.is_dir():
        raise InvalidInput(f"{one_line(str(output.parent))} is not a folder")
    if sign_key is not None and not Path(sign_key).is_file():
        raise InvalidInput(f"signing key {one_line(str(sign_key))} is not a file")
    return compress


def write_bundle(output: Path, payload: Payload, runs: list[RunFacts], spool: StatementSpool,
                 *, compress: bool,
                 sign_key: Path | None, chain_tags: dict[str, bytes],
                 check: Callable[[dict[str, str]], list[BundleFault]] | None = None
                 ) -> tuple[str, str]:
    """Write the bag of `payload` to the new file `output`, atomically.

    A temp name, fsync, then a link that fails if `output` appeared meanwhile; returns the
    top folder and the file's sha256 (to send out of band). Shared by export and merge, so a
    merged bundle is written exactly as an exported one. `check` judges the digests of the
    bytes written before linking: any problem refuses it (ExportRefused), nothing is left."""
    top = top_folder(payload.named)
    tmp = output.with_name(f".{output.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "xb") as fh:
            subjects = _write_archive(fh, payload, runs, spool, top, compress, sign_key,
                                      chain_tags)
            problems = check(subjects) if check is not None else []
            if problems:
                raise ExportRefused(problems)
            fh.flush()
            os.fsync(fh.fileno())
        with open(tmp, "rb") as written:  # our own private file, before anyone sees it
            digest = file_sha256(written)
        os.link(tmp, output)  # fails if someone created `output` meanwhile
    except FileExistsError as e:
        raise InvalidInput(
            f"{one_line(str(output))} appeared while exporting; not overwritten"
        ) from e
    except NotRegular as e:  # swapped for a symlink or a FIFO after it was judged
        raise InvalidInput(
            f"{one_line(str(e.filename))}: {e.strerror} (changed while exporting)"
        ) from None
    except OSError as e:  # disk full, or a run file changed size while it was read
        raise EnvironmentFault(f"cannot write {output}: {e}") from e
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(output.parent)
    return top, digest


def export_bundle(folders: list[Path], output: Path, sign_key: Path | None = None
                  ) -> ExportResult:
    """Write the bundle for `folders` to `output` (new file, written atomically)."""
    output = Path(output)
    compress = check_output(output, sign_key)
    payload = collect_payload(folders)
    real_parent = output.parent.resolve()
    for name, source in payload.roots:
        if real_parent == source or real_parent.is_relative_to(source):
            raise InvalidInput(
                f"{one_line(str(output))}: would be written inside the bundled folder {name}"
            )
    problems = layout_problems([f.arcname for f in payload.files])
    if problems:
        raise ExportRefused(judge(payload))
    with StatementSpool() as spool:
        runs = read_runs(payload, spool)
        chain_tags, problems = chain.collect(  # gate records: by name, in each run's dir
            runs, {folder: source.parent for folder, source in _sources(payload).items()})
        if problems:  # the runs' own verdict first, as `bundle verify` would give it
            raise ExportRefused(judge(payload) or problems)
        # Each run is judged on the digests of the bytes written into the bag (one read of
        # each file), before the bag is linked into place: a broken run leaves no bundle.
        top, digest = write_bundle(output, payload, runs, spool, compress=compress,
                                   sign_key=sign_key, chain_tags=chain_tags,
                                   check=lambda subjects: judge(payload, subjects))
    return ExportResult(output, top, len(payload.files), [r.run_id for r in runs],
                        sign_key is not None, digest)
