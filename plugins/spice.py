"""The spice metric (being written; registers nothing yet)."""
