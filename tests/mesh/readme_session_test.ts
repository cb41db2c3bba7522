/**
 * The README is the script: a newcomer's first session, run from the README's own code blocks
 * ("The `cotal` command" and "A first session"), in a fresh copy of the checkout with a fresh
 * HOME. Two substitutions only, both said here: `npx -y deno@2.9.6` is this test's Deno (npx
 * would fetch the same version), and `cotal up` gets a free `--port` (the suite runs in
 * parallel; 4222 may be taken). Shared with the outer checkout: nats-server (from its tool
 * cache) and Deno's module cache, which a newcomer's first run downloads. bwrap is not shared:
 * the session's own `cotal up` installs it, as on a machine that has only Node and npm.
 */
import assert from "node:assert/strict";
import { freePort, removeTempDir, tempDir } from "../_harness/broker.ts";

const CHECKOUT = new URL("../..", import.meta.url).pathname.replace(/\/$/, "");

/** The body of the first ```sh block after `heading` in the README. */
function block(readme: string, heading: string): string {
  const at = readme.indexOf(heading);
  assert.ok(at >= 0, `the README has no '${heading}'`);
  const m = /```sh\n([\s\S]*?)```/.exec(readme.slice(at));
  assert.ok(m, `no sh block after '${heading}'`);
  return m[1];
}

async function run(cmd: string, args: string[], opts: { cwd?: string } = {}) {
  const out = await new Deno.Command(cmd, { args, ...opts, stdout: "piped", stderr: "piped" })
    .output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

Deno.test("readme - a newcomer's first session runs from the README's own commands, in a fresh copy with a fresh HOME", async () => {
  const readme = await Deno.readTextFile(`${CHECKOUT}/README.md`);
  const install = block(readme, "### The `cotal` command");
  const session = block(readme, "A first session");
  const work = await tempDir("cotal-newcomer-");
  const clone = `${work}/cotal`;
  const home = `${work}/home`;
  await Deno.mkdir(home);
  // A fresh copy of the working tree (what a clone of this commit holds), no caches.
  const files = (await run("git", ["-C", CHECKOUT, "ls-files", "-z"])).stdout.split("\0")
    .filter(Boolean);
  for (const f of files) {
    const to = `${clone}/${f}`;
    await Deno.mkdir(to.slice(0, to.lastIndexOf("/")), { recursive: true });
    await Deno.copyFile(`${CHECKOUT}/${f}`, to).catch(() => {});
  }
  const denoDir = JSON.parse((await run(Deno.execPath(), ["info", "--json"])).stdout).denoDir;
  const cache = `${work}/cache`;
  await Deno.mkdir(cache);
  await Deno.symlink(`${CHECKOUT}/.cache/nats-server`, `${cache}/nats-server`);
  const port = freePort();
  const script = [
    "set -eu",
    install,
    session.replace(/^cotal up --detach$/m, `cotal up --detach --port ${port}`),
  ].join("\n").replaceAll("npx -y deno@2.9.6", JSON.stringify(Deno.execPath()));
  assert.match(script, new RegExp(`cotal up --detach --port ${port}`), "the session starts a mesh");
  const env = {
    HOME: home,
    PATH: "/usr/local/bin:/usr/bin:/bin",
    DENO_DIR: denoDir,
    COTAL_CACHE_DIR: cache,
  };
  try {
    const child = await new Deno.Command("bash", {
      args: ["-c", script],
      cwd: clone,
      env,
      clearEnv: true,
      stdout: "piped",
      stderr: "piped",
    }).output();
    const out = new TextDecoder().decode(child.stdout);
    const err = new TextDecoder().decode(child.stderr);
    assert.equal(child.code, 0, `${out}\n${err}`);
    // Each step said what the README says it says.
    assert.match(out, /^cotal \d+\.\d+\.\d+$/m, "cotal --version");
    assert.match(`${out}\n${err}`, /bwrap: installed bwrap at /, "up installs the sandbox");
    assert.match(out, /spawned upper_1 /);
    assert.match(out, /^\(dm\) local\.upper_1: HELLO/m, "the task's reply, HELLO");
    assert.match(out, /nats-server: stopped/);
    assert.ok((await Deno.stat(`${home}/.local/bin/cotal`)).isFile);
  } finally {
    await run("bash", ["-c", `"${home}/.local/bin/cotal" down --root ${clone}/.cotal`], {
      cwd: clone,
    }).catch(() => {});
    await removeTempDir(work);
  }
});
