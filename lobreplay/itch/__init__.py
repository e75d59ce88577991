"""NASDAQ TotalView-ITCH 5.0: reading, decoding and replaying day files."""
from lobreplay.itch.spec import LAYOUTS, LENGTHS, PRICE4_SCALE

__all__ = ["LAYOUTS", "LENGTHS", "PRICE4_SCALE"]
