/**
 * Fault pass 13: one kill -9 of delivery the moment `cotal up --detach` (a fresh root) starts
 * it; the up itself is not touched. Found: the up fails ("cotal-delivery did not become
 * ready ... exited during start-up", exit 1) and undoes everything it started: the broker and
 * both watchdogs, which had been running for half a second and would have restarted delivery
 * in 250 ms. Nothing runs; the stack waits on a human to run `up` again.
 *
 * Expected: a daemon that dies once while `up` starts it is restarted (by the up, or by the
 * watchdog pair already running), the up ends, and the stack is whole.
 */
import assert from "node:assert/strict";
import { cotalSpawn, freshRoot, healLogs, healsWithin, kill9, newDaemon } from "./_fp13.ts";

Deno.test({
  name:
    "fault pass 13 - delivery killed -9 the moment up --detach starts it: the up still leaves a whole stack",
  async fn() {
    const r = await freshRoot("udk");
    try {
      const up = cotalSpawn(r.root, ["up", "--detach", "--port", String(r.port)]);
      const delivery = await newDaemon(r.root, "cmd/delivery.ts", [], 120_000);
      kill9(delivery);
      const out = await up.output();
      const said = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
      const h = await healsWithin(r.root, 45_000);
      assert.ok(
        h.healed,
        `one kill -9 of delivery as up started it; up exited ${out.code}, and ${h.ms} ms on the ` +
          `stack was not whole.\nup said:\n${said.trim().split("\n").slice(-4).join("\n")}\n` +
          `status:\n${h.status}\n${await healLogs(r.root)}`,
      );
    } finally {
      await r.cleanup();
    }
  },
});
