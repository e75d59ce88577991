"""Tools for tests and benchmarks, not for replays: generated ITCH days, fault injection, a fake Binance."""
