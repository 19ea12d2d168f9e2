"""The meteor metric (being written; registers nothing yet)."""
