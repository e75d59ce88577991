"""NASDAQ TotalView-ITCH 5.0: reading, decoding and replaying day files."""
from .spec import LAYOUTS, LENGTHS, PRICE4_SCALE

__all__ = ["LAYOUTS", "LENGTHS", "PRICE4_SCALE"]
