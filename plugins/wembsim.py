"""The wembsim plugin (being written; registers nothing yet)."""
