/**
 * A module agent spawned with `subscribe` is on those channels from its start, and what comes
 * before the module adds its `message` listener waits for it. Fault pass 7's embedder found a
 * module agent deaf to its spawn's channels until it called joinChannel itself, and a listener
 * added after a join lost the join's backfill (and the durable copies, settled as seen).
 */
import assert from "node:assert/strict";
import type { AgentRow } from "../../lib/manager/managed_agent.ts";
import { tempDir, waitFor } from "../_harness/broker.ts";
import { startManagerMesh } from "./_manager_mesh.ts";

// Posts tick 0, 1, ... every 250 ms on general, then idles until stopped.
const POSTER = `export async function run(ctx) {
  const ep = await ctx.endpoint();
  for (let i = 0; i < 60 && !ctx.signal.aborted; i++) {
    await ep.multicast("tick " + i, { channel: "general" });
    await new Promise((r) => setTimeout(r, 250));
  }
  await new Promise((r) => ctx.signal.addEventListener("abort", r));
}
`;

// Takes its endpoint (joined to general by its spawn), adds its listener 2 s later, and DMs
// alice what it heard, with when it started listening.
const LISTENER = `export async function run(ctx) {
  const ep = await ctx.endpoint();
  await new Promise((r) => setTimeout(r, 2000));
  const heard = [];
  ep.addEventListener("message", (ev) => {
    if (ev.meta.kind === "channel") heard.push(ev.message.parts[0].text);
  });
  await new Promise((r) => setTimeout(r, 2000));
  await ep.unicast("local.alice", JSON.stringify(heard));
  await new Promise((r) => ctx.signal.addEventListener("abort", r));
}
`;

Deno.test("manager - a module agent hears its spawn's channels, and what came before its listener waits for it", async () => {
  await using mesh = await startManagerMesh("modch");
  const dir = await tempDir("cotal-modch-");
  await Deno.writeTextFile(`${dir}/poster.js`, POSTER);
  await Deno.writeTextFile(`${dir}/listener.js`, LISTENER);
  await mesh.manager();
  const ctl = await mesh.control();
  const alice = await mesh.client("alice");
  const spawn = (name: string, file: string) =>
    ctl.request<AgentRow>("spawn", {
      agent: "module",
      module: `${dir}/${file}`,
      name,
      subscribe: ["general"],
      allowPublish: ["general"],
    }, { timeoutMs: 40_000 });
  await spawn("poster", "poster.js");
  // The poster is under way: ticks come before the listener starts (its join's backfill), and
  // while it waits to add its listener (live copies nobody listened to yet).
  await new Promise((r) => setTimeout(r, 1_000));
  await spawn("listener", "listener.js");
  await waitFor(() => alice.dms.length > 0, {
    what: "the listener's report",
    timeoutMs: 40_000,
  });
  const heard: string[] = JSON.parse(
    (alice.dms[0].parts[0] as { text: string }).text,
  );
  const ticks = heard.map((t) => Number(/^tick (\d+)$/.exec(t)?.[1]));
  // From the first tick, none missing, none twice (a live copy may come during the join's
  // backfill, before the older ones it replays).
  assert.ok(ticks.length >= 8, `heard ${JSON.stringify(heard)}`);
  assert.deepEqual(
    [...ticks].sort((a, b) => a - b),
    ticks.map((_, i) => i),
    `heard ${JSON.stringify(heard)}`,
  );
});
