/**
 * Red team 20a: a program agent writes to its terminal as fast as it can (`yes` of a long line).
 * The pty master lives in the supervisor's one thread, which reads every chunk, keeps a tail and
 * fans it out; nothing rate-limits it. While the flood lasts, the operator's control requests
 * (`ps`) and a sibling's round trips through its relay (the same thread) must stay responsive.
 * The test asserts the defence holds: during the flood ps answers within its deadline and the
 * sibling's relay keeps making round trips (no latency bar: the numbers are printed).
 */
import assert from "node:assert/strict";
import type { AgentRow } from "../../lib/manager/managed_agent.ts";
import { tempDir, waitFor } from "../_harness/broker.ts";
import { agentWorkdir } from "../manager/_agent_fixture.ts";
import { startManagerMesh } from "../manager/_manager_mesh.ts";

/** A sibling that measures its relay round trips (flush = PING/PONG through the relay). */
const SIBLING = `
import { connect, credsAuthenticator } from "nats";
export async function run(ctx) {
  await ctx.endpoint();
  const m = ctx.launch;
  const jwt = /BEGIN NATS USER JWT-+\\n(\\S+)\\n/.exec(m.auth.creds)[1];
  const nkey = JSON.parse(atob(jwt.split(".")[1].replace(/-/g, "+").replace(/_/g, "/"))).sub;
  const nc = await connect({
    servers: m.servers,
    authenticator: credsAuthenticator(new TextEncoder().encode(m.auth.creds)),
    inboxPrefix: "_INBOX_" + nkey,
  });
  const path = ctx.agentDir + "/rtt.txt";
  while (!ctx.signal.aborted) {
    const t0 = performance.now();
    await nc.flush();
    await Deno.writeTextFile(path, (Date.now()) + " " + (performance.now() - t0).toFixed(1) + "\\n", { append: true });
    await new Promise((r) => setTimeout(r, 100));
  }
}
`;

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

async function rtts(file: string, from: number, to: number): Promise<number[]> {
  const text = await Deno.readTextFile(file).catch(() => "");
  return text.trim().split("\n").map((l) => l.split(" ").map(Number)).filter(([t]) =>
    t >= from && t <= to
  ).map(([, v]) => v);
}

Deno.test("redteam20a - a program agent flooding its pty does not stall the supervisor (ps, a sibling's relay)", async () => {
  await using mesh = await startManagerMesh("rt20apty");
  await mesh.manager();
  const ctl = await mesh.control();
  const src = `${await tempDir("cotal-rt20a-pty-")}/sibling.js`;
  await Deno.writeTextFile(src, SIBLING);
  const work = await agentWorkdir("cotal-rt20a-pty-work-");
  await ctl.request<AgentRow>("spawn", {
    agent: "module",
    module: src,
    name: "sibling",
    workdir: work,
  }, { timeoutMs: 40_000 });
  const rttFile = `${work}/rtt.txt`;
  await waitFor(async () => (await rtts(rttFile, 0, Infinity)).length >= 5, {
    timeoutMs: 20_000,
    what: "the sibling's first round trips",
  });
  const psTimes = async (n: number) => {
    const out: number[] = [];
    for (let i = 0; i < n; i++) {
      const t0 = performance.now();
      await ctl.request("ps", {}, { timeoutMs: 30_000 });
      out.push(performance.now() - t0);
    }
    return out;
  };
  const b0 = Date.now();
  const psBase = median(await psTimes(8));
  await new Promise((r) => setTimeout(r, 1500));
  const rttBase = median(await rtts(rttFile, b0, Date.now()));

  const line = "A".repeat(4000);
  await ctl.request<AgentRow>("spawn", {
    agent: "program",
    name: "flooder",
    command: "/bin/bash",
    args: ["-c", `while :; do yes '${line}'; done`],
  }, { timeoutMs: 40_000 });
  await new Promise((r) => setTimeout(r, 2000));
  const f0 = Date.now();
  const psFlood = median(await psTimes(8));
  await new Promise((r) => setTimeout(r, 3000));
  const floodRtts = await rtts(rttFile, f0, Date.now());
  const rttFlood = median(floodRtts);
  console.log(
    `ps median ${psBase.toFixed(0)} -> ${psFlood.toFixed(0)} ms; sibling relay RTT median ${
      rttBase.toFixed(1)
    } -> ${rttFlood.toFixed(1)} ms`,
  );
  await ctl.request("despawn", { name: "flooder" }, { timeoutMs: 30_000 });
  assert.ok(Number.isFinite(psFlood), "ps answered during the flood");
  assert.ok(
    floodRtts.length >= 5,
    "the sibling's relay kept making round trips during the flood",
  );
});
