/**
 * Fault pass 12: kill -9 of `cotal down` part-way (the moment its watchdog pair is gone, before
 * the agents and daemons are stopped; and again the moment the supervisor is gone). Expected:
 * `status` and `ps` end within a bound, a second `down` finishes and leaves nothing running,
 * the next `up` works. Seen by hand at five kill points: held (a down killed after stopping the
 * watchdogs leaves the rest unwatched until the next down or up, which status says, exit 1).
 */
import assert from "node:assert/strict";
import { waitFor } from "../_harness/broker.ts";
import { processesMentioning } from "../manager/_manager_mesh.ts";
import { cotalRun, cotalSpawn, pidsOf, startStack, waitHealthy } from "./_fp12.ts";

const SPAWN = ["spawn", "--role", "up", "--", "/usr/bin/tr", "a-z", "A-Z"];

Deno.test({
  name:
    "fault pass 12 - a down killed part-way is finished by the next down, and up works after (run only with COTAL_SLOW_TESTS=1: half a minute or more of a full stack, kept out of the suite for its time)",
  ignore: !Deno.env.get("COTAL_SLOW_TESTS"),
  async fn() {
    await using stack = await startStack("dk");
    for (const needle of ["cmd/watchdog.ts", "cmd/supervise.ts"]) {
      assert.equal((await cotalRun(stack.root, SPAWN)).code, 0);
      assert.equal((await cotalRun(stack.root, SPAWN)).code, 0);
      const down = cotalSpawn(stack.root, ["down"]);
      await waitFor(() => pidsOf(stack.root, needle).length === 0, {
        timeoutMs: 60_000,
        intervalMs: 5,
        what: `down stopped ${needle}`,
      });
      down.kill("SIGKILL");
      await down.output().catch(() => {});
      const st = await cotalRun(stack.root, ["status"], 60_000);
      assert.ok(!st.timedOut, "status after a killed down never ended");
      const ps = await cotalRun(stack.root, ["ps"], 60_000);
      assert.ok(!ps.timedOut, "ps after a killed down never ended");
      const again = await cotalRun(stack.root, ["down"], 120_000);
      assert.equal(again.code, 0, again.text);
      assert.deepEqual(processesMentioning(stack.root), [], `left running after ${again.text}`);
      const up = await cotalRun(
        stack.root,
        ["up", "--detach", "--port", String(stack.port)],
        180_000,
      );
      assert.equal(up.code, 0, up.text);
      await waitHealthy(stack.root, 120_000);
    }
  },
});
