"""Docker API plumbing shared by the sandbox and the gateway: labels, the agent user,
and the raw socket under the SDK's hijacked-connection wrappers."""

from __future__ import annotations

import socket
from typing import cast

LABEL = "org.docdelta"
"""Every Docker object we create carries this label (value "1"); `gc` removes by it."""
RUN_LABEL = f"{LABEL}.run"
ROLE_LABEL = f"{LABEL}.role"
AGENT_UID = 1000
"""The unprivileged user every container runs as (the base image names it `agent`)."""
AGENT_USER = f"{AGENT_UID}:{AGENT_UID}"


def raw_socket(stream: object) -> socket.socket:
    """The socket of an attach/exec stream, for half-closing stdin and select()."""
    return cast(socket.socket, getattr(stream, "_sock", stream))
