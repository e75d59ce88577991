"""One report vocabulary (docs/reports.md): every table a replay writes has exactly the schema
lobreplay.reports.schemas gives it, the same names mean the same things on both venues, and
the reports hold the same rows and values as before the renames (tests/golden/)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from lobreplay.itch.spec import HEADER, LAYOUTS, price_scales
from lobreplay.reports import schemas

ROOT = Path(__file__).resolve().parents[1]
GOLDEN_DIR = ROOT / "tests" / "golden"
sys.path.insert(0, str(GOLDEN_DIR))

import make_report_digests as digests  # noqa: E402

SAMPLE_DAY = ROOT / "data" / "sample_day.itch.gz"


def _assert_schemas(out: Path, venue: str, depth_levels: int) -> list[str]:
    """Every table in out has exactly its schemas.schema (names, types, order; a status
    table's price columns their field metadata too). Returns the tables checked."""
    seen = []
    for p in sorted(out.glob("*.parquet")):
        got = pq.read_schema(p)
        if p.stem.startswith("status_"):
            t = p.stem.split("_")[1]
            want = schemas.status_schema(HEADER + LAYOUTS[t].fields, price_scales(t))
        else:
            want = schemas.schema(venue, p.stem, depth_levels)
        assert got.names == want.names, p.name
        assert got.types == want.types, p.name
        for g, w in zip(got, want):
            assert (g.metadata or None) == (w.metadata or None), (p.name, g.name)
        seen.append(p.stem)
    return seen


@pytest.mark.parametrize("every_ns", [1_000_000_000, 0], ids=["depth_by_time", "depth_at_changes"])
def test_every_itch_table_has_its_schema(tmp_path, every_ns):
    from lobreplay.itch.replay import ReplayConfig, replay_itch

    s = replay_itch(str(SAMPLE_DAY), str(tmp_path / "o"), ReplayConfig(depth_levels=4, depth_every_ns=every_ns))
    assert s["status"] == "ok"
    seen = _assert_schemas(tmp_path / "o", "itch", 4)
    assert {"desyncs", "executions", "bbo", "latency", "symbols", "depth", "latency_histograms"} <= set(seen)
    assert any(n.startswith("status_") for n in seen)


def test_every_table_of_a_parallel_itch_replay_has_its_schema(tmp_path):
    from lobreplay.itch.parallel import replay_itch_jobs
    from lobreplay.itch.replay import ReplayConfig

    s = replay_itch_jobs(str(SAMPLE_DAY), str(tmp_path / "o"), ReplayConfig(depth_levels=2), 2)
    assert s["status"] == "ok"
    assert {"executions", "depth", "symbols"} <= set(_assert_schemas(tmp_path / "o", "itch", 2))


@pytest.mark.parametrize("every_ns", [1_000_000_000, 0], ids=["depth_by_time", "depth_at_changes"])
def test_every_lobc_table_has_its_schema(tmp_path, every_ns):
    import golden_common
    from lobreplay.binance.convert import convert
    from lobreplay.l2.replay import L2ReplayConfig, replay_lobc

    path = tmp_path / "usdm.lobc"
    convert(golden_common.BINANCE / "cryptofeed" / "BINANCE_FUTURES.ws.1.0", path)
    s = replay_lobc(path, str(tmp_path / "o"), L2ReplayConfig(depth_levels=3, depth_every_ns=every_ns))
    assert s["status"] == "ok"
    seen = _assert_schemas(tmp_path / "o", "lobc", 3)
    assert set(seen) == {"bbo", "desyncs", "trades", "ticker_mismatches", "latency", "latency_histograms", "depth"}


def test_the_same_names_mean_the_same_on_both_venues():
    """A column both venues' tables have has one type (of values); every renamed column is in its table's
    schema under its new name, and no old name is left."""
    types: dict[str, set] = {}
    for venue in schemas.VENUES:
        for name in (*(schemas.ITCH_TABLES if venue == "itch" else schemas.LOBC_TABLES), "depth"):
            sch = schemas.schema(venue, name, 2)
            for f in sch:  # (a dictionary-encoded column: its values' type)
                types.setdefault(f.name, set()).add(str(getattr(f.type, "value_type", f.type)))
            for old, new in schemas.renamed(venue, name).items():
                assert new in sch.names, (venue, name, new)
                assert old not in sch.names, (venue, name, old)
    for col in ("event_ns", "sequence", "instrument", "symbol", "price", "qty", "trade_id", "bid_price", "ask_qty"):
        assert len(types[col]) == 1, (col, types[col])
    assert "time_ns" not in types and "recv_ns" not in types and "locate" not in types


def test_time_columns():
    itch = schemas.schema("itch", "bbo").names
    lobc = schemas.schema("lobc", "bbo").names
    assert (schemas.time_column(itch), schemas.timestamp_column(itch)) == ("event_ns", "event_ts")
    assert (schemas.time_column(lobc), schemas.timestamp_column(lobc)) == ("receive_ns", "receive_ts")
    assert schemas.time_column(schemas.schema("itch", "latency").names) is None


def test_an_unknown_venue_or_table_is_refused():
    with pytest.raises(ValueError, match="venue"):
        schemas.schema("cme", "bbo")
    with pytest.raises(KeyError, match="symbols"):
        schemas.schema("lobc", "symbols")


def test_reports_hold_the_same_rows_and_values_as_before_the_renames():
    """The golden digests were written on the code before the vocabulary changed (the
    script's docstring): the current reports, their columns mapped back through
    schemas.RENAMES, have the same rows, types and values."""
    golden = json.loads(digests.GOLDEN.read_text())
    got = digests.compute()
    assert sum(len(t) for t in got.values()) > 80
    assert digests.compare(golden, got, digests.renames_back()) == []
