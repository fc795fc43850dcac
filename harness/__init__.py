"""What the test suite and the benchmarks both drive the product with, outside either: the
dashboard served and opened in headless Chromium (`browser`), a Streamlit client that plays
participants over the websocket (`st_client`), a throwaway PostgreSQL server (`pg`) and the
tiny workspaces of known answers (`factory`).
Benchmarks import this, never the test suite (tests/test_imports.py checks it)."""
