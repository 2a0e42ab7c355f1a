"""A throwaway certificate authority for TLS tests (see :mod:`services.dev_tls`): a CA,
certificates it signs for 127.0.0.1 / localhost (usable by servers and clients); another
instance is an unrelated CA."""

from __future__ import annotations

from services.dev_tls import CertificateAuthority as CertificateAuthority
from services.dev_tls import Issued as Issued
