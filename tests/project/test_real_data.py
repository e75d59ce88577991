"""The real fixtures bundled in data/real/ (conftest.REAL): every file there is listed in
data/real/checksums.tsv and in its folder's PROVENANCE.md, and is byte for byte its source's
(the git blob id and sha256 recorded; for the LOBSTER .csv.gz, those of the decompressed bytes,
so they equal the source repository's blob). No test, notebook, benchmark or make target reads
a data folder beside the checkout any more."""
import gzip
import hashlib
import re

import pytest

from conftest import REAL, ROOT

COMPRESSED = ".csv.gz"  # stored gzip-compressed here; recorded as the source's plain bytes


def listed() -> list[tuple[str, int, str, str]]:
    rows = []
    for line in (REAL / "checksums.tsv").read_text().splitlines():
        if line and not line.startswith("#"):
            path, size, blob, sha = line.split("\t")
            rows.append((path, int(size), blob, sha))
    return rows


def git_blob_id(data: bytes) -> str:
    """What `git hash-object` prints for these bytes."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def test_git_blob_id_is_gits():
    # (git hash-object of an empty file and of "hello\n": well-known ids)
    assert git_blob_id(b"") == "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"
    assert git_blob_id(b"hello\n") == "ce013625030ba8dba906f756967f9e9ca394464a"


def test_every_bundled_file_is_listed():
    on_disk = {str(p.relative_to(REAL)) for p in REAL.rglob("*") if p.is_file()}
    notes = {p for p in on_disk if p.endswith("PROVENANCE.md")}
    assert notes == {"itch/PROVENANCE.md", "lobster/PROVENANCE.md", "binance/PROVENANCE.md"}
    assert on_disk - notes - {"checksums.tsv"} == {row[0] for row in listed()}
    assert len(listed()) == 21


@pytest.mark.parametrize("path, size, blob, sha", listed(), ids=[row[0] for row in listed()])
def test_bundled_file_is_the_sources(path, size, blob, sha):
    data = (REAL / path).read_bytes()
    if path.endswith(COMPRESSED):
        assert data[:2] == b"\x1f\x8b", f"{path}: not gzip"
        data = gzip.decompress(data)
    assert (len(data), git_blob_id(data), hashlib.sha256(data).hexdigest()) == (size, blob, sha), path
    note = (REAL / path.split("/")[0] / "PROVENANCE.md").read_text()
    name = path.split("/", 1)[1]
    row = next((line for line in note.splitlines() if line.startswith(f"| `{name}` |")), None)
    assert row is not None, f"{path} has no row in its PROVENANCE.md"
    assert f"`{blob}`" in row and f"`{sha}`" in row and f"| {size:,} |" in row, row


def test_nothing_reads_a_data_folder_beside_the_checkout():
    """The fixtures used to be read from ../shared/data: a clone without that folder failed
    about a hundred tests. The tests, notebooks, benchmarks, the package and the Makefile now
    name data/real only."""
    beside = re.compile(r"""shared["']?\s*[/,]\s*["']?data""")  # shared/data, "shared" / "data", "shared", "data"
    files = [ROOT / "Makefile", *ROOT.glob("tests/**/*.py"), *ROOT.glob("benchmarks/**/*.py"),
             *ROOT.glob("notebooks/*.ipynb"), *ROOT.glob("lobreplay/**/*.py")]
    hits = [f"{f.relative_to(ROOT)}:{i}: {line.strip()}" for f in files if f.name != "test_real_data.py"
            for i, line in enumerate(f.read_text().splitlines(), 1) if beside.search(line)]
    assert hits == []
