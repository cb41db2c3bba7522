/**
 * Fault pass 14: the same daemon killed -9 again and again: delivery, six times in a row, each
 * time the moment the watchdog's replacement runs (its backoff doubles: 250 ms to 8 s), then the
 * signer likewise three times. Expected: status exits 0 again within 60 s of the last kill,
 * without a human. Seen by hand: held (healed about 16 s after the last kill).
 */
import assert from "node:assert/strict";
import {
  daemonPids,
  fp14Root,
  healLogs,
  healsWithin,
  kill9,
  newDaemon,
  upDetached,
} from "./_fp14.ts";

Deno.test({
  name:
    "fault pass 14 - delivery killed -9 six times in a row and the signer three: the stack is whole again within 60 s",
  async fn() {
    const r = await fp14Root("rep");
    try {
      await upDetached(r);
      for (const [kind, times] of [["cmd/delivery.ts", 6], ["cmd/signer.ts", 3]] as const) {
        let pids = daemonPids(r.root, kind);
        for (let i = 0; i < times; i++) {
          kill9(pids);
          pids = await newDaemon(r.root, kind, pids, 30_000);
        }
        kill9(pids);
      }
      const h = await healsWithin(r.root, 60_000);
      assert.ok(
        h.healed,
        `60 s after the last kill, status:\n${h.status}\n${await healLogs(r.root)}`,
      );
      console.log(`healed ${Math.round(h.ms / 1000)} s after the last kill`);
    } finally {
      await r.cleanup();
    }
  },
});
