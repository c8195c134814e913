"""OpenTelemetry spans for tether runs, exported over OTLP/HTTP (GenAI semantic conventions).

Off and costless until an endpoint is configured (``[telemetry]`` in config.toml, or the standard
``OTEL_EXPORTER_OTLP_*`` variables): importing this package imports nothing from opentelemetry.
"""

from tether.telemetry.otel import SpanTracer, Telemetry, telemetry_from_settings, trace_id_for

__all__ = ["SpanTracer", "Telemetry", "telemetry_from_settings", "trace_id_for"]
