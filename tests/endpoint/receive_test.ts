/**
 * Receive rules and durable-copy settlement. A plain (no-auth) JetStream broker lets the test
 * publish what no minted credential could: nkey-shaped owners, malformed subjects, frames.
 */
import assert from "node:assert/strict";
import { connect, headers, type NatsConnection } from "nats";
import { startTestBroker, uniqueSpace, waitFor } from "../_harness/broker.ts";
import {
  CotalEndpoint,
  type CotalMessageEvent,
  EndpointErrorEvent,
  EndpointWarningEvent,
} from "../../lib/endpoint/mod.ts";
import { CotalError } from "../../lib/errors.ts";
import { newLifecycleUid } from "../../lib/wire/names.ts";
import { provisionAgentDurables } from "../../lib/wire/provision.ts";
import { dlvDurableName, dmDurableName } from "../../lib/wire/resources.ts";
import { setupSpaceStreams } from "../../lib/wire/streams.ts";
import { seedChannelRegistry } from "../../lib/wire/channels.ts";
import { collect } from "./_mesh.ts";

async function openMesh() {
  const broker = await startTestBroker();
  const space = uniqueSpace("rx");
  await setupSpaceStreams({ servers: broker.url, space });
  const principal = { owner: "local", actor: "bob" };
  const lifecycleUid = newLifecycleUid();
  await provisionAgentDurables({
    servers: broker.url,
    space,
    principal,
    lifecycleUid,
    subscribe: ["general"],
  });
  const ep = new CotalEndpoint({
    servers: broker.url,
    space,
    card: { name: "bob", owner: "local", actor: "bob" },
    lifecycleUid,
    channels: ["general"],
  });
  const raw = await connect({ servers: broker.url });
  return {
    broker,
    space,
    principal,
    lifecycleUid,
    ep,
    raw,
    async [Symbol.asyncDispose]() {
      await ep.stop();
      await raw.close();
      await broker.stop();
    },
  };
}

function envelope(
  space: string,
  from: string,
  route: Record<string, string>,
  id = crypto.randomUUID(),
) {
  return JSON.stringify({
    id,
    ts: Date.now(),
    space,
    from: { id: from, name: from.split(".")[1] },
    ...route,
    parts: [{ kind: "text", text: "x" }],
  });
}

async function pending(raw: NatsConnection, stream: string, durable: string) {
  const jsm = await raw.jetstreamManager();
  const ci = await jsm.consumers.info(stream, durable);
  return {
    ackPending: ci.num_ack_pending,
    waiting: ci.num_pending,
    redelivered: ci.num_redelivered,
  };
}

Deno.test("endpoint - receive rules drop and terminate forged or malformed DMs", async () => {
  await using m = await openMesh();
  const got = collect<CotalMessageEvent>(m.ep, "message");
  const errors = collect<EndpointErrorEvent>(m.ep, "error");
  await m.ep.start();
  const P = `cotal.${m.space}`;
  const js = m.raw.jetstream();
  const nkeyOwner = "UAQ5FZG2HL3ZSE2MQHXEXXV6NP2XJ6YBUK5SUFSI7N6OSXA5BEYQCAD";
  await js.publish(`${P}.inst.local.bob.local.alice`, "{not json");
  await js.publish(
    `${P}.inst.local.bob.local.alice`,
    envelope(m.space, "local.carol", { to: "local.bob" }),
  );
  await js.publish(
    `${P}.inst.local.bob.local.alice.extra`,
    envelope(m.space, "local.alice", { to: "local.bob" }),
  );
  await js.publish(
    `${P}.inst.local.bob.${nkeyOwner}.alice`,
    envelope(m.space, `${nkeyOwner}.alice`, { to: "local.bob" }),
  );
  const good = crypto.randomUUID();
  await js.publish(
    `${P}.inst.local.bob.local.alice`,
    envelope(m.space, "local.alice", { to: "local.bob" }, good),
  );

  await waitFor(() => got.length === 1 && errors.length === 4, {
    what: "one message and four drops",
  });
  assert.equal(got[0].message.id, good);
  const reasons = errors.map((e) => /\(([a-z-]+)\)/.exec(e.error.message)![1]).sort();
  assert.deepEqual(reasons, [
    "malformed-json",
    "malformed-subject",
    "not-principal-owner",
    "sender-mismatch",
  ]);
  assert.ok(errors.every((e) => e.error.code === "message_dropped"));
  // Terminated, not left pending: nothing waits out the 60 s ack wait for a redelivery.
  const dm = dmDurableName(m.principal, m.lifecycleUid);
  await waitFor(async () => (await pending(m.raw, `DM_${m.space}`, dm)).ackPending === 0, {
    what: "all five settled",
  });
});

Deno.test("endpoint - a forged live channel message is dropped with an error, a good one surfaces", async () => {
  await using m = await openMesh();
  const got = collect<CotalMessageEvent>(m.ep, "message");
  const errors = collect<EndpointErrorEvent>(m.ep, "error");
  await m.ep.start();
  const P = `cotal.${m.space}`;
  m.raw.publish(
    `${P}.chat.local.alice.general`,
    envelope(m.space, "local.carol", { channel: "general" }),
  );
  const id = crypto.randomUUID();
  m.raw.publish(
    `${P}.chat.local.alice.general`,
    envelope(m.space, "local.alice", { channel: "x" }, id),
  );
  await waitFor(() => got.length === 1 && errors.length === 1, {
    what: "one message and one drop",
  });
  assert.match(errors[0].error.message, /sender-mismatch/);
  // The routing field comes from the subject, not the payload.
  assert.equal(got[0].message.channel, "general");
});

Deno.test("endpoint - durable delivery frames surface once, coalesce with live copies, and settle", async () => {
  await using m = await openMesh();
  const got = collect<CotalMessageEvent>(m.ep, "message");
  const errors = collect<EndpointErrorEvent>(m.ep, "error");
  let hold: CotalMessageEvent | undefined;
  m.ep.addEventListener("message", (ev) => {
    if (
      ev.message.parts[0]?.kind === "text" &&
      (ev.message.parts[0] as { text: string }).text === "hold"
    ) {
      ev.preventDefault();
      hold = ev;
    }
  });
  await m.ep.start();
  const P = `cotal.${m.space}`;
  const dlv = `${P}.dlv.local.bob.${m.lifecycleUid}`;
  const js = m.raw.jetstream();
  const frame = (msg: string) =>
    JSON.stringify({ version: 1, channel: "general", msg: JSON.parse(msg) });
  const h = headers();
  h.set("Cotal-Delivery-Frame", "1");

  // A durable copy of a message never seen live: surfaced as durable, then acked.
  const a = envelope(m.space, "local.alice", {});
  await js.publish(dlv, frame(a), { headers: h });
  await waitFor(() => got.length === 1, { what: "the durable copy" });
  assert.equal(got[0].meta.source, "durable");
  assert.equal(got[0].meta.kind, "channel");
  assert.equal(got[0].message.channel, "general");
  assert.equal(got[0].delivery.durable, true);
  const name = dlvDurableName(m.principal, m.lifecycleUid);
  await waitFor(async () => (await pending(m.raw, `DLV_${m.space}`, name)).ackPending === 0, {
    what: "the ack",
  });

  // Live first, durable second: one event; the durable copy is acked silently.
  const id = crypto.randomUUID();
  const live = envelope(m.space, "local.alice", { channel: "general" }, id);
  m.raw.publish(`${P}.chat.local.alice.general`, live);
  await waitFor(() => got.length === 2, { what: "the live copy" });
  await js.publish(dlv, frame(live), { headers: h });
  await waitFor(async () => (await pending(m.raw, `DLV_${m.space}`, name)).waiting === 0, {
    what: "the coalesced copy consumed",
  });
  await waitFor(async () => (await pending(m.raw, `DLV_${m.space}`, name)).ackPending === 0, {
    what: "its ack",
  });
  assert.equal(got.filter((e) => e.message.id === id).length, 1);

  // A listener that takes ownership (preventDefault) and naks gets the copy again.
  const held = JSON.parse(envelope(m.space, "local.alice", {}));
  held.parts = [{ kind: "text", text: "hold" }];
  await js.publish(dlv, frame(JSON.stringify(held)), { headers: h });
  await waitFor(() => hold !== undefined, { what: "the held copy" });
  assert.equal(hold!.delivery.settled, false);
  const first = hold!;
  hold = undefined;
  first.delivery.nak();
  await waitFor(() => hold !== undefined, { what: "the redelivered copy" });
  assert.equal(hold!.message.id, first.message.id);
  await hold!.delivery.ack();
  await waitFor(async () => (await pending(m.raw, `DLV_${m.space}`, name)).ackPending === 0, {
    what: "the owner's ack",
  });

  // A copy without the frame header is refused and terminated.
  await js.publish(dlv, frame(envelope(m.space, "local.alice", {})));
  await waitFor(() => errors.length === 1, { what: "the refused frame" });
  assert.match(errors[0].error.message, /malformed-frame/);
  await waitFor(async () => (await pending(m.raw, `DLV_${m.space}`, name)).ackPending === 0, {
    what: "its termination",
  });
});

Deno.test("endpoint - a throwing listener and unheard warnings or errors never kill the host", async () => {
  await using m = await openMesh();
  const errors = collect<EndpointErrorEvent>(m.ep, "error");
  m.ep.addEventListener("message", () => {
    throw new Error("listener bug");
  });
  m.ep.addEventListener("message", () => Promise.reject(new Error("async listener bug")));
  await m.ep.start();
  const P = `cotal.${m.space}`;
  m.raw.publish(
    `${P}.chat.local.alice.general`,
    envelope(m.space, "local.alice", { channel: "general" }),
  );
  await waitFor(() => errors.length === 2, { what: "both listener faults reported" });
  assert.ok(errors.every((e) => e.error.code === "listener_failed"));
  // Nobody listens to warnings here: a warning is dispatched into the void, harmlessly.
  const lonely = new CotalEndpoint({
    space: "x",
    card: { name: "nobody", owner: "local", actor: "n" },
    consume: false,
  });
  lonely.dispatchEvent(new EndpointWarningEvent(new CotalError("messages_unheard", "unheard")));
  lonely.dispatchEvent(new EndpointErrorEvent(new CotalError("messages_unheard", "unheard")));
  // A DM whose listener throws is naked for redelivery, not acked.
  const dm = dmDurableName(m.principal, m.lifecycleUid);
  await m.raw.jetstream().publish(
    `${P}.inst.local.bob.local.alice`,
    envelope(m.space, "local.alice", { to: "local.bob" }),
  );
  await waitFor(async () => (await pending(m.raw, `DM_${m.space}`, dm)).redelivered >= 1, {
    what: "a redelivery",
  });
});

Deno.test("endpoint - publishes carry Nats-Msg-Id = message id, so a resend is a stream duplicate", async () => {
  await using m = await openMesh();
  await m.ep.start();
  const msg = await m.ep.multicast("once");
  const jsm = await m.raw.jetstreamManager();
  const stored = await jsm.streams.getMessage(`CHAT_${m.space}`, {
    last_by_subj: `cotal.${m.space}.chat.local.bob.general`,
  });
  assert.equal(stored.header.get("Nats-Msg-Id"), msg.id);
  assert.equal(stored.json<{ id: string }>().id, msg.id);
  const again = await m.raw.jetstream().publish(
    `cotal.${m.space}.chat.local.bob.general`,
    stored.data,
    { msgID: msg.id },
  );
  assert.equal(again.duplicate, true);
});

Deno.test("endpoint - the channel registry decides replay and delivery class; leave stops delivery", async () => {
  await using m = await openMesh();
  await seedChannelRegistry({
    servers: m.broker.url,
    space: m.space,
    channels: {
      quiet: { replay: false },
      recent: { replayWindow: "1h" },
      live: { deliveryClass: "live" },
    },
  });
  const P = `cotal.${m.space}`;
  const js = m.raw.jetstream();
  for (const ch of ["quiet", "recent", "live"]) {
    await js.publish(
      `${P}.chat.local.alice.${ch}`,
      envelope(m.space, "local.alice", { channel: ch }),
    );
  }
  const got = collect<CotalMessageEvent>(m.ep, "message");
  await m.ep.start();
  // replay:false is noise control: nothing replayed.
  assert.deepEqual(await m.ep.joinChannel("quiet"), {
    joined: true,
    backfilled: 0,
    durable: false,
    reason: "durable backstop unavailable (no delivery daemon answered)",
  });
  // A replay window still replays what is inside it.
  assert.equal((await m.ep.joinChannel("recent")).backfilled, 1);
  // A live-class channel asks for no backstop at all.
  assert.deepEqual(await m.ep.joinChannel("live"), { joined: true, backfilled: 1, durable: false });
  assert.deepEqual(m.ep.joinedChannels(), ["general", "quiet", "recent", "live"]);
  await waitFor(() => got.length === 2, { what: "the two backfills" });

  assert.deepEqual(await m.ep.leaveChannel("live"), { left: true });
  assert.deepEqual(await m.ep.leaveChannel("live"), { left: false });
  assert.deepEqual(m.ep.joinedChannels(), ["general", "quiet", "recent"]);
  m.raw.publish(
    `${P}.chat.local.alice.live`,
    envelope(m.space, "local.alice", { channel: "live" }),
  );
  const marker = crypto.randomUUID();
  m.raw.publish(
    `${P}.chat.local.alice.quiet`,
    envelope(m.space, "local.alice", { channel: "quiet" }, marker),
  );
  await waitFor(() => got.some((e) => e.message.id === marker), {
    what: "the post on a joined channel",
  });
  assert.ok(
    !got.some((e) => e.message.channel === "live" && !e.meta.historical),
    "nothing live after leaving",
  );
});
