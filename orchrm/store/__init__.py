"""The artifact store (DuckDB) and the ingest adapters that fill it."""
