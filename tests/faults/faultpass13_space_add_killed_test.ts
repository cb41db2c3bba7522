/**
 * Fault pass 13: `cotal space add` killed -9 part-way on a running detached stack (the moment
 * the new space's delivery runs). Found: the space stays listed with delivery and signer
 * running and no supervisor, 40 s and more later; they are not on the watchdog's list either
 * (startSpaceDaemons lists a space's daemons only after all of them ran). Nothing completes
 * it: status says "supervise.<space> not running ... restart what is not running: cotal up",
 * and fault pass 9's cure is the same `space add` run again, by a human.
 *
 * Expected: like a killed `up` (finished by its watchdog), a killed add is completed without a
 * human: the new space's daemons all run. (status exits 1 after any live add until the next
 * broker start, for the space's $SYS creds, so this test reads `space list` instead.)
 */
import assert from "node:assert/strict";
import { waitFor } from "../_harness/broker.ts";
import { cotalRun, cotalSpawn, daemonPids, freshRoot, healLogs, newDaemon } from "./_fp13.ts";

Deno.test({
  name:
    "fault pass 13 - space add killed -9 the moment its delivery runs: the space's daemons all run, without a human",
  async fn() {
    const r = await freshRoot("sak");
    try {
      const up = await cotalRun(r.root, ["up", "--detach", "--port", String(r.port)], 180_000);
      assert.equal(up.code, 0, up.text);
      const before = daemonPids(r.root, "cmd/delivery.ts");
      const add = cotalSpawn(r.root, ["space", "add", "extra"]);
      await newDaemon(r.root, "cmd/delivery.ts", before, 60_000);
      add.kill("SIGKILL");
      await add.output().catch(() => {});
      let line = "";
      const whole = await waitFor(async () => {
        const l = await cotalRun(r.root, ["space", "list"], 30_000);
        line = l.text.split("\n").find((s) => s.startsWith("extra ")) ?? "";
        return ["delivery", "signer", "supervise"].every((d) => line.includes(`${d}:running`));
      }, { timeoutMs: 45_000, intervalMs: 2_000 }).then(() => true, () => false);
      const status = (await cotalRun(r.root, ["status"], 30_000)).text;
      assert.ok(
        whole,
        `space add was killed -9 once its delivery ran; 45 s on, the space was ${
          line ? `'${line.trim()}'` : "not listed"
        }.\nstatus:\n${status.split("\n").slice(0, 16).join("\n")}\n${await healLogs(r.root)}`,
      );
    } finally {
      await r.cleanup();
    }
  },
});
