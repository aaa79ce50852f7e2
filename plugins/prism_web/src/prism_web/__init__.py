"""The web layer under Prism's HTTP faces (``prism_server``, ``prism_agui``, ``prism_a2a``).

Each face turns its caller into a :class:`~prism_core.Principal` with :func:`authorized`
(the host's ``authorize``, or :func:`default_authorize`: a bearer token, and without one this
machine only), reads bodies with :func:`read_json_object` (declared JSON, at most
``max_body_bytes``, one object with no repeated key at any depth), answers every refusal from
one table (:data:`REFUSALS`: 400 401 403 413 415 421) and claims the sessions callers name
with :class:`SessionClaims`, and runs decided runs and the runs it starts outside its
requests with :class:`FaceWorkers`. The faces keep only what their protocol needs.
"""

from __future__ import annotations

from ._authorize import Authorize, authorized, default_authorize, token_from_environment
from ._body import (
    DEFAULT_MAX_BODY_BYTES,
    JSON_MEDIA_TYPE,
    MAX_JSON_DEPTH,
    check_max_body_bytes,
    parse_json_object,
    read_bounded,
    read_json_object,
    require_json,
)
from ._claims import SessionClaim, SessionClaims
from ._errors import (
    REFUSALS,
    BadRequest,
    Forbidden,
    Misdirected,
    NotAuthenticated,
    PayloadTooLarge,
    UnsupportedMediaType,
    WebError,
    error_body,
    error_response,
)
from ._hosts import client_is_loopback, host_name, is_loopback, require_loopback_host
from ._stores import store_pair
from ._workers import FaceWorkers

__all__ = (
    "DEFAULT_MAX_BODY_BYTES",
    "JSON_MEDIA_TYPE",
    "MAX_JSON_DEPTH",
    "REFUSALS",
    "Authorize",
    "BadRequest",
    "FaceWorkers",
    "Forbidden",
    "Misdirected",
    "NotAuthenticated",
    "PayloadTooLarge",
    "SessionClaim",
    "SessionClaims",
    "UnsupportedMediaType",
    "WebError",
    "authorized",
    "check_max_body_bytes",
    "client_is_loopback",
    "default_authorize",
    "error_body",
    "error_response",
    "host_name",
    "is_loopback",
    "parse_json_object",
    "read_bounded",
    "read_json_object",
    "require_json",
    "require_loopback_host",
    "store_pair",
    "token_from_environment",
)
