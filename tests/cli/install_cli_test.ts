/**
 * One `cotal` command: `deno task cotal <verb>` from the checkout, and `deno task install-cli`
 * putting a `cotal` on PATH that works from any directory, under the checkout's frozen lockfile.
 */
import assert from "node:assert/strict";
import { removeTempDir, tempDir } from "../_harness/broker.ts";

const CHECKOUT = new URL("../..", import.meta.url).pathname;
const VERSION = JSON.parse(await Deno.readTextFile(`${CHECKOUT}deno.json`)).version;

async function run(cmd: string, args: string[], cwd: string) {
  const out = await new Deno.Command(cmd, { args, cwd, stdout: "piped", stderr: "piped" })
    .output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

Deno.test("cli - deno task cotal runs the CLI, and install-cli puts a cotal on PATH that works from anywhere", async () => {
  const bin = await tempDir("cotal-bin-");
  const elsewhere = await tempDir("cotal-cwd-");
  try {
    const task = await run(Deno.execPath(), ["task", "-q", "cotal", "--version"], CHECKOUT);
    assert.equal(task.code, 0, task.stderr);
    assert.equal(task.stdout, `cotal ${VERSION}\n`);

    const inst = await run(
      Deno.execPath(),
      ["task", "-q", "install-cli", "--bin-dir", bin],
      CHECKOUT,
    );
    assert.equal(inst.code, 0, inst.stderr);
    assert.match(inst.stdout, new RegExp(`wrote ${bin}/cotal`));
    assert.match(inst.stdout, /is not on PATH; add it: export PATH=/);
    assert.equal((await Deno.stat(`${bin}/cotal`)).mode! & 0o777, 0o755);
    const v = await run(`${bin}/cotal`, ["--version"], elsewhere);
    assert.equal(v.code, 0, v.stderr);
    assert.equal(v.stdout, `cotal ${VERSION}\n`);
    // A verb that needs the checkout's modules and packages, run from another directory.
    const help = await run(`${bin}/cotal`, ["space", "add", "--help"], elsewhere);
    assert.equal(help.code, 0, help.stderr);
    assert.match(help.stdout, /space add/);

    // Deno run from npx's cache (the README's npx form): the wrapper gets a copy in the
    // checkout's cache, since npm may clean its own.
    const npxDeno = `${elsewhere}/_npx/0123/node_modules/deno/deno`;
    await Deno.mkdir(npxDeno.replace(/\/deno$/, ""), { recursive: true });
    await Deno.copyFile(Deno.execPath(), npxDeno);
    await Deno.chmod(npxDeno, 0o755);
    const viaNpx = await run(
      npxDeno,
      ["task", "-q", "install-cli", "--bin-dir", bin],
      CHECKOUT,
    );
    assert.equal(viaNpx.code, 0, viaNpx.stderr);
    assert.match(viaNpx.stdout, /copied Deno out of npx's cache/);
    const wrapper = await Deno.readTextFile(`${bin}/cotal`);
    assert.ok(wrapper.includes(`${CHECKOUT}.cache/deno/deno`), wrapper);
    assert.ok(!wrapper.includes("_npx"), wrapper);
    await Deno.remove(`${elsewhere}/_npx`, { recursive: true });
    assert.equal(
      (await run(`${bin}/cotal`, ["--version"], elsewhere)).stdout,
      `cotal ${VERSION}\n`,
    );

    // Bad input: one sentence, exit 2, nothing written.
    const bad = await run(
      Deno.execPath(),
      ["task", "-q", "install-cli", "--bin-dir", "rel/bin"],
      CHECKOUT,
    );
    assert.equal(bad.code, 2);
    assert.match(
      bad.stderr,
      /The bin dir must be an absolute path, not 'rel\/bin'; pass --bin-dir <dir>\./,
    );
    const unknown = await run(
      Deno.execPath(),
      ["task", "-q", "install-cli", "--bin", bin],
      CHECKOUT,
    );
    assert.equal(unknown.code, 2);
    assert.match(unknown.stderr, /usage: deno task install-cli/);
  } finally {
    await removeTempDir(bin);
    await removeTempDir(elsewhere);
  }
});
