"""The bleu metric (being written; registers nothing yet)."""
