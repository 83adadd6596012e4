// Upload `path` as artifact `name`, as actions/upload-artifact@v4 does: hidden files only
// with include-hidden-files (v4.4+ skips them by default), paths relative to `path`.
const fs = require("fs");
const path = require("path");
// The real actions run on Node 20; Debian's Node 18 has no global `crypto` yet.
globalThis.crypto ??= require("node:crypto").webcrypto;
const core = require("@actions/core");
const { DefaultArtifactClient } = require("@actions/artifact");

function files(root, hidden) {
  if (fs.statSync(root).isFile()) return [root];
  return fs.readdirSync(root, { withFileTypes: true }).flatMap((entry) => {
    if (!hidden && entry.name.startsWith(".")) return [];
    const full = path.join(root, entry.name);
    return entry.isDirectory() ? files(full, hidden) : [full];
  });
}

async function main() {
  const name = core.getInput("name");
  const root = path.resolve(core.getInput("path", { required: true }));
  const hidden = core.getBooleanInput("include-hidden-files");
  if (path.basename(root).startsWith(".") && !hidden) {
    throw new Error(`${root} is hidden: nothing to upload without include-hidden-files`);
  }
  const found = fs.existsSync(root) ? files(root, hidden) : [];
  if (found.length === 0) {
    const how = core.getInput("if-no-files-found");
    if (how === "error") throw new Error(`no files found at ${root}`);
    if (how === "warn") core.warning(`no files found at ${root}: no artifact uploaded`);
    return;
  }
  const dir = fs.statSync(root).isFile() ? path.dirname(root) : root;
  const { id, size } = await new DefaultArtifactClient().uploadArtifact(name, found, dir);
  core.info(`uploaded artifact ${name} (id ${id}): ${found.length} files, ${size} bytes`);
}

main().catch((error) => core.setFailed(error.message));
