"""The matching core: the cffi binding (_coreapi), the batch and per-event Python API (book), event dtypes (events), Arrow columns (arrow)."""
