"""The one Neo4j driver wrapper: connecting, the lifecycle, and driver errors translated.

Both Neo4j adapters (:class:`.store.Neo4jStore`, the write side and rebuilds,
and :class:`.reader.TraceReader`, the read side's queries) own a driver
through :class:`DriverOwner`; no driver exception leaves this package:
unavailability becomes :class:`StoreUnavailable` (retryable), everything else
:class:`StoreError`.

Example::

    with Neo4jStore(settings) as store:     # connects on enter, closes on exit
        store.setup()
"""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Any, ClassVar, Self

from neo4j import Driver, GraphDatabase
from neo4j.exceptions import (
    AuthError,
    ConfigurationError,
    DriverError,
    Neo4jError,
    ServiceUnavailable,
    SessionExpired,
    TransientError,
)

from provstream.errors import ConfigError, StoreError, StoreUnavailable
from provstream.security import neo4j_driver_target
from provstream.settings import Settings


def auth_message(settings: Settings) -> str:
    """The one line for credentials Neo4j refused, naming the settings to fix (never the password)."""
    return (f"Neo4j at {settings.neo4j_uri} refused user {settings.neo4j_user!r} with the given password: "
            "fix PROVSTREAM_NEO4J_PASSWORD (or PROVSTREAM_NEO4J_USER); the stack's generated password is in "
            f"{settings.stack_dir / 'secrets' / 'neo4j-password'} (bash deploy/neo4j.sh password)")


def is_auth_error(exc: BaseException) -> bool:
    """Whether ``exc`` is Neo4j refusing the credentials (wrong password or user, too many attempts)."""
    return isinstance(exc, AuthError) or (isinstance(exc, Neo4jError) and (exc.code or "").startswith(
        ("Neo.ClientError.Security.Unauthorized", "Neo.ClientError.Security.AuthenticationRateLimit")))


@contextmanager
def translated(action: str, settings: Settings | None = None) -> Iterator[None]:
    """Map Neo4j driver exceptions to provstream's, naming the action that failed.

    :param action: what was being done, for the message (``"writing a batch"``).
    :param settings: when given, refused credentials name the settings to fix
        (``PROVSTREAM_NEO4J_PASSWORD``) instead of the server's text.
    :raises StoreUnavailable: the server is unreachable or the error is transient (retryable).
    :raises StoreError: anything else the driver or server reported.

    Example::

        with translated("listing traces", settings):
            driver.execute_query(...)
    """
    try:
        yield
    except (Neo4jError, DriverError) as exc:
        if settings is not None and is_auth_error(exc):
            raise StoreError(auth_message(settings)) from exc
        cause = _tls_cause(exc) if isinstance(exc, ServiceUnavailable) else ""
        if cause:
            raise ConfigError(f"TLS to Neo4j failed while {action}: {cause} (check PROVSTREAM_NEO4J_URI "
                              "bolt+s:// / neo4j+s:// and PROVSTREAM_NEO4J_CA_FILE)") from exc
        if isinstance(exc, (ServiceUnavailable, SessionExpired, TransientError)):
            raise StoreUnavailable(f"Neo4j unavailable while {action}: {exc}") from exc
        if isinstance(exc, ConfigurationError):
            raise StoreError(f"Neo4j driver refused its configuration while {action}: {exc} "
                             "(check PROVSTREAM_NEO4J_URI)") from exc
        raise StoreError(f"Neo4j refused {action}: {exc}") from exc


def _tls_cause(exc: BaseException) -> str:
    """The TLS failure behind a driver error (an untrusted certificate, a plaintext server), or ``""``."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLCertVerificationError):
            return f"the server's certificate is not trusted ({seen.verify_message})"
        if isinstance(seen, ssl.SSLError):
            return f"no TLS handshake ({seen.reason or seen})"
        seen = seen.__cause__ or seen.__context__
    text = str(exc)
    return text if "SSL" in text or "certificate" in text else ""


def connect_driver(settings: Settings, **options: Any) -> Driver:
    """A connected driver (authenticated, notifications off); driver errors translated.

    :param settings: ``neo4j_uri`` and the credentials.
    :param options: extra driver options (e.g. ``max_transaction_retry_time``).
    :returns: a driver whose connectivity was verified; the caller closes it.
    """
    with translated(f"connecting to {settings.neo4j_uri}", settings):
        uri, tls = neo4j_driver_target(settings)  # bolt+s:// with PROVSTREAM_NEO4J_CA_FILE
        driver = GraphDatabase.driver(uri, auth=settings.neo4j_auth,
                                      notifications_min_severity="OFF", **tls, **options)
        try:
            driver.verify_connectivity()
        except BaseException:
            driver.close()
            raise
    return driver


class DriverOwner:
    """Owns one driver: no I/O in the constructor, connected by :meth:`open` or ``with``."""

    driver_options: ClassVar[dict[str, Any]] = {}

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._driver: Driver | None = None

    def open(self) -> Self:
        if self._driver is None:
            self._driver = connect_driver(self._settings, **self.driver_options)
        return self

    def close(self) -> None:
        if self._driver is not None:
            self._driver.close()
            self._driver = None

    def __enter__(self) -> Self:
        return self.open()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
