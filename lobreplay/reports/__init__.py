"""Reports: Parquet tables (tables), analysis, the HTML viewer, latency histograms (hgrm, latency)."""
