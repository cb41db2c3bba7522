/**
 * Fault pass 13: `cotal up --detach` killed -9 the moment its broker runs; the first watchdog
 * runs the up again (lib/mesh/up_resume.ts); that resumed up's delivery is killed -9 the moment
 * it appears. Found: the resumed up fails ("cotal-delivery did not become ready ... exited
 * during start-up"), undoes what it started, puts the killed up's watch list back (watchdogs
 * and broker only) and removes the up's note: nothing runs it again, and the stack stays
 * without delivery, signer and supervisor, status exit 1 ("restart what is not running: cotal
 * up"), until a human runs `up`. No human started the resumed up, none reads its failure.
 *
 * Expected: a stack whose up was killed heals by itself, even if a daemon dies while the
 * resumed up starts it (the watchdog restarts a daemon that dies on a running stack in 250 ms).
 */
import assert from "node:assert/strict";
import { waitFor } from "../_harness/broker.ts";
import {
  cotalSpawn,
  daemonPids,
  freshRoot,
  healLogs,
  healsWithin,
  kill9,
  newDaemon,
} from "./_fp13.ts";

Deno.test({
  name:
    "fault pass 13 - a daemon killed -9 while the watchdog's resumed up starts it: the stack still heals by itself",
  async fn() {
    const r = await freshRoot("rud");
    try {
      const up = cotalSpawn(r.root, ["up", "--detach", "--port", String(r.port)]);
      await waitFor(() => daemonPids(r.root, "nats-server -c").length > 0, {
        timeoutMs: 120_000,
        intervalMs: 10,
        what: "up started its broker",
      });
      up.kill("SIGKILL");
      await up.output().catch(() => {});
      // The watchdog runs the up again; the delivery it starts dies at once.
      const delivery = await newDaemon(r.root, "cmd/delivery.ts", [], 60_000);
      kill9(delivery);
      const h = await healsWithin(r.root, 60_000);
      assert.ok(
        h.healed,
        `the resumed up's delivery was killed -9 as it started; ${h.ms} ms on, the stack was not ` +
          `whole and nothing was starting it.\nstatus:\n${h.status}\n${await healLogs(r.root)}`,
      );
    } finally {
      await r.cleanup();
    }
  },
});
