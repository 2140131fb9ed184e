"""``--otel`` for ``run`` and ``chat``: OpenTelemetry traces of the runs (the ``otel`` extra),
configured by the standard ``OTEL_*`` environment variables (``harness.tracing``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import click

__all__ = ["otel_option", "otel_tracing"]

F = TypeVar("F", bound=Callable[..., Any])


def otel_option(command: F) -> F:
    """Add ``--otel`` to a command; it receives ``otel: bool``."""
    return click.option(
        "--otel",
        is_flag=True,
        help="Send OpenTelemetry traces of the run (needs the otel extra; OTEL_* variables "
        "pick the exporter, e.g. OTEL_EXPORTER_OTLP_ENDPOINT; docs/observability.md).",
    )(command)


@contextmanager
def otel_tracing(enabled: bool) -> Iterator[None]:
    """Trace every harness run inside the block when ``enabled``; the spans are sent (the
    provider flushed and shut down) on the way out."""
    if not enabled:
        yield
        return
    from harness.tracing import configure_from_env, instrument

    try:
        provider = configure_from_env()
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    instrumentation = instrument(tracer_provider=provider)
    try:
        yield
    finally:
        instrumentation.uninstrument()
        shutdown = getattr(provider, "shutdown", None)
        if shutdown is not None:
            shutdown()
