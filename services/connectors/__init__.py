"""Connectors bundled with eos, found through the ``eos.connectors`` entry points.

Each module imports only :mod:`eos.api` (and the standard library and anyio), like a
third-party connector would:

- :mod:`services.connectors.verifiable`: ``VerifiableSource``, numbered records whose
  output ``eos verify`` checks for duplicates and gaps;
- :mod:`services.connectors.file`: ``FileSource``, the lines of files matching a glob.
"""
