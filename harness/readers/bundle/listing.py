"""What a bundle holds, said per run: the line `bundle verify` prints for each run, and the
`index.html` and `README.txt` at the top of every bag a reviewer opens first.

The runs' records are hostile: every value is made inert and, in HTML, escaped; the page
has no script and fetches nothing. Pure, so a bundle stays byte-for-byte reproducible."""

from __future__ import annotations

import html
from dataclasses import asdict, dataclass
from urllib.parse import quote

from harness.base.terminal import STATUS_COLOURS
from harness.judge.approval.document import parse
from harness.readers.bundle.facts import RunFacts
from harness.readers.report.inert import inert

INDEX_HTML = "index.html"
README = "README.txt"
VALUE_CHARS = 200  # a run id, a control name, a reviewer: far shorter than this
SUMMARY = "summary.html"
VERIFY_DOC = "docs/bundles.md, section \"Verifying without the harness\""


@dataclass(frozen=True)
class RunLine:
    """One run of a bundle, as its listing shows it."""

    run_id: str
    folder: str  # data/<run-id>
    status: str
    campaign: str
    control: str
    attempt: str
    rerun_of: str  # the run this one reran ("" when none)
    superseded_by: str  # the newest rerun of this run in the bag ("" when none)
    reviewer: str  # of the approval the run ran under ("" when none)
    commit: str  # the commit the approval reviewed

    def as_dict(self) -> dict[str, str]:
        return asdict(self)

    def __str__(self) -> str:
        """`bundle verify`'s line: status, control, approval, superseded, all inert."""
        said = [self.status or "no status", f"control {self.control or '?'}"]
        if self.reviewer or self.commit:
            said.append(f"approved by {self.reviewer or '?'} (commit {self.commit[:12] or '?'})")
        if self.rerun_of:
            said.append(f"rerun of {self.rerun_of}")
        if self.superseded_by:
            said.append(f"superseded by rerun {self.superseded_by}")
        return f"run {self.run_id}: " + ", ".join(said)


def _text(value: object) -> str:
    return "" if value is None else inert(value, VALUE_CHARS)


def _newest(candidates: list[RunFacts]) -> str:
    """The latest rerun among `candidates` (by attempt, then creation time)."""
    def key(r: RunFacts) -> tuple[int, str]:
        attempt = r.get("attempt")
        return (attempt if isinstance(attempt, int) else 0, str(r.get("times", "created")))
    return _text(max(candidates, key=key).run_id)


def run_lines(runs: list[RunFacts], approvals: dict[str, dict]) -> list[RunLine]:
    """A line per run, in folder order. A run is superseded by the newest run in the bag that
    names it as `rerun_of`."""
    reruns: dict[str, list[RunFacts]] = {}
    for run in runs:
        if isinstance(rerun_of := run.get("rerun_of", "run_id"), str):
            reruns.setdefault(rerun_of, []).append(run)
    out = []
    for run in sorted(runs, key=lambda r: r.folder):
        file = run.get("approval", "file")
        name = file.rsplit("/", 1)[-1] if isinstance(file, str) else ""
        doc = approvals.get(name, {}) if run.get("approval") else {}
        git = doc.get("git") if isinstance(doc.get("git"), dict) else {}
        commit = git.get("commit") or run.get("approval", "commit")
        out.append(RunLine(
            run_id=_text(run.run_id), folder=_text(run.folder), status=_text(run.get("status")),
            campaign=_text(run.get("campaign", "name")), control=_text(run.get("control", "name")),
            attempt=_text(run.get("attempt")), rerun_of=_text(run.get("rerun_of", "run_id")),
            superseded_by=_newest(reruns[run.run_id]) if run.run_id in reruns else "",
            reviewer=_text(doc.get("reviewer")) if run.get("approval") else "",
            commit=_text(commit) if run.get("approval") else ""))
    return out


def approval_docs(tags: dict[str, bytes]) -> dict[str, dict]:
    """The carried approvals as documents by file name; one that is not strict JSON is left out.
    (verify names it; the listing just shows no reviewer)."""
    out = {}
    for tag, data in tags.items():
        if tag.endswith(".json"):
            try:
                out[tag.rsplit("/", 1)[-1]] = parse(data)
            except ValueError:
                continue
    return out


def _href(path: str) -> str:
    return html.escape(quote(path), quote=True)


def _row(line: RunLine) -> str:
    folder = f"{line.folder}/"
    approval = f"{line.reviewer} ({line.commit[:12]})" if line.reviewer or line.commit else ""
    note = (f'<div class="note">superseded by rerun {html.escape(line.superseded_by)}</div>'
            if line.superseded_by else "")
    colour = STATUS_COLOURS.get(line.status, "none")  # a class from this map, never the value
    return ("<tr>"
            f'<td class="id"><a href="{_href(folder)}">{html.escape(line.run_id)}</a> '
            f'<a class="rec" href="{_href(folder + "run.json")}">run.json</a>{note}</td>'
            + f"<td>{html.escape(line.campaign)}<br>{html.escape(line.control)}</td>"
            + f'<td><span class="st {colour}">{html.escape(line.status or "no status")}'
            "</span></td>" + f'<td class="any">{html.escape(approval)}</td></tr>')


# Readable from 900 px up without a horizontal scroll: a run id is never broken (it is
# copied whole); other cells wrap between words, and a table wider than the page scrolls
# inside its own box, never the page.
STYLE = ("body{font:15px/1.45 system-ui,sans-serif;color:#1d2125;max-width:80rem;"
         "margin:1.5rem auto;padding:0 1rem}h1{font-size:1.4rem;overflow-wrap:anywhere}"
         "h2{font-size:1.1rem;margin-top:1.6rem}p,li{max-width:60rem}"
         ".wide{overflow-x:auto}table{border-collapse:collapse;width:100%;font-size:.9rem}"
         "th,td{border-bottom:1px solid #dde1e5;padding:.3rem .4rem;text-align:left;"
         "vertical-align:top}th{background:#f3f5f7;font-weight:600}"
         "td.id{font-family:ui-monospace,monospace;font-size:.76rem;white-space:nowrap}"
         "td.id .rec{display:block;font-family:system-ui,sans-serif}td.any{overflow-wrap:anywhere}"
         ".note{white-space:normal;overflow-wrap:anywhere;color:#5b6570}"
         ".st{font-weight:600;white-space:nowrap;padding:0 .3rem;border-radius:3px}"
         ".green{color:#0f5f22;background:#dcf3e1}.red{color:#8f1414;background:#fbe0e0}"
         ".yellow{color:#6b4d00;background:#fbf0cc}.cyan,.magenta,.none{background:#eceff2}"
         "code{font-family:ui-monospace,monospace;font-size:.85em;overflow-wrap:anywhere}"
         "a{color:#0b57b5}")


def index_html(top: str, lines: list[RunLine], nights: list[str]) -> str:
    """The bag's index.html: what it is, its nights' summaries, its runs, how to verify."""
    night_items = "".join(
        f'<li><a href="{_href(f"{n}/{SUMMARY}")}">{html.escape(_text(n.rsplit("/", 1)[-1]))}</a>'
        f" (<code>{html.escape(_text(n))}/</code>)</li>" for n in nights) or "<li>none</li>"
    rows = "".join(_row(line) for line in lines)
    steps = "".join(f"<li>{html.escape(step)}</li>" for step in _verify_steps(top))
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        'style-src \'unsafe-inline\'">\n'
        f"<title>{html.escape(top)}</title><style>{STYLE}</style></head><body>\n"
        f"<h1>Evidence bundle {html.escape(top)}</h1>\n"
        f"<p>{html.escape(_ABOUT)}</p>\n"
        f"<h2>Nights</h2><ul>{night_items}</ul>\n"
        f'<h2>Runs ({len(lines)})</h2><div class="wide"><table><thead><tr>'
        "<th>run</th><th>campaign, control</th><th>status</th>"
        "<th>approval (reviewer, commit)</th></tr></thead>"
        f"<tbody>{rows}</tbody></table></div>\n"
        f"<h2>Verify it offline</h2><ol>{steps}</ol>\n</body></html>\n")


_ABOUT = ("A BagIt bag of sealed GPU run folders made by the harness: each run folder is "
          "under data/<run-id>/ byte for byte with the SHA256SUMS it was sealed with, each "
          "night under data/nights/<night>/ (its summary links the runs), and the bag's "
          "manifests, an in-toto statement and optionally an SSH signature cover every file. "
          "This page and README.txt are made from the runs' own records and are covered by "
          "tagmanifest-sha256.txt: trust them only once the bundle verifies.")


def _verify_steps(top: str) -> list[str]:
    return [
        "Compare the bundle file's sha256 (sha256sum FILE) with the one its sender gave "
        "you by another channel: bundle export prints it.",
        "With the harness: harness bundle verify FILE --allowed-signers allowed_signers "
        "[--reviewers reviewers]; it prints one line per run, then OK (exit 0) or each "
        "problem as FAIL (exit 1).",
        "Without it (coreutils, tar, awk and OpenSSH's ssh-keygen): paste the recipe of "
        f"{VERIFY_DOC}, taken from the harness's own documentation, never from a bundle: "
        "a recipe carried in the bag could be the forger's.",
        f"In short, in {top}/: ssh-keygen -Y verify -n harness-evidence over "
        "tagmanifest-sha256.txt (signed bundles), sha256sum -c tagmanifest-sha256.txt, "
        "sha256sum -c manifest-sha256.txt, and in each run folder sha256sum -c SHA256SUMS; "
        "each approval's .sig in metadata/approvals/ with -n harness-approval@v1.",
    ]


def readme_text(top: str, lines: list[RunLine], nights: list[str]) -> str:
    """The bag's README.txt: the same as index.html, as plain text."""
    out = [f"Evidence bundle {top}", "", _ABOUT, "", "Nights (open summary.html):"]
    out += [f"  {_text(n)}/{SUMMARY}" for n in nights] or ["  none"]
    out += ["", f"Runs ({len(lines)}), each in its folder:"]
    out += [f"  {line}\n    {line.folder}/" for line in lines]
    out += ["", "Verify it offline:"]
    out += [f"  {i}. {step}" for i, step in enumerate(_verify_steps(top), 1)]
    return "\n".join(out) + "\n"
