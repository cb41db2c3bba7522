/**
 * Ctrl-C during `cotal space add` rolls the add back, as any failure does: newcomer pass 10 sent
 * SIGINT half a second in and was left with the space listed and none of its daemons running,
 * which nothing healed. The interrupt is sent once the space is on the root's list (the add is
 * then past its first step, with the broker's reload and three daemons still to go).
 */
import assert from "node:assert/strict";
import { readSpaceIndex } from "../../lib/mesh/trust_state.ts";
import { listComponents } from "../../lib/mesh/stack.ts";
import { spaceKeyHex } from "../../lib/workspace/mod.ts";
import { freePort, removeTempDir, tempDir, waitFor } from "../_harness/broker.ts";
import { cotalIn, cotalQuietly } from "../_harness/cotal_cli.ts";

const COTAL = new URL("../../cmd/cotal.ts", import.meta.url).pathname;

Deno.test("mesh - Ctrl-C during space add rolls it back: not listed, no daemon of it left", async () => {
  const root = await tempDir("cotal-addint-");
  const run = cotalIn(root);
  try {
    await run("up", "--detach", "--port", `${freePort()}`);
    const add = new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", COTAL, "space", "add", "sig2", "--root", root],
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    await waitFor(async () => (await readSpaceIndex(root)).spaces.includes("sig2"), {
      intervalMs: 10,
      timeoutMs: 30_000,
      what: "the add's first step",
    });
    add.kill("SIGINT");
    const out = await add.output();
    const stderr = new TextDecoder().decode(out.stderr);
    assert.equal(out.code, 1, stderr);
    assert.match(stderr, /The add of space 'sig2' was interrupted; it was rolled back/);
    assert.deepEqual((await readSpaceIndex(root)).spaces, ["default"]);
    const key = spaceKeyHex("sig2");
    assert.deepEqual(
      (await listComponents(root)).filter((c) => c.id.endsWith(`.${key}`) && c.state === "running"),
      [],
    );
    // And the same add, left alone, works.
    const again = await run("space", "add", "sig2");
    assert.match(again.stdout, /added space 'sig2'/);
  } finally {
    await cotalQuietly(root, "down");
    await removeTempDir(root);
  }
});
