"""One module per ``posref`` subcommand (see conformance.cli)."""
