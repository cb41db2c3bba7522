/**
 * Fault pass 14: kill -9 of both watchdogs (watchdog and watchdog-peer) at one instant on a
 * running detached stack, then, 5 s later, kill -9 of delivery. The README says this one case
 * is not healed ("a kill of either is healed by the other (not a kill of both at once)"); the
 * promise is "kill -9 anything at any moment". Found: nothing comes back; status exits 1
 * ("watchdog not running (pid N is gone)", the same for watchdog-peer and delivery.default, ...
 * restart what is not running: cotal up") for as long as watched, 60 s; only a human's
 * `cotal up` heals it. A documented limitation, kept as a test of the promise.
 *
 * Expected: status exits 0 again within 60 s without a human.
 */
import assert from "node:assert/strict";
import { daemonPids, fp14Root, healLogs, healsWithin, kill9, upDetached } from "./_fp14.ts";

Deno.test({
  name:
    "fault pass 14 - both watchdogs killed -9 at once, then delivery: the stack is whole again within 60 s (skipped: known gap, documented in the README: nothing outside the pair restarts it; under systemd each unit's Restart= does)",
  ignore: true,
  async fn() {
    const r = await fp14Root("bwd");
    try {
      await upDetached(r);
      kill9(daemonPids(r.root, "cmd/watchdog.ts"));
      await new Promise((res) => setTimeout(res, 5_000));
      kill9(daemonPids(r.root, "cmd/delivery.ts"));
      const h = await healsWithin(r.root, 60_000);
      assert.ok(
        h.healed,
        `60 s after both watchdogs and then delivery were killed, status exits 1:\n${
          h.status.split("\n").slice(0, 12).join("\n")
        }\n${await healLogs(r.root)}`,
      );
    } finally {
      await r.cleanup();
    }
  },
});
