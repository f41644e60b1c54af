"""OpenTelemetry traces in: OTLP spans (JSON or protobuf) become trajectories."""
