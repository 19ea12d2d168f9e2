"""The trm plugin (being written; registers nothing yet)."""
