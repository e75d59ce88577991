"""Stage 1 of the conversion: what a recording is, from its first bytes (read by scan.read_head:
gzip or plain, told from the bytes): its format, a --raw file's header, a cryptofeed log's
sibling.

Formats (gzip or plain, detected from the content):

* hftbacktest collector lines, `<recv ns> <message>`: combined-stream envelopes as the
  websocket delivered them, with the REST snapshot bodies (no envelope) between them at the
  time they arrived. The snapshot's symbol is the file's only symbol, else the one waiting
  for a snapshot whose buffered ids fit lastUpdateId best.
* our own `capture binance --raw` files: the same `<recv ns> <message>` lines, starting with a
  `{"lobreplay":{"format":"raw",...}}` header; snapshots are `{"stream":"<sym>@depthSnapshot",
  "data":<REST body>}` and the capture's own events (disconnects, failed snapshots) are
  `{"lobreplay":{"event":...}}` lines, so a conversion reproduces the capture's .lobc exactly.
* cryptofeed raw logs: `X.ws.N.M` (first line `<ws url> <-> <secs>`, then `<secs>: <envelope>`)
  and its sibling `X.http.N.M` (`<url> -> <secs>: <REST body>`), merged by receive time;
  the snapshot's symbol comes from the URL.

Several files are read as one continuous recording (e.g. hftbacktest day files in order).
"""
from __future__ import annotations

import re
from pathlib import Path

from lobreplay.binance.scan import read_head
from lobreplay.binance.sync import decode_json
from lobreplay.errors import InputError


def detect_format(path) -> str:
    """'raw' (ours), 'hftbacktest', 'cryptofeed-ws' or 'cryptofeed-http'."""
    head = read_head(Path(path))
    first = head.split(b"\n", 1)[0]
    if re.match(rb"^wss?://\S+ <-> [0-9.]+\s*$", first):
        return "cryptofeed-ws"
    if re.match(rb"^https?://\S+ -> [0-9.]+: ", first):
        return "cryptofeed-http"
    if re.match(rb"^[0-9]+ \{", first):
        return "raw" if first.split(b" ", 1)[1].startswith(b'{"lobreplay"') else "hftbacktest"
    if not head:
        raise InputError(f"{path}: empty file")
    raise InputError(f"{path}: not a recording this converter knows (hftbacktest `<recv ns> <json>` lines, "
                     "a lobreplay --raw file or a cryptofeed BINANCE*.ws/.http log)")


def raw_header(path) -> dict:
    """The header line of one of our --raw files (its first line)."""
    first = read_head(path, 1 << 16).split(b"\n", 1)[0]
    try:
        h = decode_json(first.split(b" ", 1)[1])["lobreplay"]
        if type(h) is not dict:
            raise TypeError
        return h
    except (ValueError, KeyError, TypeError, IndexError):
        raise InputError(f"{path}: byte 0: expected a lobreplay raw header line") from None


def cryptofeed_pair(path: Path) -> tuple[Path, Path | None]:
    m = re.match(r"^(.*)\.(ws|http)\.(\d+)\.(\d+)$", path.name)
    if not m:
        raise InputError(f"{path}: a cryptofeed log is named X.ws.N.M / X.http.N.M")
    other = "http" if m.group(2) == "ws" else "ws"
    sib = sorted(path.parent.glob(f"{m.group(1)}.{other}.*"))
    sib = sib[0] if sib else None
    return (path, sib) if m.group(2) == "ws" else (sib, path)
