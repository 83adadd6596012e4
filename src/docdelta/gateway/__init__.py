"""The model gateway: a key-holding reverse proxy between agents and model APIs.

`config` (pydantic, host side) says what it may reach and what calls cost; `server` is the
process in the gateway container (stdlib + httpx); `runtime` builds its image and runs one
gateway per run; `usage` reads token usage out of responses.
"""
