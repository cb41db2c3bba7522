/**
 * Red team 43: a sandboxed agent makes the broker push idle heartbeats at it without bound,
 * through its relay, from ~230 KB of pull requests on its own durables.
 *
 * Every agent may pull (`$JS.API.CONSUMER.MSG.NEXT`) from its bind-only `dm_` and `dlv_`
 * durables: its grants name them, and the relay's guard checks only a pull's JSON keys. A pull
 * request may ask for an idle heartbeat; nats-server checks only `2 x idle_heartbeat <=
 * expires`, so `{"batch":1,"expires":3600e9,"idle_heartbeat":1}` is accepted and parked (up to
 * the consumer's `max_waiting`, 512). The consumer's loop then wakes at the earliest heartbeat
 * due (1 ns later), walks every parked request and sends each an idle heartbeat, over and over.
 * The heartbeats flow broker -> relay -> agent, which the relay's byte budgets (agent -> broker
 * only) do not meter: the supervisor's one thread copies all of them.
 *
 * Two colluding agents (`rt43_fixtures/pull_hb.py`, programs in the default sandbox) each read
 * their JWT from the launch file, take the MSG.NEXT subjects their grants allow (`dm_`, `dlv_`),
 * park 512 such pulls on each (~230 KB in all, well inside the relay's budgets) and read for
 * 10 s. Meanwhile the test measures the broker's and the supervisor's CPU and times `cotal ps`.
 *
 * Observed (before any fix): bare broker, one consumer, 512 pulls: 2.2 million heartbeats
 * (233 MB) in 4 s, the broker at 61 % of a core. Through the real stack, one agent: 7.66
 * million heartbeats (1.22 GB) in 10 s, broker 56 % of a core; two agents: 6.2 million
 * heartbeats (~1 GB) in 10 s, broker 116 % (more than one of this machine's two cores),
 * supervisor 20 %, `cotal ps` 368 -> 564 ms. The flood lasts the pulls' expiry (an hour) and
 * resumes on every reconnect; nothing bounds it but the agent's reading.
 *
 * Passes when the agents get no more than a trickle of heartbeats (50,000 in 10 s together; an
 * honest fetch asks for one every few seconds).
 */
import assert from "node:assert/strict";
import { rt43Stack, sleep, waitFor } from "./rt43_fixtures/stack.ts";

const MAX_HEARTBEATS = 50_000;
const SECONDS = 10;

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
  name: "red team 43 - an agent cannot make the broker stream idle heartbeats at it without bound",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const s = await rt43Stack("hb", ["pull_hb.py"]);
    try {
      const up = await s.cotal(["up", "--port", s.port, "--detach"], 170_000);
      assert.equal(up.code, 0, up.out);
      const sup = findPid((c) => c.includes("supervise") && c.includes(s.root));
      const broker = findPid((c) => c.includes("nats-server") && c.includes(s.root));
      const psTime = async () => {
        const t = performance.now();
        const r = await s.cotal(["ps"], 60_000);
        return { ms: Math.round(performance.now() - t), code: r.code };
      };
      const before = await psTime();
      // Two colluding agents, spawned together: each floods 4 s after its start.
      const spawned = await Promise.all(
        ["mallory", "mallory2"].map((n) =>
          s.spawnAgent(n, "pull_hb.py", [String(SECONDS), "1", "512", `${n}.log`], false)
        ),
      );
      for (const m of spawned) assert.equal(m.code, 0, m.out);
      // The agent waits 4 s after its start, then floods for SECONDS.
      await waitFor(`${s.work}/a/mallory.log`, /pull requests/, 15_000);
      await sleep(1_000);
      const c0 = { sup: cpuSeconds(sup ?? 0), broker: cpuSeconds(broker ?? 0), t: Date.now() };
      const during = await psTime();
      await sleep(2_000);
      const c1 = { sup: cpuSeconds(sup ?? 0), broker: cpuSeconds(broker ?? 0), t: Date.now() };
      const log = (await waitFor(`${s.work}/a/mallory.log`, /done/, 30_000)) +
        (await waitFor(`${s.work}/a/mallory2.log`, /done/, 10_000));
      const dt = (c1.t - c0.t) / 1000;
      const cpu = (now: number, was: number) => Math.round(((now - was) / dt) * 100);
      const report = `supervisor ${cpu(c1.sup, c0.sup)}% cpu, broker ${
        cpu(c1.broker, c0.broker)
      }% cpu over ${dt.toFixed(1)} s; cotal ps ${before.ms} ms before, ${during.ms} ms during`;
      console.log(`agent:\n${log.trim()}\n${report}`);
      assert.equal(log.match(/^done$/gm)?.length, 2, "both agents ran");
      const hb = [...log.matchAll(/^heartbeats (\d+)/gm)].reduce((n, m) => n + Number(m[1]), 0);
      assert.ok(
        hb <= MAX_HEARTBEATS,
        `the broker pushed ${hb} idle heartbeats at two agents through their relays in ${SECONDS} s (${report})`,
      );
    } finally {
      for (const n of ["mallory", "mallory2"]) {
        await s.cotal(["despawn", n], 90_000).catch(() => {});
      }
      await s.close();
    }
  },
});
