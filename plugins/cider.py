"""The cider metric (being written; registers nothing yet)."""
