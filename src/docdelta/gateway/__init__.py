"""The model gateway: a key-holding reverse proxy between agents and model APIs.

`config` (pydantic, host side) says what it may reach and what calls cost; `server` is the
process in the gateway container (stdlib + httpx); `usage` reads token usage out of
responses; `policy` the exact allowlist and sanitising; `local` runs the same program on
loopback for docdelta's own model calls. The container that runs it per run is sandbox
machinery: `docdelta.sandbox.gateway_container`.
"""
