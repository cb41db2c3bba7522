/**
 * Fault pass 13: both watchdogs killed -9 while `cotal up --detach` (a fresh root) is part-way
 * (the moment its broker runs); the up itself is not touched. Found: the up goes on, starts
 * delivery, signer and supervisor, says "started: ... watchdog, watchdog-peer" and exits 0,
 * while neither watchdog runs: status exits 1 ("watchdog not running") and nothing heals the
 * stack, nor any daemon that dies later, until a human runs `up`. The up started them and
 * was still running when they died; it never looks again.
 *
 * Expected: an up that exits 0 leaves its watchdog pair running (it restarts one that died
 * while it ran, as it starts any component that is not running), so the stack is whole.
 */
import assert from "node:assert/strict";
import { waitFor } from "../_harness/broker.ts";
import { cotalSpawn, daemonPids, freshRoot, healLogs, healsWithin, kill9 } from "./_fp13.ts";

Deno.test({
  name:
    "fault pass 13 - both watchdogs killed -9 while up --detach runs: an up that ends with exit 0 leaves them running",
  async fn() {
    const r = await freshRoot("uwk");
    try {
      const up = cotalSpawn(r.root, ["up", "--detach", "--port", String(r.port)]);
      await waitFor(() => daemonPids(r.root, "nats-server -c").length > 0, {
        timeoutMs: 120_000,
        intervalMs: 10,
        what: "up started its broker",
      });
      const watchdogs = daemonPids(r.root, "cmd/watchdog.ts");
      kill9(watchdogs);
      const out = await up.output();
      const said = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
      if (out.code !== 0) return; // an up that says it failed is not the gap
      const h = await healsWithin(r.root, 30_000);
      assert.ok(
        h.healed,
        `both watchdogs (pids ${watchdogs.join(", ")}) were killed -9 while up ran; up exited 0 ` +
          `and ${h.ms} ms on the stack was not whole.\nup said:\n${
            said.trim().split("\n").slice(-6).join("\n")
          }\nstatus:\n${h.status}\n${await healLogs(r.root)}`,
      );
    } finally {
      await r.cleanup();
    }
  },
});
