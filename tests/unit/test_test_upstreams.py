"""The Anthropic upstream the Action's tests write into `.docdelta.yml` (the act test, the
real-agents test; `docker_helpers.ANTHROPIC_UPSTREAM`, one copy) is docdelta's own built-in
route with its URL moved to the scripted model server and no call the built-in refuses: what
those tests pass is the gateway a user's run gets, not a looser route of their own. (It
leaves out `count_tokens`, which the agents there do not call.)"""

from __future__ import annotations

import yaml
from docker_helpers import UPSTREAM_PORT, anthropic_upstream

from docdelta.config import ProjectConfig
from docdelta.gateway.config import ANTHROPIC


def test_the_tests_anthropic_upstream_is_the_built_in_one_on_the_model_server() -> None:
    text = f"gateway:\n  egress_network: net\n  upstreams:\n{anthropic_upstream('net')}"
    (upstream,) = ProjectConfig.model_validate(yaml.safe_load(text)).gateway.upstreams
    assert upstream.base_url == f"http://net-modelserver:{UPSTREAM_PORT}"
    assert set(upstream.paths) <= set(ANTHROPIC.paths)
    moved = {"base_url": ANTHROPIC.base_url, "paths": ANTHROPIC.paths}
    assert upstream.model_copy(update=moved) == ANTHROPIC
