"""The wmd plugin (being written; registers nothing yet)."""
