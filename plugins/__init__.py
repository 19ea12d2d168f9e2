"""The bundled plugins. Each module is an entry point of group ``capmetrics`` declared in
capmetrics' own ``pyproject.toml``, loaded exactly like a third-party plugin."""
