from capmetrics.cli import run

run()
