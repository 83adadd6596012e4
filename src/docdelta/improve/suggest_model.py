"""`docdelta suggest --model M`: a model-written draft beside the deterministic one.

The deterministic draft (`docdelta.improve.suggest`) can only quote what already stands somewhere;
a model can phrase a rule. It is asked once, through the same key-holding gateway the agents
use, started on the host's loopback (`gateway.local`): this process's request carries a
one-off run token, the gateway adds the key, pins the model, caps the call's budget and
logs its usage. The prompt holds the missed gold items (per drafted task: what the runs
missed, the gold citations) and the condition's instruction files, and asks for one unified
diff as JSON.

The reply is untrusted text and is refused, with a message that says why and never quotes
it, unless it passes every check in this order: it holds no key the gateway was given, no
run token and no well-known secret format; it is JSON with a `patch`; the patch is at most
`MAX_DRAFT_BYTES` and adds at most `MAX_DRAFT_LINES` lines; every path it names stays
inside the repository; and it applies cleanly to the condition's instruction files,
touching nothing else (`workspace.apply_to_overlay`, the `--patch` check). Like the
deterministic draft it proves nothing: `docdelta run --conditions head,patched --patch` does.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath

from pydantic import Field, SecretStr, ValidationError

from docdelta.agents.models import RunStatus
from docdelta.checkout.seal import apply_to_overlay
from docdelta.config import load_project_config, matcher
from docdelta.errors import ConfigError, DraftRefused, InfraError
from docdelta.gateway.config import Budget, GatewayConfig, Upstream
from docdelta.git import Repo
from docdelta.grading.judge_api import UPSTREAMS, Endpoint
from docdelta.improve.suggest import Suggestion
from docdelta.instructions.detect import InstructionMatcher, Overlay, diff_files, instruction_files
from docdelta.results.grades import JudgeInfo, JudgeProvider
from docdelta.results.models import Manifest, RunResult
from docdelta.tasks.models import Task
from docdelta.vocabulary import HEAD, PATCHED, Frozen
from docdelta.wiring import local_gateway, model_client, resolve_keys

REFUSED = "the model's draft was refused: "
"""How every refusal starts; the Action's comment says the rest after the model's name."""
MAX_DRAFT_BYTES = 8_000
"""A minimal patch is a few lines; anything this large is not one (and is not read further)."""
MAX_DRAFT_LINES = 20
"""Lines a draft may add: the deterministic draft adds one per missed rule."""
DRAFT_BUDGET = Budget(max_requests=1, max_tokens=60_000, max_cost_usd=0.50)
"""The draft's one call at the gateway: a prompt of a few files, a short reply."""
DRAFT_MAX_OUTPUT_TOKENS = 2_048
_FILE_CHARS = 20_000
"""Each instruction file is shown up to this many characters."""

SECRET_FORMATS = {
    "a GitHub token": re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,})"),
    "an API key": re.compile(r"\bsk-(?:ant-)?[A-Za-z0-9_-]{20,}"),
    "an AWS access key": re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    "a Google API key": re.compile(r"\bAIza[0-9A-Za-z_-]{35}"),
    "a Slack token": re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),
    "a private key": re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
}
"""Well-known credential formats a draft must not carry into an instruction file, where every
agent run (and the PR) would read it. The keys the gateway holds are checked exactly."""

SYSTEM = (
    "You edit the instruction files coding agents read (AGENTS.md, CLAUDE.md, rules). Agents "
    "working in this repository missed the gold items listed below. Write the smallest change to "
    "the instruction files shown that would have told them: add or correct a few short lines, "
    "quote commands exactly, change nothing else, and touch no other file. Reply with one JSON "
    'object {"patch": "<a unified diff as `git diff` writes it, paths a/<file> b/<file>>"}.'
)


class ModelDraft(Frozen):
    """suggested-model.patch.json beside the model's patch: who wrote it and what it cost."""

    provider: JudgeProvider
    model: str
    file_count: int = Field(description="instruction files the patch changes")
    added_lines: int = Field(description="lines with text it adds (blank ones not counted)")
    patched_sha256: str = Field(description="of the condition's instruction files with it applied")
    tokens_in: int | None
    tokens_out: int | None
    cost_usd: float | None = Field(description="as the gateway settled it")
    patch: str


def draft_path(out: Path) -> Path:
    """Where the model's patch goes beside the deterministic `out` (its reasons: `<path>.json`)."""
    return out.with_name(f"{out.stem}-model{out.suffix}")


def write(got: ModelDraft, out: Path) -> Path:
    """The model's patch beside `out`, who wrote it and what it cost beside that; its path."""
    path = draft_path(out)
    try:
        path.write_text(got.patch)
        path.with_name(path.name + ".json").write_text(
            got.model_dump_json(indent=2, exclude={"patch"}) + "\n"
        )
    except OSError as exc:
        raise ConfigError(f"cannot write {path}: {exc.strerror or exc}", hint="pass another --out") from None
    return path


def measured_as(suggestion: Suggestion, out: Path, proof: Manifest) -> tuple[Suggestion, int] | None:
    """When `proof`'s patched condition ran the model's draft written beside `out` (its
    instruction files, by overlay hash), the suggestion to measure in its place and the
    lines it adds; None when there is no such draft or the run was of another patch."""
    path = draft_path(out)
    spec = next((c for c in proof.conditions if c.name == PATCHED), None)
    try:
        side = json.loads(path.with_name(path.name + ".json").read_text())
        got = ModelDraft.model_validate({**side, "patch": path.read_text()})
    except (OSError, ValueError):
        return None
    if spec is None or spec.overlay_sha256 != got.patched_sha256:
        return None
    # The overlay is the draft's: the file measured is the one the run holds, and the
    # deterministic draft's rules and replacements are not what it ran.
    update = {
        "patch": got.patch,
        "patched_sha256": spec.files.get(suggestion.file, ""),
        "rules": [],
        "replaced": [],
    }
    return suggestion.model_copy(update=update), got.added_lines


def _missed_items(suggestion: Suggestion, results: Sequence[RunResult]) -> dict[str, list[str]]:
    """Per drafted task, the gold items its runs in the condition missed (each once)."""
    missed: dict[str, dict[str, None]] = {t: {} for t in suggestion.tasks}
    for r in results:
        if r.cell.task in missed and r.cell.condition == suggestion.condition and r.score is not None:
            if r.status is RunStatus.infra_error:
                continue
            for item in r.score.missed:
                missed[r.cell.task][f"{item.kind}: {item.expected}"] = None
    return {t: list(items) for t, items in missed.items()}


def prompt(
    suggestion: Suggestion, tasks: Mapping[str, Task], results: Sequence[RunResult], files: Overlay
) -> str:
    """The user message: the misses per task, then the condition's instruction files."""
    parts = [f"Condition: {suggestion.condition}. Tasks the agents scored worst on:"]
    for task, items in _missed_items(suggestion, results).items():
        t = tasks[task]
        parts.append(
            f"\n## Task {task} (mean score {suggestion.tasks[task]:.2f})\nPrompt: {t.prompt.strip()}"
        )
        parts += [f"- missed {item}" for item in items]
        parts += [f"- gold citation: {c.path}: {c.quote!r}" for c in t.gold_citations]
    parts.append(f"\nSuggested file: {suggestion.file}. The instruction files now:")
    for path, data in sorted(files.files.items()):
        text = data.decode("utf-8", "replace")[:_FILE_CHARS]
        parts.append(f"\n--- {path}\n{text}")
    return "\n".join(parts)


def _check_secrets(text: str, secrets: Sequence[str]) -> None:
    if any(s and s in text for s in secrets):
        raise DraftRefused(
            f"{REFUSED}its reply holds a key or token the gateway was given; nothing of it was written",
            hint="the model echoed a credential: check what reaches its context, then rerun",
        )
    for what, pattern in SECRET_FORMATS.items():
        if pattern.search(text):
            raise DraftRefused(
                f"{REFUSED}its reply holds what looks like {what}; nothing of it was written",
                hint="a draft may not put a credential into an instruction file; rerun or edit by hand",
            )


def _patch_text(reply: str) -> str:
    try:
        data = json.loads(reply)
    except ValueError:
        data = None
    patch = data.get("patch") if isinstance(data, dict) else None
    if not isinstance(patch, str) or not patch.strip():
        raise DraftRefused(
            'the model\'s draft was refused: its reply is not a JSON object with a "patch" string',
            hint="try another --model, or use the deterministic draft",
        )
    return patch if patch.endswith("\n") else patch + "\n"


def _added(patch: str) -> list[str]:
    return [line[1:] for line in patch.splitlines() if line.startswith("+") and not line.startswith("+++")]


def _safe_path(path: str) -> bool:
    pure = PurePosixPath(path)
    return bool(path) and not pure.is_absolute() and ".." not in pure.parts and "\\" not in path


def validate(
    reply: str, head: Overlay, matcher: InstructionMatcher, secrets: Sequence[str]
) -> tuple[str, Overlay]:
    """(the patch, the patched files), or DraftRefused saying which check failed."""
    _check_secrets(reply, secrets)
    patch = _patch_text(reply)
    size = len(patch.encode())
    if size > MAX_DRAFT_BYTES:
        raise DraftRefused(
            f"{REFUSED}the patch is {size:,} bytes, over the limit of "
            f"{MAX_DRAFT_BYTES:,} for a minimal change",
            hint="a suggestion adds a few lines; use the deterministic draft or rerun",
        )
    added = len(_added(patch))
    if added > MAX_DRAFT_LINES:
        raise DraftRefused(
            f"{REFUSED}it adds {added} lines, over the limit of {MAX_DRAFT_LINES}",
            hint="a suggestion adds a few lines; use the deterministic draft or rerun",
        )
    try:
        paths = [p for df in diff_files(patch) for p in (df.old, df.new) if p]
    except ConfigError as exc:
        raise DraftRefused(f"{REFUSED}{exc.message}", hint=exc.hint) from None
    for path in paths:
        if not _safe_path(path):
            raise DraftRefused(
                f"{REFUSED}it names the path {path[:120]!r}, which leaves the repository",
                hint="a draft may only change the instruction files it was shown",
            )
    try:
        patched = apply_to_overlay(head, patch.encode(), "the model's draft", "the model's draft", matcher)
    except ConfigError as exc:
        raise DraftRefused(f"{REFUSED}{exc.message}", hint=exc.hint) from None
    return patch, patched


def upstream_of(gateway: GatewayConfig, provider: JudgeProvider) -> Upstream:
    """The model API the draft is asked through: the project's upstream of that name, else the
    provider's public API. Its `key_from` names where the key is read."""
    return next((u for u in gateway.upstreams if u.name == provider), UPSTREAMS[provider])


def draft_for(
    suggestion: Suggestion,
    repo: Repo,
    manifest: Manifest,
    results: Sequence[RunResult],
    tasks: Mapping[str, Task],
    *,
    provider: JudgeProvider,
    model: str,
    environ: Mapping[str, str],
    api_key: SecretStr | None = None,
    base_url: str | None = None,
) -> ModelDraft:
    """`draft` against the condition's instruction files in `repo`, through the gateway the
    project's `.docdelta.yml` (at base) configures: `suggest --model` and the Action's
    `suggest-model` both ask this way. `api_key` (the Action's input, when it is this
    provider's) stands for the key `environ` would hold."""
    config = load_project_config(repo, manifest.base_sha)
    match = matcher(config)
    ref = manifest.head_sha if suggestion.condition == HEAD else manifest.base_sha
    return draft(
        suggestion, tasks, results, instruction_files(repo, ref, match), match,
        provider=provider, model=model, gateway=config.gateway, environ=environ, api_key=api_key,
        base_url=base_url,
    )  # fmt: skip


def draft(
    suggestion: Suggestion,
    tasks: Mapping[str, Task],
    results: Sequence[RunResult],
    head: Overlay,
    matcher: InstructionMatcher,
    *,
    provider: JudgeProvider,
    model: str,
    gateway: GatewayConfig,
    environ: Mapping[str, str],
    api_key: SecretStr | None = None,
    base_url: str | None = None,
) -> ModelDraft:
    """Ask `model` once through a loopback gateway (to the project's upstream for `provider`,
    or `base_url`); the validated draft, or DraftRefused."""
    upstream = upstream_of(gateway, provider)
    if base_url:
        try:
            upstream = Upstream.model_validate({**upstream.model_dump(), "base_url": base_url.rstrip("/")})
        except ValidationError:
            raise ConfigError(
                f"--base-url {base_url!r} is not an http(s) URL", hint="e.g. https://api.openai.com/v1"
            ) from None
    keys = resolve_keys([upstream], environ, api_key, provider)
    key = keys.get(upstream.name)
    if not key:
        raise ConfigError(
            f"suggest --model needs the {provider} API key in the environment variable {upstream.key_from}",
            hint=f"export {upstream.key_from}; the gateway holds it, the request never does",
        )
    config = gateway.model_copy(
        update={
            "upstreams": [upstream],
            "model": model,
            "budget": DRAFT_BUDGET,
            "max_output_tokens": DRAFT_MAX_OUTPUT_TOKENS,
            "fingerprints": {},
        }
    )
    with local_gateway(config, keys) as gw:
        endpoint = Endpoint(
            judge=JudgeInfo(provider=provider, model=model),
            base_url=f"{gw.url}/{upstream.name}",
            key=gw.token,
            role="suggest's model draft",
            hint="check --model and the gateway's upstream in .docdelta.yml (gateway.upstreams)",
        )
        api = model_client(endpoint, timeout_s=300.0, retries=0, trust_env=False)
        try:
            reply = api.ask(SYSTEM, prompt(suggestion, tasks, results, head))
        except InfraError as exc:  # an upstream may echo the key in its error body
            raise InfraError(exc.message.replace(key, "[key]"), hint=exc.hint) from None
        finally:
            api.close()
    patch, patched = validate(reply.text, head, matcher, [key, gw.token])
    calls = gw.calls()
    call = calls[0] if calls else None
    added = sum(1 for line in _added(patch) if line.strip())
    return ModelDraft(
        provider=provider,
        model=model,
        file_count=sum(1 for p in {*head.files, *patched.files} if head.files.get(p) != patched.files.get(p)),
        added_lines=added,
        patched_sha256=patched.sha256,
        tokens_in=call.tokens_in if call else reply.tokens_in,
        tokens_out=call.tokens_out if call else reply.tokens_out,
        cost_usd=call.cost_usd if call else None,
        patch=patch,
    )
