"""What the commands share: their option checks and the lines they print."""
from __future__ import annotations

import sys

from lobreplay.errors import InputError


def note_sequence(mold: dict | None) -> None:
    """A pcap's MoldUDP64 sequence anomalies (a summary's `moldudp64`), a line of each kind on stderr."""
    from lobreplay.itch.reader import mold_notes
    for line in mold_notes(mold):
        print(f"lobreplay: note: {line}", file=sys.stderr)


def cut_notes(stream_break: str | None, offset: int | None, nbytes: int, done: str = "read",
               after_end: int = 0) -> list[str]:
    """What --allow-truncated let a read stop at (a reader's ReadStats, or a replay's
    summary["truncated"]): a gzip stream cut short, a partial last message, bytes after an
    end-of-session marker."""
    out = []
    if stream_break:
        out.append(f"the gzip stream ends early ({stream_break}): {done} up to there")
    if nbytes:
        out.append(f"truncated: {nbytes} byte(s) of a partial message at offset {offset:,} were not read")
    if after_end:
        out.append(f"{after_end:,} byte(s) after the end-of-session marker (a zero-length frame) were not read")
    return out


def duration_ns(text: str) -> int:
    """'100ms', '1s', '5m', '250us' -> ns."""
    import re
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ns|us|ms|s|m|h)\s*", text or "")
    if not m:
        raise InputError(f"--every: expected a duration like 100ms, 1s or 5m, or 'change', got {text!r}")
    ns = float(m[1]) * {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9, "m": 60e9, "h": 3600e9}[m[2]]
    if ns < 1:
        raise InputError(f"--every: must be at least 1 ns, got {text!r}")
    return int(ns)


MAX_CHUNK_MB, MAX_DEPTH = 1024, 100


def depth_options(args, reports: tuple[str, ...]) -> tuple[tuple[str, ...], int, int]:
    """--depth N and --every of a replay command: (the reports, with depth added when N > 0; N;
    the interval in ns, 0 for 'change')."""
    if not 0 <= args.depth <= MAX_DEPTH:  # (each sample holds 2 x N levels per book: 100 is ~1 KB a row)
        raise InputError(f"--depth: expected a number of levels of 0 to {MAX_DEPTH}, got {args.depth}")
    if args.depth and "depth" not in reports:
        reports = reports + ("depth",)
    if args.reports and "depth" in reports and not args.depth:
        raise InputError("--reports depth: the depth table needs --depth N (the levels to sample)")
    if args.every == "change":
        return reports, args.depth, 0
    return reports, args.depth, duration_ns(args.every)


def pass1_text(p1: dict) -> str:
    """A replay's pass 1 as the summary line gives it."""
    if p1.get("cached"):
        return f"pass 1 {p1['seconds']:.2f} s (from the sizing cache; the scan took {p1['scan_seconds']:.2f} s)"
    return f"pass 1 {p1['seconds']:.2f} s"


def desyncs_text(s: dict) -> str:
    """A replay summary's desyncs, most frequent cause first (itch and lobc replays)."""
    causes = ", ".join(f"{k} {v:,}" for k, v in sorted(s["desyncs_by_cause"].items(), key=lambda kv: -kv[1]))
    return f"desyncs: {s['desyncs']:,}" + (f" ({causes})" if causes else "")


def reports_text(out_dir: str, rows: dict, *files: str) -> str:
    """The report files a replay wrote: each table with its rows, then the other files."""
    return f"reports in {out_dir}/: " + ", ".join([f"{k} ({v:,} row{'' if v == 1 else 's'})" for k, v in rows.items()]
                                                  + list(files))


ALLOW_GAPS_HELP = ("a pcap: go on when MoldUDP64 sequence gaps and damaged packets lose more than 1 %% of its "
                   "messages (counted, and noted on stderr, either way)")


REPORTS_WHOLE = "the reports written so far are whole"  # a command's stop_note: what SIGTERM leaves


def note_gzip_jobs(path: str, jobs: int) -> None:
    """--jobs N on a gzip file: every part inflates the whole file, so with no more CPUs than
    parts one job is faster (docs/itch.md); say so once on stderr, and go on."""
    from lobreplay.itch.reader import GZIP_MAGIC
    from lobreplay.reports.tables import usable_cpus
    if jobs < 2 or jobs < usable_cpus():
        return
    try:
        with open(path, "rb") as f:
            gz = f.read(len(GZIP_MAGIC)) == GZIP_MAGIC
    except OSError:
        return  # (the replay says what is wrong with the file)
    if gz:
        print(f"lobreplay: note: {path} is gzip: each of the {jobs} parts inflates the whole file, and "
              f"this machine has {usable_cpus()} CPU(s); one job, or the file inflated first, is likely faster "
              "(docs/itch.md)", file=sys.stderr)


def note_non_ascii(n: int) -> None:
    if n:
        print(f"text fields: {n:,} byte(s) outside ASCII (damage: ITCH text is ASCII) written as '?'")


def m_per_s(rate: float | None, what: str, digits: int) -> str:
    """A rate from summary.json in millions per second; None (a pass too short to time, or
    a part of --jobs without events) as n/a."""
    return f"{rate / 1e6:.{digits}f} M {what}/s" if rate else f"n/a {what}/s"


def fmt_time(ns: int) -> str:
    s, ns = divmod(int(ns), 1_000_000_000)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    return f"{h:02d}:{m:02d}:{s:02d}.{ns:09d}"


def add_timing_options(rp) -> None:
    """--no-timing and --timing-every of a replay command (its config's timing and timing_every)."""
    rp.add_argument("--no-timing", action="store_true", help="do not time events inside the core")
    rp.add_argument("--timing-every", type=int, metavar="N",
                    help="time every Nth event inside the core (default 16: lobreplay.reports.latency.TIMING_EVERY; "
                         "1: every event)")
