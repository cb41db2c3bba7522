/**
 * Red team 38: an agent (default sandbox, no opt-out) leaks one supervisor descriptor per
 * connection it opens and closes on its control socket, until the supervisor runs out of
 * descriptors and dies; the watchdog restarts it, brings the agent back, and it starts again.
 *
 * `ControlChannel` (`lib/manager/sandbox/control_channel.ts`) accepts every connection on the
 * agent's control socket (bound into the sandbox at `/run/cotal/control.sock`); past its two it
 * closes them, but one that takes the free slot is handed to `#drain`, which on EOF or error
 * drops it from its set and never calls `close()`. So connect, close, repeat: every connection
 * that lands in the second slot stays open in the supervisor for good (40 slow connects leaked
 * exactly 40 descriptors in a bare `ControlChannel`). The accept loop has no rate (unlike the
 * spawn socket's 10/s and the relay's 20/s).
 *
 * First run (this machine, the supervisor's descriptor limit 20,000 as inherited from the
 * shell): 4 python processes in one agent took the supervisor from ~30 to 20,000 descriptors in
 * ~35 s. The supervisor logged `heartbeat: cannot write ... Too many open files (os error 24)`
 * and died; the watchdog's restart ("took the lease over from pid 16896, which is gone") brought
 * back every agent, the attacker included, which did it again ~35 s later: a crash loop that
 * restarts every sibling agent of the space each round. While it ran, a sibling's PING/PONG
 * round trip through its relay went from a 1 ms median to 35-75 ms (worst 265 ms), and the
 * supervisor used ~40 % of a core accepting. Under systemd (no `LimitNOFILE` on the supervisor
 * unit; Deno raises its soft limit to the hard one) the limit is higher, so it takes longer.
 *
 * The test passes when the flood leaves the supervisor alive and its descriptor count within
 * a few hundred of where it started. About 40 s.
 */
import assert from "node:assert/strict";
import { fdCount, rt38Stack, sleep, supervisorPid } from "./rt38_fixtures/stack.ts";

Deno.test({
  name:
    "red team 38 - an agent cannot leak the supervisor's descriptors by opening and closing its control socket (run only with COTAL_SLOW_TESTS=1: half a minute of a full stack; tests/manager/control_channel_test.ts checks the same leak in the suite)",
  ignore: !Deno.env.get("COTAL_SLOW_TESTS"),
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const s = await rt38Stack("ctl", ["ctl_flood.py"]);
    try {
      const up = await s.cotal(["up", "--port", s.port, "--detach"], 170_000);
      assert.equal(up.code, 0, up.out);
      const sup = supervisorPid(s.root);
      assert.ok(sup, "the supervisor runs");
      const before = fdCount(sup)!;
      // 2 processes for 12 s; the fixture sleeps afterwards.
      const m = await s.spawnAgent("mallory", "ctl_flood.py", ["2", "12"], false);
      assert.equal(m.code, 0, m.out);
      let peak = before;
      let gone = false;
      const end = Date.now() + 25_000;
      while (Date.now() < end) {
        await sleep(1_000);
        const n = fdCount(sup);
        if (n === undefined) {
          gone = true;
          break;
        }
        peak = Math.max(peak, n);
        const log = await Deno.readTextFile(`${s.work}/a/ctl_flood.log`).catch(() => "");
        if (/done/.test(log)) break;
      }
      await sleep(3_000);
      const after = fdCount(sup);
      const log = await Deno.readTextFile(`${s.work}/a/ctl_flood.log`).catch(() => "");
      console.log(log.trim());
      console.log(
        `supervisor ${sup}: ${before} descriptors before, peak ${peak}, ` +
          `${after ?? "gone"} 3 s after the flood${gone ? " (it died during the flood)" : ""}`,
      );
      assert.ok(!gone && after !== undefined, "the supervisor survived the flood");
      assert.ok(
        after - before < 300,
        `the supervisor kept ${after - before} descriptors of the agent's closed connections`,
      );
    } finally {
      await s.cotal(["despawn", "mallory"], 90_000).catch(() => {});
      await s.close();
    }
  },
});
