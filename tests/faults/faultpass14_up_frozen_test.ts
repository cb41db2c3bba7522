/**
 * Fault pass 14: `cotal up --detach` on a fresh root frozen (SIGSTOP, never continued while the
 * test watches) the moment its broker runs: a hung CLI, as a frozen daemon is a hung daemon.
 * Found: the stack stays broker + watchdog + watchdog-peer, with no delivery, signer or
 * supervisor, 67 s and more later (status exit 1 at 9, 17, ... 67 s). The first watchdog does
 * not resume the up (its note's lock is held by the frozen process) and nothing judges the up
 * hung; a second `cotal up --detach` is refused at once: "Another 'cotal up' of <root> is
 * starting its stack now (its own, or one its watchdog runs to finish an up that was killed);
 * wait for it, then run 'cotal status'." (a wait with no deadline: on a frozen process). When
 * the up was continued 70 s later it failed "nats-server did not start within 10 s; see its
 * log." (its readiness deadline counted the freeze).
 *
 * Expected: like a hung daemon (killed and restarted after 20 s without a beat), an up that is
 * frozen part-way does not hold the stack: within 60 s it is whole (status exit 0).
 */
import assert from "node:assert/strict";
import {
  cotalRun,
  cotalSpawn,
  daemonPids,
  fp14Root,
  freeze,
  healLogs,
  healsWithin,
  holdsWithin,
  processesMentioning,
  thaw,
} from "./_fp14.ts";

Deno.test({
  name:
    "fault pass 14 - up --detach frozen (SIGSTOP) the moment its broker runs: the stack is whole within 60 s",
  async fn() {
    const r = await fp14Root("upz");
    const up = cotalSpawn(r.root, ["up", "--detach", "--port", String(r.port)]);
    try {
      const ran = await holdsWithin(
        () => daemonPids(r.root, "nats-server -c").length > 0,
        90_000,
        5,
      );
      freeze([up.pid]);
      assert.ok(ran, "up never started its broker within 90 s");
      const h = await healsWithin(r.root, 60_000);
      const second = h.healed
        ? undefined
        : await cotalRun(r.root, ["up", "--detach", "--port", String(r.port)], 60_000);
      assert.ok(
        h.healed,
        `up was frozen once its broker ran; 60 s on, status still exits 1:\n${
          h.status.split("\n").slice(0, 12).join("\n")
        }\na second up: exit ${second?.code} ${second?.text.trim().slice(-300)}\n${await healLogs(
          r.root,
        )}`,
      );
    } finally {
      try {
        up.kill("SIGKILL");
      } catch {
        // Gone.
      }
      await up.output().catch(() => {});
      await r.cleanup();
    }
  },
});

/**
 * The same freeze, for 25 s, then continued (SIGCONT). Found: the up fails at once, "nats-server
 * did not start within 10 s; see its log." (exit 1: the start's 10 s wait for the wrapper's
 * stat line counted the freeze, though the broker had started), removes its note and stops its
 * watchdogs, but leaves the broker running: status exits 1 with "nats-server running" and
 * nothing else, 8, 16 and 24 s later, and no watchdog or resume is left to heal it. Neither
 * "a failed up leaves nothing it started running" nor a stack that heals.
 *
 * Expected: within 45 s of the continue, either the stack is whole (status exit 0) or nothing
 * of it runs.
 */
Deno.test({
  name:
    "fault pass 14 - up --detach frozen 25 s once its broker runs, then continued: whole, or nothing left running",
  async fn() {
    const r = await fp14Root("upt");
    const up = cotalSpawn(r.root, ["up", "--detach", "--port", String(r.port)]);
    try {
      const ran = await holdsWithin(
        () => daemonPids(r.root, "nats-server -c").length > 0,
        90_000,
        5,
      );
      freeze([up.pid]);
      assert.ok(ran, "up never started its broker within 90 s");
      await new Promise((res) => setTimeout(res, 25_000));
      thaw([up.pid]);
      const timer = setTimeout(() => up.kill("SIGKILL"), 120_000);
      const out = await up.output();
      clearTimeout(timer);
      const said = new TextDecoder().decode(out.stderr).trim().slice(-200);
      let status = "";
      const settled = await holdsWithin(
        async () => {
          const s = await cotalRun(r.root, ["status"], 30_000);
          status = s.text;
          return s.code === 0 || processesMentioning(r.root).length === 0;
        },
        45_000,
        2_000,
      );
      assert.ok(
        settled,
        `up continued after 25 s frozen ended ${out.code} (${said}); 45 s on, ${
          processesMentioning(r.root).length
        } processes of the root run and status exits 1:\n${
          status.split("\n").slice(0, 10).join("\n")
        }\n${await healLogs(r.root)}`,
      );
    } finally {
      try {
        up.kill("SIGKILL");
      } catch {
        // Gone.
      }
      await up.output().catch(() => {});
      await r.cleanup();
    }
  },
});
