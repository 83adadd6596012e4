#!/usr/bin/env python3
"""docdelta's built-in coding agent: a Chat Completions tool-calling loop (stdlib only).

docdelta copies this script into the sandbox and runs it with `python3`, so it needs
nothing in the image but Python. It is deliberately plain, the agent for any
OpenAI-compatible server (llama.cpp, vLLM, ollama, the gateway in front of a hosted API):

- the root AGENTS.md (the cross-agent instruction file) is loaded into the system prompt,
  as Codex and OpenCode do, so instruction files count without the model looking for them;
- one tool, `shell`, whose command runs in the working directory (the checkout);
- temperature 0 and the run's seed, so repeats differ only where the server does;
- a turn cap and a per-turn output cap (`max_tokens`), and tool output cut to a size the
  model can take back;
- the model is exactly `--model`: it never falls back to another one.

Protocol (the `command` agent's): the prompt on stdin; the model's final message on
stdout (the grader takes the last JSON object in it); metrics as JSON at the path in
$DOCDELTA_METRICS, rewritten after every turn so a run killed at its timeout still
reports what it did. How the loop ended is the exit code (see ENDINGS), with the reason
on stderr's last line; a failed model call also leaves its HTTP status in the metrics
(`api_status`, null when the server could not be reached) for the adapter to classify.
stderr also carries the conversation as it happens (every reply, tool call and result),
which docdelta keeps as the run's transcript.

Two things a small local model does are not answers: a reply cut off at the output cap
(finish reason `length`) ends the run as `max_tokens`, and a tool call whose arguments
are not a JSON object (a call cut off mid-way, `"{"`) is never sent back to the server
as is (llama.cpp rejects the next turn with HTTP 500): it is replayed with empty
arguments and answered with a tool error the model can read.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

EXIT_ANSWERED, EXIT_USAGE, EXIT_MAX_TURNS, EXIT_API_ERROR, EXIT_MAX_TOKENS = 0, 2, 3, 5, 6
ENDINGS = {
    EXIT_ANSWERED: "answered",
    EXIT_MAX_TURNS: "max_turns",
    EXIT_API_ERROR: "api_error",
    EXIT_MAX_TOKENS: "max_tokens",
}
"""Exit code -> how the loop ended; the adapter maps these onto run statuses."""

SYSTEM = (
    "You are a careful software engineer working in a repository; the current directory is its "
    "root. Use the shell tool to look at files and run commands. When you are done, reply "
    "without calling a tool."
)
INSTRUCTIONS = "AGENTS.md"
INSTRUCTIONS_MAX_BYTES = 32 * 1024
SHELL_TOOL = {
    "type": "function",
    "function": {
        "name": "shell",
        "description": "Run a shell command in the repository root and return its exit code and output.",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string", "description": "the command line to run"}},
            "required": ["command"],
        },
    },
}


class ModelApiError(Exception):
    """The model API failed; `status` is the HTTP status, None when there was no answer."""

    def __init__(self, status: int | None, message: str) -> None:
        super().__init__(message)
        self.status = status


class Metrics:
    """The fields of docdelta's AgentMetrics this agent can vouch for. Token counts
    become unknown (None) as soon as one response lacks them: never a partial sum."""

    def __init__(self, path: str | None) -> None:
        self.path = Path(path) if path else None
        self.turns = 0
        self.tool_calls = 0
        self.commands: list[dict[str, Any]] = []
        self.files_read: list[str] = []
        self.tokens: dict[str, int | None] = {"tokens_in": 0, "tokens_out": 0, "cache_read_tokens": 0}
        self.api_status: int | None = None
        self.served_by: dict[str, str] = {}
        """The model and `system_fingerprint` the server said it answered with."""

    def add_usage(self, usage: Any) -> None:
        usage = usage if isinstance(usage, dict) else {}
        details = usage.get("prompt_tokens_details") or {}
        seen = {
            "tokens_in": usage.get("prompt_tokens"),
            "tokens_out": usage.get("completion_tokens"),
            "cache_read_tokens": details.get("cached_tokens", 0) if "prompt_tokens" in usage else None,
        }
        for key, value in seen.items():
            total = self.tokens[key]
            self.tokens[key] = total + value if isinstance(value, int) and total is not None else None

    def save(self) -> None:
        if self.path is None:
            return
        data = {
            "turns": self.turns,
            "tool_calls": self.tool_calls,
            "commands": self.commands,
            "files_read": self.files_read,
            **self.tokens,
            "api_status": self.api_status,
            "served_by": self.served_by,
        }
        partial = self.path.with_name(self.path.name + ".partial")
        partial.write_text(json.dumps(data), encoding="utf-8")
        partial.replace(self.path)


def complete(args: argparse.Namespace, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """One Chat Completions request; ModelApiError for anything but a well-formed answer."""
    body = {
        "model": args.model,
        "messages": messages,
        "tools": [SHELL_TOOL],
        "temperature": 0,
        "seed": args.seed,
        "max_tokens": args.max_tokens,
    }
    headers = {"content-type": "application/json"}
    if key := os.environ.get("OPENAI_API_KEY"):
        headers["authorization"] = f"Bearer {key}"
    request = urllib.request.Request(  # noqa: S310 - main() admits only http(s) URLs
        args.base_url.rstrip("/") + "/chat/completions", data=json.dumps(body).encode(), headers=headers
    )
    try:
        with urllib.request.urlopen(request, timeout=args.request_timeout) as response:  # noqa: S310
            raw = response.read()
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode("utf-8", "replace")[:1000]
        raise ModelApiError(exc.code, f"HTTP {exc.code} from {request.full_url}: {detail}") from exc
    except (OSError, ValueError) as exc:  # refused, reset, timed out, bad URL
        raise ModelApiError(None, f"cannot reach {request.full_url}: {exc}") from exc
    try:
        answer = json.loads(raw)
        message = answer["choices"][0]["message"]
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise ModelApiError(None, f"unexpected answer from {request.full_url}: {raw[:500]!r}") from exc
    if not isinstance(message, dict):
        raise ModelApiError(None, f"unexpected message from {request.full_url}: {message!r}")
    served = {key: answer[key] for key in ("model", "system_fingerprint") if isinstance(answer.get(key), str)}
    return {
        "message": message,
        "usage": answer.get("usage"),
        "finish_reason": answer["choices"][0].get("finish_reason"),
        "served_by": served,
    }


def run_shell(command: str, args: argparse.Namespace) -> tuple[int | None, str]:
    """(exit code or None on timeout, output cut to --max-tool-output characters)."""
    shell = shutil.which("bash") or "/bin/sh"
    try:
        done = subprocess.run(
            [shell, "-c", command],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=args.command_timeout,
            check=False,
        )
        code: int | None = done.returncode
        output = (done.stdout + done.stderr).decode("utf-8", "replace")
    except subprocess.TimeoutExpired as exc:
        code = None
        output = ((exc.stdout or b"") + (exc.stderr or b"")).decode("utf-8", "replace")
        output += f"\n[killed after {args.command_timeout:g} s]"
    limit = args.max_tool_output
    if len(output) > limit:
        half = limit // 2
        output = f"{output[:half]}\n[... {len(output) - limit} characters cut ...]\n{output[-half:]}"
    return code, output


def call_arguments(call: dict[str, Any]) -> dict[str, Any] | None:
    """A tool call's arguments as a JSON object, or None when they are not one (cut off)."""
    raw = (call.get("function") or {}).get("arguments")
    if isinstance(raw, dict):
        return raw
    try:
        params = json.loads(raw or "{}")
    except (TypeError, ValueError):
        return None
    return params if isinstance(params, dict) else None


def replayable(call: dict[str, Any]) -> dict[str, Any]:
    """The call as it goes back into the conversation: malformed arguments become `{}`,
    so the server can render the history (its tool-call parser re-reads it)."""
    if call_arguments(call) is not None:
        return call
    function = {**(call.get("function") or {}), "arguments": "{}"}
    return {**call, "function": function}


def tool_result(call: dict[str, Any], args: argparse.Namespace, metrics: Metrics) -> str:
    """What the model gets back for one tool call; mistakes are reported to it, not fatal."""
    function = call.get("function") or {}
    if function.get("name") != "shell":
        return f"error: unknown tool {function.get('name')!r}; the only tool is `shell`"
    params = call_arguments(call)
    if params is None:
        raw = str(function.get("arguments"))[:200]
        return (
            f"error: the arguments of this call are not a JSON object ({raw!r}; was the call cut off?); "
            'call shell again with {"command": "<command line>"}'
        )
    command = params.get("command")
    if not isinstance(command, str) or not command.strip():
        return 'error: call shell with {"command": "<command line>"}'
    code, output = run_shell(command, args)
    metrics.commands.append({"command": command, "exit_code": code})
    return f"exit code: {'timeout' if code is None else code}\n{output}"


def log(text: str) -> None:
    """One step of the conversation, for the run's transcript (stderr)."""
    print(text, file=sys.stderr, flush=True)


def system_prompt(metrics: Metrics) -> str:
    """SYSTEM, plus the checkout's AGENTS.md when it has one (cut at INSTRUCTIONS_MAX_BYTES)."""
    path = Path(INSTRUCTIONS)
    if not path.is_file():
        return SYSTEM
    text = path.read_bytes()[:INSTRUCTIONS_MAX_BYTES].decode("utf-8", "replace")
    metrics.files_read.append(INSTRUCTIONS)
    return f"{SYSTEM}\n\nThe repository's {INSTRUCTIONS} says:\n\n{text}"


def loop(prompt: str, args: argparse.Namespace, metrics: Metrics) -> tuple[int, str]:
    """(exit code, final text): ask, run the tools asked for, repeat until the model answers."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": system_prompt(metrics)},
        {"role": "user", "content": prompt},
    ]
    while metrics.turns < args.max_turns:
        try:
            reply = complete(args, messages)
        except ModelApiError as exc:
            metrics.api_status = exc.status
            return EXIT_API_ERROR, str(exc)
        metrics.turns += 1
        metrics.add_usage(reply["usage"])
        metrics.served_by = reply["served_by"] or metrics.served_by
        metrics.save()
        message = reply["message"]
        calls = [c for c in message.get("tool_calls") or [] if isinstance(c, dict)]
        text = message.get("content") or ""
        log(f"--- turn {metrics.turns} (finish: {reply['finish_reason']})" + (f"\n{text}" if text else ""))
        if not calls and reply["finish_reason"] == "length":
            return EXIT_MAX_TOKENS, (
                f"the reply was cut off at the output cap (--max-tokens {args.max_tokens}); "
                "a truncated reply is not an answer"
            )
        if not calls:
            return EXIT_ANSWERED, text
        messages.append(
            {"role": "assistant", "content": text or None, "tool_calls": [replayable(c) for c in calls]}
        )
        for call in calls:
            metrics.tool_calls += 1
            function = call.get("function") or {}
            log(f"[tool call] {function.get('name')} {function.get('arguments')}")
            result = tool_result(call, args, metrics)
            log(f"[tool result]\n{result}")
            messages.append({"role": "tool", "tool_call_id": call.get("id") or "", "content": result})
        metrics.save()
    return EXIT_MAX_TURNS, f"stopped after {args.max_turns} turns without a final answer"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--model", required=True, help="model id, sent as is")
    parser.add_argument(
        "--base-url", default=os.environ.get("OPENAI_BASE_URL"), help="default: $OPENAI_BASE_URL"
    )
    parser.add_argument("--max-turns", type=int, default=20)
    parser.add_argument("--max-tokens", type=int, default=4096, help="output cap per model turn")
    parser.add_argument("--max-tool-output", type=int, default=16000, help="characters of output per command")
    parser.add_argument("--command-timeout", type=float, default=120.0)
    parser.add_argument("--request-timeout", type=float, default=600.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if not args.base_url:
        parser.error("no endpoint: pass --base-url or set OPENAI_BASE_URL")
    if not args.base_url.startswith(("http://", "https://")):
        parser.error(f"--base-url must be an http(s) URL, not {args.base_url!r}")
    metrics = Metrics(os.environ.get("DOCDELTA_METRICS"))
    metrics.save()
    code, text = loop(sys.stdin.read(), args, metrics)
    metrics.save()
    if code == EXIT_ANSWERED:
        print(text)
    else:
        print(f"openai agent: {ENDINGS[code]}: {text}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
