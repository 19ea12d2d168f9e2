"""MAUVE (placeholder)."""
