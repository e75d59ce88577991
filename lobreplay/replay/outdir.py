"""A report directory (`itch replay`, `itch decode`, `replay X.lobc`): made ready for a run,
and what `--force` may remove there.

--force replaces only what lobreplay wrote: the files an earlier run's summary.json lists
(`files`: every file that run wrote), that summary itself, the temporary names lobreplay's
writers use beside a report's name (NAME.partial, NAME.tmp), and a table under a report's
name whose Parquet footer says lobreplay wrote it (a run stopped by SIGKILL wrote no
summary). Any other file stays. One under a name this run may write is refused, --force or
not: the run would replace it. The caller opens and checks its input first, so that a
mistyped input removes nothing.
"""
from __future__ import annotations

import functools
import json
import os

from lobreplay.errors import InputError, refuse_input_as_output

SUMMARY = "summary.json"
TEMP_SUFFIXES = (".partial", ".tmp")  # a writer's name for a file until it is whole (TableWriter, write_json, .hgrm)


@functools.cache
def report_names() -> frozenset[str]:
    """Every file name a report directory's run may write (an ITCH replay, an ITCH decode,
    a .lobc replay), but the .hgrm files (report_name)."""
    from lobreplay.itch.spec import ALL_REPORTS as ITCH_REPORTS, LAYOUTS, STATUS_TYPES
    from lobreplay.l2.ladder import ALL_REPORTS as L2_REPORTS
    stems = set(ITCH_REPORTS) | set(L2_REPORTS) | {"latency_histograms"}
    stems |= {f"status_{t}_{LAYOUTS[t].name}" for t in STATUS_TYPES}  # (an ITCH replay's status tables)
    stems |= {f"{t}_{spec.name}" for t, spec in LAYOUTS.items()}      # (an ITCH decode's tables)
    return frozenset({f"{s}.parquet" for s in stems} | {SUMMARY})


@functools.cache
def _hgrm_names() -> frozenset[str]:
    from lobreplay.core.events import Kind
    return frozenset(f"latency_{k}.hgrm" for k in [*(k.name for k in Kind), "ALL"])


def report_name(name: str) -> bool:
    """Whether a run may write a file of this name in its report directory."""
    return name in report_names() or name in _hgrm_names()


def _temp_of_report(name: str) -> bool:
    return any(name.endswith(s) and report_name(name[:-len(s)]) for s in TEMP_SUFFIXES)


def _summary(out_dir: str) -> dict | None:
    """The directory's summary.json if it is a lobreplay run's (a JSON object with a status)."""
    try:
        with open(os.path.join(out_dir, SUMMARY), "rb") as f:
            s = json.load(f)
    except (OSError, ValueError):
        return None
    return s if isinstance(s, dict) and "status" in s else None


def _listed(summary: dict | None) -> set[str]:
    """The plain file names (no directory part) a summary lists as written by its run."""
    files = (summary or {}).get("files")
    if not isinstance(files, list):
        return set()
    return {f for f in files if isinstance(f, str) and f not in ("", ".", "..") and os.path.basename(f) == f}


def _table_of_lobreplay(path: str) -> bool:
    """A Parquet file whose footer carries lobreplay's provenance (every table it writes does)."""
    if not path.endswith(".parquet"):
        return False
    try:
        import pyarrow.parquet as pq
        meta = pq.read_schema(path).metadata or {}
    except Exception:  # (not Parquet, cut short, unreadable: not provably ours)
        return False
    return b"lobreplay_version" in meta


def lobreplay_files(out_dir: str, names: list[str] | None = None) -> tuple[list[str], list[str]]:
    """(the entries of out_dir that lobreplay wrote, the others), as --force tells them."""
    names = sorted(os.listdir(out_dir)) if names is None else names
    summary = _summary(out_dir)
    listed = _listed(summary)
    ours, others = [], []
    for n in names:
        p = os.path.join(out_dir, n)
        mine = (not os.path.isdir(p)) and (
            (n == SUMMARY and summary is not None) or n in listed or _temp_of_report(n)
            or (report_name(n) and _table_of_lobreplay(p)))
        (ours if mine else others).append(n)
    return ours, others


def _failed_before_writing(out_dir: str) -> bool:
    """out_dir holds nothing but the summary.json of a replay that failed (e.g. at a bad
    input, before any report): nothing a new replay there would lose."""
    if os.listdir(out_dir) != [SUMMARY]:
        return False
    s = _summary(out_dir)
    return s is not None and s.get("status") == "failed"


def prepare_output(out_dir: str, force: bool, inputs=()) -> None:
    """Make out_dir ready for a run's reports: created if need be. One that holds files is
    refused unless force, except one that holds only the summary of a run that failed
    before writing anything; with force, the files an earlier run wrote are removed
    (lobreplay_files) and every other file stays, but one under a name this run may write
    is refused. `inputs`: the run's input files, which are never removed (call this once
    the input is open and checked)."""
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise InputError(f"{out_dir}: exists and is not a directory")
    entries = sorted(os.listdir(out_dir)) if os.path.isdir(out_dir) else []
    if entries:
        if not force and not _failed_before_writing(out_dir):
            raise InputError(f"{out_dir}: output directory is not empty; pass --force to overwrite "
                             "(it replaces only the files of an earlier run)")
        ours, others = lobreplay_files(out_dir, entries)
        for n in entries:  # (an input kept in the directory under a report's name)
            if n in ours or report_name(n):
                refuse_input_as_output(os.path.join(out_dir, n), inputs)
        taken = [n for n in others if report_name(n) and not os.path.isdir(os.path.join(out_dir, n))]
        if taken:
            raise InputError(f"{os.path.join(out_dir, taken[0])}: a file lobreplay did not write (not in "
                             f"{SUMMARY}) under the name of a report; --force replaces only an earlier run's "
                             "files: move it, or write the reports to another directory")
        for n in ours:
            os.remove(os.path.join(out_dir, n))
    os.makedirs(out_dir, exist_ok=True)


def written_since(out_dir: str, before: set[str]) -> list[str]:
    """The files of out_dir a run wrote: those that were not there when it started (`before`:
    its entries then; prepare_output left none that a run writes), summary.json aside."""
    try:
        now = os.listdir(out_dir)
    except OSError:
        return []
    return sorted(n for n in now if n not in before and n not in (SUMMARY, SUMMARY + ".tmp")
                  and os.path.isfile(os.path.join(out_dir, n)))
