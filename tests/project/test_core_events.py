"""benchmarks/core_events.py and core_events.c end to end on a small day: the driver builds
against the core, applies the events the script wrote and counts the same outputs as the
package's Session on those events; its checksum is the same with timing on (timing changes
no output) and with more repetitions."""
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lobreplay.core.book import Session
from lobreplay.core.events import EVENT_DTYPE

ROOT = Path(__file__).resolve().parents[2]


def read_events(path: Path):
    """The books and the events of a core_events.py file."""
    data = path.read_bytes()
    (nb,), at = struct.unpack_from("<I", data), 4
    books = []
    for _ in range(nb):
        books.append(struct.unpack_from("<IqqqI", data, at))
        at += struct.calcsize("<IqqqI")
    (nc,), at = struct.unpack_from("<I", data, at), at + 4
    parts = []
    for _ in range(nc):
        (k,), at = struct.unpack_from("<Q", data, at), at + 8
        parts.append(np.frombuffer(data, EVENT_DTYPE, k, at))
        at += k * EVENT_DTYPE.itemsize
    assert at == len(data)
    return books, np.concatenate(parts)


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
def test_the_core_alone_on_a_day_prefix(synthetic_day, tmp_path):
    ev_file, exe = tmp_path / "day.ev", tmp_path / "core_events"
    p = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "core_events.py"), str(synthetic_day.path),
                        str(ev_file), "--messages", "40000"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "40,000 messages" in p.stdout
    subprocess.run(["cc", "-O2", "-std=c11", f"-I{ROOT / 'csrc' / 'core'}", str(ROOT / "benchmarks" / "core_events.c"),
                    str(ROOT / "csrc" / "core" / "lob.c"), "-o", str(exe)], check=True, timeout=300)
    books, events = read_events(ev_file)
    assert len(books) > 5 and len(events) > 30000

    def drive(*opts):
        p = subprocess.run([str(exe), str(ev_file), *opts], capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stdout + p.stderr
        m = re.match(r"(\d+) events, (\d+) executions, (\d+) desyncs, (\d+) bbo rows; .*checksum ([0-9a-f]{16})$",
                     p.stdout.strip())
        assert m, p.stdout
        return tuple(int(x) for x in m.groups()[:4]), m.group(5)

    s = Session(65535)
    for inst, low, high, tick, cap in books:
        s.add_book(inst, low, high, tick, cap)
    out = s.apply(events, bbo=True, bbo_changes=True)
    assert (out.results["status"] == 0).all()
    counts, plain = drive("--bbo")
    assert counts == (len(events), len(out.execs), len(out.desyncs), len(out.bbo))
    assert drive("--bbo", "--timing", "3", "--reps", "2") == (counts, plain)
    counts_nobbo, other = drive()
    assert counts_nobbo == counts[:3] + (0,) and other != plain  # (no bbo rows hashed)
