/**
 * `status` on a detached stack whose watchdogs are gone: an interrupted `cotal down` empties the
 * watch list and stops both watchdogs first, and newcomer pass 10 read "healthy" (exit 0) on a
 * stack nothing healed any more. The watchdogs now show as stopped, and status exits 1 with
 * the `up` that starts them again.
 */
import assert from "node:assert/strict";
import { componentFiles, stopComponent } from "../../lib/mesh/stack.ts";
import { writeWatchList } from "../../lib/mesh/watchdog.ts";
import { freePort, removeTempDir, tempDir } from "../_harness/broker.ts";
import { cotalIn, cotalQuietly } from "../_harness/cotal_cli.ts";

const COTAL = new URL("../../cmd/cotal.ts", import.meta.url).pathname;

Deno.test("mesh - status shows a detached stack's stopped watchdogs and is not healthy", async () => {
  const root = await tempDir("cotal-nowatch-");
  const run = cotalIn(root);
  const status = async () => {
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", COTAL, "status", "--root", root],
      stdout: "piped",
      stderr: "piped",
    }).output();
    return { code: out.code, stdout: new TextDecoder().decode(out.stdout) };
  };
  try {
    await run("up", "--detach", "--port", `${freePort()}`);
    assert.equal((await status()).code, 0);
    // A fresh up starts the peer itself: its watchdog says no restart of it (newcomer pass 10
    // read "watchdog-peer is not running; restarting it" after every up).
    await new Promise((r) => setTimeout(r, 3_000));
    const wlog = await Deno.readTextFile(componentFiles(root, "watchdog").logFile);
    assert.doesNotMatch(wlog, /watchdog-peer is not running/);
    // What an interrupted down leaves: the list emptied, both watchdogs stopped, the rest running.
    await writeWatchList(root, []);
    // Both at once, as down stops them (each would restart the other).
    await Promise.all([stopComponent(root, "watchdog"), stopComponent(root, "watchdog-peer")]);
    const st = await status();
    assert.equal(st.code, 1, st.stdout);
    assert.match(st.stdout, /^watchdog +not running$/m);
    assert.match(st.stdout, /^watchdog-peer +not running$/m);
    assert.match(st.stdout, /up --root/);
    await run("up", "--detach");
    assert.equal((await status()).code, 0);
  } finally {
    await cotalQuietly(root, "down");
    await removeTempDir(root);
  }
});
