"""Image work before the first run on a cold engine, by where the agent layer comes from:
built here (npm), pulled from a registry, or loaded from the image cache
(`docker.image_cache`), as seconds and ratios from one run.

What is timed is what a process does before its first run (`wiring`'s images): restore the
cache when one is set, the environment image, the agent layer, the agent image copied from
it. Before each path the engine holds none of the bench's images: each build and pull gets a
base of its own (FROM `--base` with a label of its own), so neither an earlier layer nor the
build cache applies, and every image carrying that label, every layer of the bench's
packages and the pulled tag are removed after each path.

- **build**: no registry, no cache: `agent_layer` runs apt and npm for Claude Code at its pin
  plus one tiny package of the bench's own (so no layer another test built is found), then
  the agent image. The tarball it leaves for the load path is timed on its own line (save):
  a first job pays it once, the jobs after it do not.
- **pull**: the layer the first build made, pushed to a registry on 127.0.0.1 (Debian's
  `docker-registry`, as tests/registry.py runs it).
- **load**: the tarball the last build saved, `docker load`ed, then every image found.

A fresh GitHub runner cannot be measured here (no GitHub, no ghcr.io, no Docker Hub): its
pull crosses the network, so the local registry's pull is the closest stand-in and a lower
bound. Nor is the base image's pull: the base's layers are on the engine for every path (a
runner pulls them in the build and pull paths and gets them from the tarball with the
cache), so `docker load` reads them but unpacks only what the engine lacks; a fresh runner's
load unpacks them too. The goal the figures are read against: image work on a fresh runner
<= 15 s before the first run.

Rounds alternate the order (build, pull, load; then load, pull, build), so a machine whose
speed drifts moves every path; the ratios are taken round by round and their medians printed.

    python bench/bench_images.py [--rounds 2] [--base docdelta-base:latest]   # real npm: minutes a build
    python bench/bench_images.py --smoke   # a stand-in layer (docker build, no npm): every path, seconds
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Any

import docker
import docker.errors

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from docker_helpers import dockerfile_context, stand_in_layer
from registry import local_registry

from docdelta.agents.claude_code import ClaudeCodeAgent
from docdelta.agents.images import FROM_LAYER_LABEL, NODE_VERSION, NPM_LABEL, agent_image
from docdelta.sandbox.base import DockerImageConfig
from docdelta.sandbox.image_cache import ImageCache
from docdelta.sandbox.images import BuiltImage, environment_image

SMOKE_ARGS = ["--smoke"]
"""The smallest flags that still run every part: CI runs the bench with them (tests/README.md)."""

BENCH_LABEL = "org.docdelta.bench-images"
"""Label of the bench's bases (value: this run's id), inherited by every image built on them:
what it removes, so a bench running beside it keeps its own. (Two full runs at once on one
engine share their layers' packages: run one at a time.)"""
HOST_CA = Path("/etc/ssl/certs/ca-certificates.crt")
MARKER = "is-number@7.0.0"
"""A tiny npm package of no dependencies beside the agent's, so the bench's layer is its own."""
IDENTITY = {"bench": "images"}
"""The cache's key: one configuration, so the load path finds the last build's tarball."""
GOAL_S = 15.0


class Paths:
    def __init__(
        self, client: Any, base: str, ca: Path | None, smoke: bool, registry: str, work: Path
    ) -> None:
        self.client, self.base, self.ca, self.smoke, self.work = client, base, ca, smoke, work
        self.run = uuid.uuid4().hex[:12]
        self.npm = (
            [f"docdelta-bench-stand-in@1.0.{int(self.run, 16)}"] if smoke else [*ClaudeCodeAgent.npm, MARKER]
        )
        self.published = f"{registry}/bench/docdelta-agent-claude_code:bench"
        self.cache_dir = work / "cache"
        self.pushed = False
        self.cached: tuple[str, BuiltImage, BuiltImage] | None = None
        self.times: dict[str, list[float]] = {"build": [], "save": [], "pull": [], "load": []}

    def build(self) -> float:
        base = self._new_base()
        cache = ImageCache(self.client, self.work / f"saving-{uuid.uuid4().hex[:8]}", IDENTITY)
        started = time.perf_counter()
        cache.restore()
        env = environment_image(self.client, self._config(base), cache)
        if self.smoke:  # in place of npm: the stand-in layer, built here
            stand_in_layer(
                self.client, f"docdelta-agent-layer:bench-{uuid.uuid4().hex[:8]}", NODE_VERSION, self.npm
            )
        image = agent_image(self.client, base=env.tag, npm=self.npm, extra_ca=self.ca, cache=cache)
        took = time.perf_counter() - started
        saving = time.perf_counter()
        cache.store()
        self.times["save"].append(time.perf_counter() - saving)
        self.cache_dir.mkdir(exist_ok=True)
        os.replace(cache.path, self.cache_dir / cache.path.name)
        self.cached = (base, env, image)
        if not self.pushed:
            self._push(self.client.images.get(image.tag).labels[FROM_LAYER_LABEL])
        self.forget()
        return took

    def pull(self) -> float:
        base = self._new_base()
        started = time.perf_counter()
        env = environment_image(self.client, self._config(base))
        image = agent_image(
            self.client, base=env.tag, npm=self.npm, extra_ca=self.ca, published=self.published
        )
        took = time.perf_counter() - started
        layer = self.client.images.get(image.tag).labels[FROM_LAYER_LABEL]
        if layer != self.client.images.get(self.published).id:
            sys.exit(f"the pull path did not use the pulled layer {self.published}")
        self.forget()
        return took

    def load(self) -> float:
        assert self.cached is not None, "the first round builds first"
        base, env, image = self.cached
        started = time.perf_counter()
        cache = ImageCache(self.client, self.cache_dir, IDENTITY)
        if not cache.restore():
            sys.exit(f"the load path found no tarball to load in {self.cache_dir}")
        again_env = environment_image(self.client, self._config(base), cache)
        again = agent_image(self.client, base=again_env.tag, npm=self.npm, extra_ca=self.ca, cache=cache)
        cache.store()
        took = time.perf_counter() - started
        if (again_env, again) != (env, image):
            sys.exit("the load path built an image again instead of finding it")
        self.forget()
        return took

    def _new_base(self) -> str:
        """A base of this path's own: FROM --base, labelled with its own tag."""
        tag = f"docdelta-bench-images-base:{uuid.uuid4().hex[:12]}"
        dockerfile = f"FROM {self.base}\nLABEL {BENCH_LABEL}={self.run} {BENCH_LABEL}.base={tag}\n"
        self.client.images.build(fileobj=dockerfile_context(dockerfile), custom_context=True, tag=tag)
        return tag

    def _config(self, base: str) -> DockerImageConfig:
        return DockerImageConfig(base=base, extra_ca=self.ca)

    def _push(self, layer_id: str) -> None:
        name, _, tag = self.published.rpartition(":")
        self.client.images.get(layer_id).tag(name, tag=tag)
        for event in self.client.images.push(name, tag=tag, stream=True, decode=True):
            if "error" in event:
                sys.exit(f"pushing {self.published} failed: {event['error']}")
        self.pushed = True

    def forget(self) -> None:
        """Remove every image of the bench: built on its bases, its packages' layers, the
        pulled tag; the newest first, as an image built on another must go before it."""
        # The listing's own fields (no inspect per image: one may go while this runs).
        mine = {
            str(row["Id"]): int(row["Created"])
            for label in (f"{BENCH_LABEL}={self.run}", f"{NPM_LABEL}={','.join(sorted(self.npm))}")
            for row in self.client.api.images(all=True, filters={"label": label})
        }
        with suppress(docker.errors.ImageNotFound):
            pulled = self.client.images.get(self.published)
            mine[str(pulled.id)] = 1 << 62  # no image is built on it: first
        left = sorted(mine, key=lambda i: mine[i], reverse=True)
        while left:  # Created is in seconds: a parent refused for its child goes next pass
            kept = []
            for image_id in left:
                try:
                    self.client.images.remove(image_id, force=True)
                except docker.errors.ImageNotFound:
                    pass  # gone with an image removed before it
                except docker.errors.APIError:
                    kept.append(image_id)
            if kept == left:
                sys.exit(f"cannot remove the bench's images {kept}")
            left = kept


def _median(values: list[float]) -> str:
    return f"median {statistics.median(values):.1f} s ({', '.join(f'{v:.1f}' for v in values)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="rounds of the three paths (each builds once)")
    parser.add_argument(
        "--base", default="docdelta-base:latest", help="the base image (must be on the engine)"
    )
    parser.add_argument(
        "--extra-ca",
        default=str(HOST_CA) if HOST_CA.is_file() else "",
        help="PEM bundle trusted by the builds, for a TLS-intercepting proxy (default: the host's)",
    )
    parser.add_argument(
        "--smoke", action="store_true", help="a stand-in layer, no npm: shows every path runs"
    )
    args = parser.parse_args()
    client = docker.from_env()
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="docdelta-bench-images-") as tmp:
        work = Path(tmp)
        with local_registry(work / "registry") as registry:
            ca = Path(args.extra_ca) if args.extra_ca else None
            paths = Paths(client, args.base, ca, args.smoke, registry.host, work)
            order: list[tuple[str, Callable[[], float]]] = [
                ("build", paths.build), ("pull", paths.pull), ("load", paths.load)
            ]  # fmt: skip
            try:
                for i in range(args.rounds):
                    for name, path in order if i % 2 == 0 else order[::-1]:
                        paths.times[name].append(path())
            finally:
                paths.forget()
    times = paths.times
    what = "a stand-in layer (docker build, no npm)" if args.smoke else f"{' '.join(paths.npm)}"
    print(f"load average at start: {load:.1f} on {os.cpu_count()} CPUs; the layer: {what}")
    print(f"build  agent_layer here, no cache: {_median(times['build'])}")
    print(f"save   the tarball after a build (a first job, once): {_median(times['save'])}")
    print(f"pull   from a registry on 127.0.0.1: {_median(times['pull'])}")
    print(f"load   from the image cache: {_median(times['load'])}")
    for a, b in (("build", "load"), ("pull", "load"), ("build", "pull")):
        ratios = [x / y for x, y in zip(times[a], times[b], strict=True)]
        each = ", ".join(f"{r:.1f}" for r in ratios)
        print(f"ratio  {a} / {b}: median {statistics.median(ratios):.1f}x ({each})")
    for name in ("pull", "load"):
        median = statistics.median(times[name])
        verdict = "within" if median <= GOAL_S else "over"
        print(
            f"goal   {name} {median:.1f} s: {verdict} {GOAL_S:.0f} s before the first run (here, see above)"
        )


if __name__ == "__main__":
    main()
