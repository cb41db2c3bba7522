/**
 * Red team 44: a sandboxed agent makes the broker redeliver its channel history at it without
 * bound, through its relay, from ~2 MB of posts and one pull.
 *
 * The relay's guard (`lib/manager/sandbox/guard_api.ts`) now bounds a pull's `expires` and
 * `idle_heartbeat` (red team 43), and a consumer create's deliver subject, durability and
 * inactive threshold; it leaves every other consumer option to the agent. Every agent allowed
 * to read a channel may create its `chathist_` consumer on CHAT. The agent
 * (`rt44_fixtures/redeliver.py`, a program in the default sandbox, `--allow-subscribe general
 * --allow-publish general`) posts 32 x 60 KB to `general` (inside the relay's stored-byte
 * burst), creates that consumer with `ack_policy: explicit`, `ack_wait: 1 ms`, `max_deliver:
 * -1`, `max_ack_pending: 100000` (nats-server accepts all of it), and parks one pull
 * `{"batch":1e9,"expires":300e9}`. It never acks (it holds no ack grant on CHAT, and needs
 * none): the broker redelivers all 32 messages every millisecond to the parked pull, broker ->
 * relay -> agent, the direction no relay budget meters. When the broker cuts the connection
 * (its per-connection pending limit), the agent dials again and pulls again.
 *
 * Observed (before any fix, nats-server 2.15.1): 1.12 GB (18,713 deliveries of 60 KB) in 10 s
 * at one agent from one pull, 22 redials; in the test (8 s): 942 MB (15,674 deliveries), broker
 * 42 % and supervisor 21 % of a core, `cotal ps` 1,166 ms during (~370 ms idle in red team 43).
 *
 * Passes when the agent gets no more than a few times what it stored (an honest history read
 * delivers each stored message once): 20 MB in the flood window.
 */
import assert from "node:assert/strict";
import { rt44Stack, sleep, waitFor } from "./rt44_fixtures/stack.ts";

const MAX_BYTES = 20_000_000;
const SECONDS = 8;

function cpuSeconds(pid: number): number {
  try {
    const f = Deno.readTextFileSync(`/proc/${pid}/stat`).split(") ")[1].split(" ");
    return (Number(f[11]) + Number(f[12])) / 100;
  } catch {
    return 0;
  }
}

function findPid(match: (cmd: string) => boolean): number | undefined {
  for (const e of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(e.name)) continue;
    try {
      const cmd = Deno.readTextFileSync(`/proc/${e.name}/cmdline`).replaceAll("\0", " ");
      if (match(cmd)) return Number(e.name);
    } catch {
      // Gone.
    }
  }
  return undefined;
}

Deno.test({
  name: "red team 44 - an agent cannot make the broker redeliver history at it without bound",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const s = await rt44Stack("ackw", ["redeliver.py"]);
    try {
      const up = await s.cotal(["up", "--port", s.port, "--detach"], 170_000);
      assert.equal(up.code, 0, up.out);
      const sup = findPid((c) => c.includes("supervise") && c.includes(s.root));
      const broker = findPid((c) => c.includes("nats-server") && c.includes(s.root));
      const m = await s.spawnAgent(
        "mallory",
        "redeliver.py",
        [String(SECONDS), "1000000", "32", "60000", "rd.log"],
        false,
        ["--allow-subscribe", "general", "--allow-publish", "general"],
      );
      assert.equal(m.code, 0, m.out);
      await waitFor(`${s.work}/a/rd.log`, /^create: /m, 20_000);
      await sleep(1_000);
      const c0 = { sup: cpuSeconds(sup ?? 0), broker: cpuSeconds(broker ?? 0), t: Date.now() };
      const t = performance.now();
      const ps = await s.cotal(["ps"], 60_000);
      const psMs = Math.round(performance.now() - t);
      await sleep(1_000);
      const c1 = { sup: cpuSeconds(sup ?? 0), broker: cpuSeconds(broker ?? 0), t: Date.now() };
      const log = await waitFor(`${s.work}/a/rd.log`, /^done$/m, 20_000);
      const dt = (c1.t - c0.t) / 1000;
      const cpu = (now: number, was: number) => Math.round(((now - was) / dt) * 100);
      const report = `supervisor ${cpu(c1.sup, c0.sup)}% cpu, broker ${
        cpu(c1.broker, c0.broker)
      }% cpu over ${dt.toFixed(1)} s; cotal ps ${psMs} ms (exit ${ps.code}) during`;
      const short = log.split("\n").filter((l) => !/^(pub|sub): /.test(l)).map((l) =>
        l.slice(0, 200)
      );
      console.log(`agent:\n${short.slice(-8).join("\n")}\n${report}`);
      const got = /^deliveries (\d+) bytes (\d+)/m.exec(log);
      assert.ok(got, `the agent ran to its end:\n${short.join("\n")}`);
      assert.ok(
        Number(got[2]) <= MAX_BYTES,
        `the broker redelivered ${got[2]} bytes (${
          got[1]
        } deliveries) at one agent in ${SECONDS} s from ~2 MB it posted (${report})`,
      );
    } finally {
      await s.cotal(["despawn", "mallory"], 90_000).catch(() => {});
      await s.close();
    }
  },
});
