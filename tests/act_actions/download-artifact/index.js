// Download every artifact of this run whose name matches `pattern` into `path/<name>`, as
// actions/download-artifact@v4 does with a pattern and without merge-multiple.
const path = require("path");
// The real actions run on Node 20; Debian's Node 18 has no global `crypto` yet.
globalThis.crypto ??= require("node:crypto").webcrypto;
const core = require("@actions/core");
const { DefaultArtifactClient } = require("@actions/artifact");
const { minimatch } = require("minimatch");

async function main() {
  const pattern = core.getInput("pattern", { required: true });
  const root = path.resolve(core.getInput("path", { required: true }));
  const client = new DefaultArtifactClient();
  const { artifacts } = await client.listArtifacts({ latest: true });
  const wanted = artifacts.filter((a) => minimatch(a.name, pattern));
  for (const artifact of wanted) {
    await client.downloadArtifact(artifact.id, { path: path.join(root, artifact.name) });
    core.info(`downloaded artifact ${artifact.name} (id ${artifact.id})`);
  }
  core.info(`${wanted.length} artifacts matched ${pattern}`);
}

main().catch((error) => core.setFailed(error.message));
