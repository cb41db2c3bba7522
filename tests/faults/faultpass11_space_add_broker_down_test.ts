/**
 * Fault pass 11: `cotal space add` while the broker is down for a moment (killed, the watchdog's
 * restart still in its backoff). Found: `spaceAdd` (lib/mesh/space.ts) writes the space's record,
 * sees no running broker, skips rendering, reloading and serving, and the CLI says "added space
 * '<s>': agents, messages, tasks and durable delivery work now" with exit 0. The watchdog then
 * restarts the broker from the old config: the space's account, streams, daemon creds and
 * daemons never exist, nothing heals it, and `cotal status` says "not running" for each of its
 * daemons until a human runs `cotal up` (or adds it again). Seen on the stack under random
 * broker kills (`space add sp3` returned in 0 s; its three daemons stayed "not running").
 *
 * Here the watchdog pair is SIGSTOPped across the add so the broker's downtime is certain; they
 * are continued right after, and have 45 s to heal.
 */
import assert from "node:assert/strict";
import { tempDir, waitFor } from "../_harness/broker.ts";
import { cotalIn, cotalQuietly } from "../_harness/cotal_cli.ts";
import { processesMentioning } from "../manager/_manager_mesh.ts";
import { rangePort } from "./_fp11.ts";

const COTAL = new URL("../../cmd/cotal.ts", import.meta.url).pathname;

async function cotalRaw(root: string, ...args: string[]) {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", COTAL, ...args, "--root", root],
    stdout: "piped",
    stderr: "piped",
  }).output();
  return {
    code: out.code,
    text: new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr),
  };
}

function pidsOf(root: string, needle: string): number[] {
  return processesMentioning(root).filter((p) => {
    try {
      return Deno.readTextFileSync(`/proc/${p}/cmdline`).includes(needle);
    } catch {
      return false;
    }
  });
}

Deno.test("fault pass 11 - a space added while the broker restarts is served once it is back, or the add says it is not", async () => {
  const root = `${await tempDir("cotal-fp11-sa-")}/.cotal`;
  const cotal = cotalIn(root);
  const stopped: number[] = [];
  try {
    await cotal("up", "--detach", "--port", String(rangePort()));
    const watchdogs = pidsOf(root, "cmd/watchdog.ts");
    assert.equal(watchdogs.length, 2, "the watchdog and its peer run");
    for (const p of watchdogs) Deno.kill(p, "SIGSTOP"), stopped.push(p);
    const [broker] = pidsOf(root, "nats-server");
    Deno.kill(broker, "SIGKILL");
    await waitFor(() => pidsOf(root, "nats-server").length === 0, { timeoutMs: 10_000 });
    const add = await cotalRaw(root, "space", "add", "second");
    for (const p of stopped.splice(0)) Deno.kill(p, "SIGCONT");
    if (add.code !== 0) return; // refused while the broker is down: said, nothing claimed
    // It claimed the space works: once the watchdog has the broker back, its daemons must run.
    let status = "";
    await waitFor(async () => {
      const s = await cotalRaw(root, "status");
      status = s.text;
      return s.code === 0;
    }, { timeoutMs: 45_000, intervalMs: 3_000 }).catch(() => {});
    assert.doesNotMatch(
      status,
      /\.second\s+not running/,
      `'space add' said: ${
        add.text.split("\n")[0]
      } (exit 0); 45 s after the broker came back:\n${status}`,
    );
  } finally {
    for (const p of stopped) Deno.kill(p, "SIGCONT");
    await cotalQuietly(root, "down");
  }
});
