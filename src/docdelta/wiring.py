"""Build every real client: agents, sandbox providers and their gateways, the judge's and
the draft's model clients, the loopback gateway, the Docker engine, the results stores; and
resolve the model API keys (`resolve_keys`), the one rule for which upstream gets which key.

The entry points (the CLI, the Action, the composition root evaluation.py, suggest's model
draft) call this module; everything else receives what it builds. The Docker SDK and httpx
are imported only when asked for, so local runs (and the demo) never pay for them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import SecretStr

from docdelta.agents import Agent, agent_class, get_agent
from docdelta.agents.base import GatewayAgent
from docdelta.agents.command import REPOSITORY
from docdelta.checkout.envs import sandbox_env, toolchain_paths
from docdelta.config import ProjectConfig, check_exposure
from docdelta.errors import ConfigError
from docdelta.gateway.config import GatewayConfig, Upstream
from docdelta.git import Repo
from docdelta.grading.judge_api import UPSTREAMS, Endpoint, JudgeAPI, endpoint
from docdelta.keys import Keys
from docdelta.results.backends import ArmStore, open_store, token_auth
from docdelta.results.grades import JudgeInfo
from docdelta.sandbox import get_provider
from docdelta.sandbox.base import SandboxProvider
from docdelta.sandbox.pool import PerThreadProvider

if TYPE_CHECKING:
    from docker import DockerClient

    from docdelta.gateway.local import LocalGateway
    from docdelta.sandbox.base import DockerImageConfig
    from docdelta.sandbox.images import BuiltImage


def resolve_keys(
    upstreams: Sequence[Upstream],
    environ: Mapping[str, str],
    given: SecretStr | None = None,
    provider: str | None = None,
    *,
    asker: str = "the run",
) -> Keys:
    """Which upstream gets which key, the one rule for every entry: each of `upstreams` gets
    the value of the variable its `key_from` names. Without a `given` key (the CLI) that is
    the environment; with one (the Action's `api-key` input) the given key is the value of
    `provider`'s variable and nothing of the environment is read, so it never reaches an
    upstream that reads another variable."""
    key = given.get_secret_value().strip() if given is not None else ""
    if key:
        routes = ", ".join(u.name for u in upstreams)
        if provider is None:
            raise ConfigError(
                f"an API key was given, but {asker} names no model API to use it for",
                hint=f"set the provider (one of the gateway's upstreams: {routes})",
            )
        upstream = next((u for u in upstreams if u.name == provider), None)
        if upstream is None:
            raise ConfigError(
                f"provider {provider!r} is not one of the gateway's upstreams ({routes})",
                hint="set provider to one of them, "
                "or add the upstream under gateway.upstreams in .docdelta.yml",
            )
        environ = {upstream.key_from: key}
    return Keys({u.name: environ.get(u.key_from, "") for u in upstreams})


def model_client(
    endpoint: Endpoint, *, timeout_s: float, retries: int = 2, trust_env: bool = True
) -> JudgeAPI:
    """The HTTP client of one model API endpoint: the judge's, or suggest's draft through its
    loopback gateway (`trust_env=False`: no proxy between it and the gateway)."""
    import httpx  # noqa: PLC0415 - only the commands that ask a model pay for it

    return JudgeAPI(endpoint, httpx.Client(timeout=timeout_s, trust_env=trust_env), retries=retries)


def build_judge(judge: JudgeInfo, base_url: str | None, environ: Mapping[str, str]) -> JudgeAPI:
    """`docdelta judge` and `calibrate`'s client: the provider's key from `environ`."""
    keys = resolve_keys([UPSTREAMS[judge.provider]], environ)
    return model_client(endpoint(judge, base_url, keys), timeout_s=120.0)


def local_gateway(config: GatewayConfig, keys: Keys) -> LocalGateway:
    """The gateway process on the host's loopback that holds `keys` for docdelta's own calls."""
    from docdelta.gateway.local import LocalGateway  # noqa: PLC0415 - its server imports httpx

    return LocalGateway(config, keys)


def docker_engine() -> DockerClient:
    """The Docker engine `DOCKER_HOST` names (the SDK is imported only now)."""
    from docdelta.sandbox import docker as docker_sandbox  # noqa: PLC0415

    return docker_sandbox.engine()


@dataclass(frozen=True)
class AgentChoice:
    name: str
    cmd: str | None = None
    model: str | None = None
    max_output_tokens: int | None = None
    """The per-turn output cap (the built-in `openai` agent's); None keeps its default."""


def build_agent(choice: AgentChoice) -> Agent:
    """The agent adapter, with a clear error for options it needs and did not get. An unknown
    name is refused first: `--agent commandz --agent-cmd X` is a typo of the agent, not a
    misplaced --agent-cmd."""
    agent_class(choice.name)
    options: dict[str, object] = {}
    if choice.name == "command":
        if not choice.cmd:
            raise ConfigError(
                "the command agent needs a command to run",
                hint='pass --agent-cmd "./my-agent --json" (Action input: agent-command)',
            )
        options["cmd"] = choice.cmd
    elif choice.cmd:
        raise ConfigError(
            f"--agent-cmd is only for the command agent, not {choice.name!r}",
            hint="drop --agent-cmd or use --agent command",
        )
    if choice.max_output_tokens is not None:
        if choice.name != "openai":
            raise ConfigError(
                f"--max-output-tokens is for the built-in openai agent, not {choice.name!r}",
                hint="drop --max-output-tokens (other agents keep their CLI's own output cap)",
            )
        options["max_output_tokens"] = choice.max_output_tokens
    if choice.model:
        options["model"] = choice.model
    return get_agent(choice.name, **options)


@dataclass(frozen=True)
class BuiltSandbox:
    """What `build_provider` built, and what it learned on the way."""

    provider: SandboxProvider
    image_digest: str | None = None
    """The image the agent runs in (docker only): part of the experiment's identity and of the
    results cache key."""
    server: Mapping[str, str] | None = None
    """What the model servers on the gateway's egress network say they serve
    (`sandbox.upstream_identity`), for the manifest; None when there was none to ask."""
    agent_files: tuple[Path, ...] = ()
    """The host files the agent's command names, shown to the sandbox read-only
    (`Agent.show_user_files`), for `agent-check` to list."""


@dataclass(frozen=True)
class SandboxChoice:
    name: str = "local"
    allow_network: bool = False
    extra_ca: Path | None = None


def build_provider(
    choice: SandboxChoice,
    *,
    repo: Repo,
    private: Mapping[str, Path],
    config: ProjectConfig,
    agent: Agent | None,
    keys: Keys | None = None,
    jobs: int = 1,
    image_agent: type[Agent] | None = None,
) -> BuiltSandbox:
    """The sandbox provider, with what building it learned (`BuiltSandbox`): returned, never
    set on the agent.

    Every provider is an allowlist: the repository and `private` (name -> directory: the
    results, the tasks with their gold) are invisible to the agent, and `.docdelta.yml`
    may not name them among its read-only toolchain paths. `keys` (`resolve_keys`) go to the
    gateway of an agent that speaks through one; `jobs` runs at once need that many local
    slots (the docker provider serves them all, each run in its own containers, network
    and gateway). `agent` None builds the sandbox hidden tests run in (`docdelta
    selftest`): the same paths and env as a run's, no gateway, and the image of a run of the
    agent class `image_agent` (`agents.agent_class`), so the tests are graded in
    the very image a run grades them in."""
    hidden = {REPOSITORY: repo.root, **private}
    check_exposure(config.sandbox, hidden)
    named = [*config.sandbox.host_paths(), *toolchain_paths(config.sandbox)]
    own = agent.show_user_files(hidden, visible=named) if agent is not None else []
    shown = [*named, *own]
    ro_paths, env = [str(p) for p in shown], sandbox_env(config.sandbox)
    if choice.name == "docker":
        gateway_keys = _gateway_keys(agent, keys, config.gateway.upstreams)
        from docdelta.gateway.config import ANTHROPIC, GEMINI, OPENAI  # noqa: PLC0415
        from docdelta.sandbox import docker as docker_sandbox  # noqa: PLC0415
        from docdelta.sandbox.gateway_container import GatewayContainer, gateway_image  # noqa: PLC0415

        client = docker_engine()
        image_config = config.docker
        if choice.extra_ca is not None:
            image_config = image_config.model_copy(update={"extra_ca": choice.extra_ca})
        kind = type(agent) if agent is not None else image_agent
        built = _agent_image(client, image_config, repo.root, kind)
        gateway, server = None, None
        if agent is not None and gateway_keys is not None:
            image = gateway_image(client, image_config.base).tag
            # The run's model is the only one its requests may name (agent.model: None = any priced).
            pinned = config.gateway.model_copy(update={"model": agent.model})
            gateway = GatewayContainer(
                pinned, image, gateway_keys, egress_network=config.gateway.egress_network
            )
            if config.gateway.egress_network:  # a local model server: ask it what it serves
                from docdelta.sandbox.upstream_identity import model_servers  # noqa: PLC0415

                hosted = {ANTHROPIC.base_url, GEMINI.base_url, OPENAI.base_url}
                urls = {r.name: r.base_url for r in config.gateway.upstreams if r.base_url not in hosted}
                server = model_servers(client, built.tag, config.gateway.egress_network, urls)
        provider = docker_sandbox.DockerProvider(
            client, built.tag, gateway=gateway, ro_paths=ro_paths, env=env
        )
        return BuiltSandbox(provider, built.digest, server, tuple(own))
    if jobs == 1:
        return BuiltSandbox(
            get_provider(choice.name, allow_network=choice.allow_network, ro_paths=ro_paths, env=env),
            agent_files=tuple(own),
        )
    # A local provider holds one live sandbox (its slot): one per worker thread, all in the
    # first one's private root, so its /etc and clean-up are made and paid for once, not per worker.
    made: list[SandboxProvider] = []

    def slot_provider(slot: int) -> SandboxProvider:
        root = getattr(made[0], "root", None) if made else None
        shared = {"root": root} if isinstance(root, Path) else {}
        provider = get_provider(
            choice.name, allow_network=choice.allow_network, ro_paths=ro_paths, env=env, slot=slot, **shared
        )
        made.append(provider)
        return provider

    slots = PerThreadProvider(slot_provider)
    # The calling thread's is made now, where --jobs 1 makes its one provider: a sandbox that
    # cannot run here is refused before any checkout is sealed, and its probe sandboxes run
    # alone, not in the preflight beside the power line's simulation (the thread that calls
    # evaluate is the one that runs the preflight, so it is used, not made for nothing).
    slots.mine()
    return BuiltSandbox(slots, agent_files=tuple(own))


def _gateway_keys(agent: Agent | None, keys: Keys | None, upstreams: Sequence[Upstream]) -> Keys | None:
    """The keys of the gateway a model agent needs, None for an agent without one. No key is
    refused here, before any image is pulled or built (a first build takes minutes), naming
    the variable of the API the agent speaks."""
    if agent is None or agent.network != "gateway":
        return None
    if keys:
        return keys
    own = next((u for u in upstreams if u.name == agent.upstream), None)
    if own is None:
        wanted = ", ".join(u.key_from for u in upstreams)
        raise ConfigError("the model gateway has no API key", hint=f"set one of {wanted} in the environment")
    raise ConfigError(
        f"the model gateway has no API key for {agent.name}, which speaks to the {own.name} API",
        hint=f"set {own.key_from} in the environment (Action: the api-key input)",
    )


def _agent_image(
    client: DockerClient, image_config: DockerImageConfig, root: Path, kind: type[Agent] | None
) -> BuiltImage:
    """The image `kind`'s runs use: the environment image, plus the agent layer for an npm
    agent; restored from and kept in `docker.image_cache` (resolved against `root`) when set."""
    from docdelta.sandbox.image_cache import ImageCache  # noqa: PLC0415
    from docdelta.sandbox.images import environment_image  # noqa: PLC0415

    npm = list(kind.npm) if kind is not None else []
    cache = None
    if image_config.image_cache is not None:
        identity = image_config.model_dump(mode="json", exclude={"image_cache"}) | {"npm": npm}
        cache = ImageCache(client, root / image_config.image_cache.expanduser(), identity)
        cache.restore()
    built = environment_image(client, image_config, cache)
    if kind is not None and npm:
        from docdelta.agents.images import agent_image, published_ref  # noqa: PLC0415

        # An npm agent is a GatewayAgent, pinned to one version: its layer is published per pin.
        registry = image_config.agent_registry
        published = (
            published_ref(registry, kind.name, kind.pinned) if issubclass(kind, GatewayAgent) else None
        )
        built = agent_image(
            client, base=built.tag, npm=npm, extra_ca=image_config.extra_ca, published=published, cache=cache
        )
    if cache is not None:
        cache.store()
    return built


def build_results_store(
    kind: str, location: str, repo_root: Path, *, server_url: str, token: str
) -> ArmStore | None:
    """The `results-store` backend (None for `none`). A data branch is fetched and pushed with
    `token` when the checkout holds no credentials of its own: the fork-safe workflow checks
    out with `persist-credentials: false`, and a private repository's branch needs one."""
    auth = token_auth(repo_root, server_url, token) if kind == "branch" else None
    return open_store(kind, location, repo_root, auth)
