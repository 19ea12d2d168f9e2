"""The rouge metric (being written; registers nothing yet)."""
