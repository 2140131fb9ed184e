"""The HTML renderer of sessions (``harness export --format html`` and ``harness serve``)."""
