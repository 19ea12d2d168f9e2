"""The pregen plugin (being written; registers nothing yet)."""
