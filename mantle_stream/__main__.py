"""``python -m mantle_stream`` runs the command line."""

from mantle_stream.cli import main

raise SystemExit(main())
