"""The embedders plugin (being written; registers nothing yet)."""
