"""The process a run lives in: devices (``--device``), signals (SIGTERM/SIGHUP take Ctrl-C's
path), and the garbage-collector and allocator tuning that only the CLI process opts into
(:mod:`capmetrics.cli.process`); a library call leaves all of them as it found them."""
