"""The `tilegraph` command line (see tilegraph/cli/main.py)."""
