"""harness: run pinned-image GPU controls under the host GPU lock and seal their evidence."""

__version__ = "0.1.0"
