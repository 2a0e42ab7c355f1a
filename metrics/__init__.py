"""Prometheus metric definitions and the exporter (filled in by the metrics issue)."""
