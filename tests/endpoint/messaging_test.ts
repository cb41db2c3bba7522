import assert from "node:assert/strict";
import { readWithin, waitFor } from "../_harness/broker.ts";
import type { CotalMessageEvent } from "../../lib/endpoint/mod.ts";
import { collect, startMesh } from "./_mesh.ts";
import { HELD_MESSAGES } from "../../lib/endpoint/endpoint.ts";
import { lifecycleTag } from "../../lib/wire/names.ts";
import { isCotalError } from "../../lib/errors.ts";

const policy = { subscribe: ["general"], allowPublish: ["general"] };

Deno.test("endpoint - two agents exchange a channel message and a DM", async () => {
  await using mesh = await startMesh();
  const alice = await mesh.agent("alice", policy);
  const bob = await mesh.agent("bob", policy);
  const a = alice.endpoint();
  const b = bob.endpoint();
  const got = collect<CotalMessageEvent>(b, "message");
  await a.start();
  await b.start();

  const sent = await a.multicast("hello all");
  await waitFor(() => got.length >= 1, { what: "bob to get the channel message" });
  assert.equal(got[0].message.id, sent.id);
  assert.equal(got[0].message.channel, "general");
  assert.equal(got[0].message.from.id, "local.alice");
  assert.deepEqual(got[0].meta, {
    kind: "channel",
    historical: false,
    source: "live",
    seq: undefined,
  });
  assert.equal(got[0].delivery.durable, false);

  const dm = await a.unicast("local.bob", "psst");
  await waitFor(() => got.length >= 2, { what: "bob to get the DM" });
  assert.equal(got[1].message.id, dm.id);
  assert.equal(got[1].message.to, "local.bob");
  assert.equal(got[1].meta.kind, "dm");
  assert.equal(got[1].delivery.durable, true);
});

Deno.test("endpoint - an anycast to a role with two holders is handled exactly once", async () => {
  await using mesh = await startMesh();
  const boss = await mesh.agent("boss", policy);
  const w1 = await mesh.agent("w1", { ...policy, role: "reviewer" });
  const w2 = await mesh.agent("w2", { ...policy, role: "reviewer" });
  const a = boss.endpoint();
  const h1 = w1.endpoint();
  const h2 = w2.endpoint();
  const got1 = collect<CotalMessageEvent>(h1, "message");
  const got2 = collect<CotalMessageEvent>(h2, "message");
  await Promise.all([a.start(), h1.start(), h2.start()]);
  const ids = new Set<string>();
  for (let i = 0; i < 40; i++) ids.add((await a.anycast("reviewer", `task ${i}`)).id);
  const handled = () => [...got1, ...got2].filter((e) => e.meta.kind === "anycast");
  await waitFor(() => handled().length >= 40, { what: "all 40 tasks to be handled" });
  // Give a duplicate time to show up, then check each task was taken by exactly one holder.
  await new Promise((r) => setTimeout(r, 300));
  const seen = handled().map((e) => e.message.id);
  assert.equal(seen.length, 40);
  assert.deepEqual(new Set(seen), ids);
  assert.ok(handled().every((e) => e.message.toService === "reviewer"));
  // Acked tasks leave the work queue.
  const p = await mesh.provisioner();
  const { connectBroker } = await import("../../lib/wire/connect.ts");
  const nc = await connectBroker({ servers: mesh.url, creds: p });
  try {
    const jsm = await nc.jetstreamManager();
    await waitFor(
      async () =>
        (await jsm.consumers.info(`TASK_${mesh.space}`, "svc_reviewer")).num_ack_pending === 0,
      { what: "the tasks to be acked" },
    );
  } finally {
    await nc.close();
  }
});

Deno.test("endpoint - a late joiner replays channel history marked historical, then gets live", async () => {
  await using mesh = await startMesh();
  const alice = await mesh.agent("alice", policy);
  const bob = await mesh.agent("bob", policy);
  const a = alice.endpoint();
  await a.start();
  const early = [];
  for (let i = 0; i < 5; i++) early.push((await a.multicast(`early ${i}`)).id);
  const b = bob.endpoint();
  const got = collect<CotalMessageEvent>(b, "message");
  await b.start();
  await waitFor(() => got.length >= 5, { what: "bob's backfill" });
  assert.deepEqual(got.map((e) => e.message.id), early);
  assert.ok(got.every((e) => e.meta.historical && e.meta.source === "backfill"));
  const live = await a.multicast("now");
  await waitFor(() => got.length >= 6, { what: "the live message after the backfill" });
  assert.equal(got[5].message.id, live.id);
  assert.equal(got[5].meta.historical, false);

  const hist = await b.channelHistory("general", { limit: 3 });
  assert.deepEqual(hist.map((m) => m.id), [...early.slice(3), live.id]);
  const all = await b.channelHistory("general");
  assert.equal(all.length, 6);
});

Deno.test("endpoint - presence shows a peer joining, then offline at its stop and at a crash", async () => {
  await using mesh = await startMesh();
  const alice = await mesh.agent("alice", policy);
  const bob = await mesh.agent("bob", policy);
  const carol = await mesh.agent("carol", policy);
  const a = alice.endpoint();
  const changes = collect<import("../../lib/endpoint/mod.ts").PresenceEvent>(a, "presence");
  await a.start();
  const b = bob.endpoint();
  await b.start();
  await waitFor(
    () => changes.some((c) => c.change === "join" && c.presence.card.id === "local.bob"),
    { what: "bob's join" },
  );
  assert.deepEqual(a.getRoster().map((p) => p.card.name), ["alice", "bob"]);
  const joined = changes.find((c) => c.presence.card.id === "local.bob")!;
  assert.equal(joined.presence.card.protocolVersion, "0.4");
  // The lifecycle is told by a tag; the uid (which names its rows) is never published.
  assert.equal(joined.presence.lifecycleTag, lifecycleTag(bob.lifecycleUid));
  assert.ok(!JSON.stringify(joined.presence).includes(bob.lifecycleUid));

  // A graceful stop writes a final offline row: seen at once, well inside the window.
  await b.stop();
  await waitFor(
    () => changes.some((c) => c.change === "offline" && c.presence.card.id === "local.bob"),
    { what: "bob's offline", timeoutMs: 3_000 },
  );
  assert.deepEqual(a.getRoster().map((p) => p.card.name), ["alice"]);

  // A crash (no final row): another process is killed; its heartbeat goes stale.
  const proc = await spawnAgent({
    servers: mesh.url,
    space: mesh.space,
    card: { name: "carol" },
    lifecycleUid: carol.lifecycleUid,
    creds: carol.creds,
  });
  await waitFor(() => a.getRoster().length === 2, { what: "carol's join" });
  proc.kill("SIGKILL");
  await proc.status;
  await waitFor(
    () => changes.some((ch) => ch.change === "offline" && ch.presence.card.id === "local.carol"),
    { what: "carol's stale offline", timeoutMs: 15_000 },
  );
  const off = changes.find((ch) =>
    ch.change === "offline" && ch.presence.card.id === "local.carol"
  )!;
  assert.equal(off.reason, "stale");
  const bobOff = changes.find((ch) =>
    ch.change === "offline" && ch.presence.card.id === "local.bob"
  )!;
  assert.equal(bobOff.reason, "left");
});

async function spawnAgent(opts: Record<string, unknown>): Promise<Deno.ChildProcess> {
  const proc = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", new URL("./_agent_process.ts", import.meta.url).pathname],
    stdin: "piped",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const w = proc.stdin.getWriter();
  await w.write(new TextEncoder().encode(JSON.stringify(opts)));
  await w.close();
  const reader = proc.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let out = "";
  while (!out.includes("ready")) {
    const { value, done } = await readWithin(reader, 30_000, "the agent process's ready line");
    if (done) throw new Error(`the agent process exited before it was ready: ${out}`);
    out += value;
  }
  reader.releaseLock();
  return proc;
}

Deno.test("endpoint - channel copies wait for the first message listener, bounded: the newest kept, one warning", async () => {
  await using mesh = await startMesh();
  const alice = await mesh.agent("alice", policy);
  const bob = await mesh.agent("bob", policy);
  const a = alice.endpoint();
  await a.start();
  const b = bob.endpoint({ channels: ["general"] });
  const warnings = collect<import("../../lib/endpoint/mod.ts").EndpointWarningEvent>(b, "warning");
  await b.start();
  // Nobody listens on bob yet: more than are kept arrive.
  const sent: string[] = [];
  for (let i = 0; i < HELD_MESSAGES + 10; i++) sent.push((await a.multicast(`m ${i}`)).id);
  await new Promise((r) => setTimeout(r, 500));
  const got = collect<CotalMessageEvent>(b, "message");
  await waitFor(() => got.length >= HELD_MESSAGES, { what: "the held copies" });
  await new Promise((r) => setTimeout(r, 200));
  // The newest are kept, in order, once each; the oldest ten dropped, said once.
  assert.deepEqual(got.map((e) => e.message.id), sent.slice(10));
  const unheard = warnings.filter((w) => w.error.code === "messages_unheard");
  assert.equal(unheard.length, 1);
  assert.match(unheard[0].error.message, /Add a message listener before start\(\)/);
  // Live again once listened to.
  const live = await a.multicast("now");
  await waitFor(() => got.some((e) => e.message.id === live.id), { what: "the live post" });
});

Deno.test("endpoint - a DM past the recipient's unread cap is refused at once, saying so (not retried as a broker fault)", async () => {
  await using mesh = await startMesh();
  const alice = await mesh.agent("alice", policy);
  const bob = await mesh.agent("bob", policy);
  const a = alice.endpoint();
  await a.start();
  // Bob reads nothing: his DM queue keeps 256 unread from alice (per sender and recipient).
  for (let i = 0; i < 256; i++) await a.unicast(bob.id, `m${i}`);
  // Fault pass 10: each such DM waited out two 5 s retries and blamed a missing stream
  // ("publish_failed"); refused as what it is, it is not retried.
  await assert.rejects(
    a.unicast(bob.id, "one too many"),
    (e) =>
      isCotalError(e, "recipient_backlog_full") &&
      /its recipient has the most unread messages from this sender the space keeps/.test(e.message),
  );
});
