/**
 * Fault pass 12: kill -9 of `cotal up --detach` itself, on a fresh root, the moment its
 * supervisor process exists (the daemons are started before the watchdog pair). Found: the
 * broker, delivery, signer and supervisor keep running with no watchdog and no peer; `status`
 * says "watchdog not running ... restart what is not running: cotal up" and exits 1, and a
 * daemon that dies afterwards (here the delivery daemon, kill -9) is never restarted: the stack
 * no longer heals by itself until a human runs `up` again. (A failed `up` that returns leaves
 * nothing it started running; one killed outright leaves a half stack nobody watches.)
 *
 * Killed at any point, `up` should leave either nothing running, or a stack that heals. Now
 * `up --detach` starts its watchdog pair first and lists each component the moment it runs.
 */
import assert from "node:assert/strict";
import { tempDir, waitFor } from "../_harness/broker.ts";
import { processesMentioning } from "../manager/_manager_mesh.ts";
import { cotalRun, cotalSpawn, kill9, pidsOf, rangePort } from "./_fp12.ts";

Deno.test({
  name:
    "fault pass 12 - kill -9 of up --detach the moment its supervisor exists leaves nothing running, or a stack that heals",
  async fn() {
    const base = await tempDir("cotal-fp12-upk-");
    const root = `${base}/.cotal`;
    const port = rangePort();
    try {
      const up = cotalSpawn(root, ["up", "--detach", "--port", String(port)]);
      await waitFor(() => pidsOf(root, "cmd/supervise.ts").length > 0, {
        timeoutMs: 120_000,
        intervalMs: 20,
        what: "up started the supervisor",
      });
      up.kill("SIGKILL");
      await up.output().catch(() => {});
      await new Promise((r) => setTimeout(r, 2_000));
      const running = processesMentioning(root);
      if (running.length === 0) return; // nothing left behind: held
      // Something runs: it must be a stack that heals. A daemon dies now.
      kill9(pidsOf(root, "cmd/delivery.ts"));
      let status = "";
      const healed = await waitFor(async () => {
        const s = await cotalRun(root, ["status"], 30_000);
        status = s.text;
        return s.code === 0;
      }, { timeoutMs: 60_000, intervalMs: 3_000 }).then(() => true, () => false);
      assert.ok(
        healed,
        `up was killed with ${running.length} processes of it running; 60 s after the delivery ` +
          `daemon was killed, nothing healed it. status:\n${status}`,
      );
    } finally {
      await cotalRun(root, ["down"], 120_000).catch(() => {});
      kill9(processesMentioning(root));
    }
  },
});
