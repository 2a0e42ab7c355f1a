"""Definitions and validation of worker and connector settings."""
