"""The kernels plugin (being written; registers nothing yet)."""
