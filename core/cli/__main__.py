from capmetrics.cli import main

main()
