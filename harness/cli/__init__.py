"""Command-line interface: one module per command family, registered in `main`."""
