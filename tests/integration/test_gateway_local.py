"""The gateway program as a loopback child process (`gateway.local`), the way `suggest --model`
uses it, against the scripted model server: the run token is the only credential it
accepts, the upstream gets the real key, and nothing it prints holds either."""

from __future__ import annotations

import hashlib

import httpx
from modelserver import ScriptedModelServer
from modelserver.script import Script, TextTurn

from docdelta.gateway.config import Budget, GatewayConfig, Upstream
from docdelta.gateway.local import LocalGateway
from docdelta.keys import Keys

KEY = "sk-docdelta-local-gateway-key-0123456789"
MODEL = "gpt-4o-mini"


def test_only_the_run_token_gets_through_and_no_credential_is_printed() -> None:
    script = Script(name="local", model=MODEL, turns=[TextTurn(text="hello")])
    with ScriptedModelServer(script) as server:
        upstream = Upstream(
            name="openai", base_url=f"{server.url}/v1", paths=["POST /chat/completions"], key_from="X"
        )
        config = GatewayConfig(upstreams=[upstream], model=MODEL, budget=Budget(max_requests=1))
        body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 10}
        with LocalGateway(config, Keys({"openai": KEY})) as gw:
            url = f"{gw.url}/openai/chat/completions"
            with_key = httpx.post(url, json=body, headers={"authorization": f"Bearer {KEY}"})
            with_token = httpx.post(url, json=body, headers={"authorization": f"Bearer {gw.token}"})
            over_budget = httpx.post(url, json=body, headers={"authorization": f"Bearer {gw.token}"})
        requests = server.requests
    assert with_key.status_code == 401  # the real key is no credential at the gateway
    assert with_token.status_code == 200 and with_token.json()["choices"][0]["message"]["content"] == "hello"
    assert over_budget.status_code == 402  # one request was allowed
    [seen] = requests
    assert seen["auth"] == [["authorization", hashlib.sha256(f"Bearer {KEY}".encode()).hexdigest()]]
    statuses = [c.status for c in gw.calls()]
    assert sorted(statuses) == [200, 401, 402]
    log = gw.log()
    assert "docdelta-gateway listening on 127.0.0.1:" in log
    assert KEY not in log and gw.token not in log
