/**
 * Red team 19c, against a member's endpoint (lib/endpoint), on a real broker with members
 * connected straight to it with their own agent creds. Each test asserts the defence HOLDS.
 *
 * The lazily decoded header block (a key with a space) is read through `m.headers`, not through
 * headersOf, in: surfaceConsumed (DM and role consumers), readHistory (backfill, history()), and
 * bucket_watch's snapshot (MsgHdrsImpl.decode of a stored row's `hdrs`).
 */
import assert from "node:assert/strict";
import { bucketNames } from "../../lib/wire/mod.ts";
import { buildMessage, publishMessage, subjectForMessage } from "../../lib/wire/mod.ts";
import { waitFor } from "../_harness/broker.ts";
import { connectAs, startDeliverySpace } from "../delivery/_helpers.ts";
import { recordingEndpoint, sendBad } from "./_rt19c.ts";

const P = (space: string) => `cotal.${space}`;

// A1: Mallory DMs Alice a message whose headers cannot be decoded. surfaceConsumed reads
// `m.headers`: the throw in the consume callback makes npm:nats stop Alice's DM consumer
// (ConsumerMessages.stop(err)), silently. The next DM, from Bob, must still arrive.
Deno.test("redteam19c - an undecodable DM does not end the recipient's DM consumer", async () => {
  await using s = await startDeliverySpace({ prefix: "rt19cdm" });
  const alice = await s.agent("alice");
  const bob = await s.agent("bob");
  const mallory = await s.agent("mallory");
  const mn = await connectAs(s.url, mallory.creds);
  const bn = await connectAs(s.url, bob.creds);
  const { ep, got, warnings } = recordingEndpoint(s.url, s.space, alice);
  try {
    await ep.start();
    const bad = buildMessage({
      space: s.space,
      from: { id: mallory.id, name: mallory.name },
      to: alice.id,
      text: "bad",
    });
    await sendBad(mn, subjectForMessage(bad), new TextEncoder().encode(JSON.stringify(bad)));
    await new Promise((r) => setTimeout(r, 1_000));
    const good = buildMessage({
      space: s.space,
      from: { id: bob.id, name: bob.name },
      to: alice.id,
      text: "dm after",
    });
    await publishMessage(bn, good);
    await waitFor(() => got.includes("dm after"), {
      what: "Bob's DM after Mallory's undecodable one",
      timeoutMs: 15_000,
    });
  } catch (e) {
    console.error("alice got", got, "warnings", warnings);
    throw e;
  } finally {
    await ep.stop();
    await mn.close();
    await bn.close();
  }
});

// A2: the same with a task on a role: the role member's task consumer must keep going.
Deno.test("redteam19c - an undecodable task does not end the role member's task consumer", async () => {
  await using s = await startDeliverySpace({ prefix: "rt19ctask" });
  const alice = await s.agent("alice", { role: "reviewer" });
  const bob = await s.agent("bob");
  const mallory = await s.agent("mallory");
  const mn = await connectAs(s.url, mallory.creds);
  const bn = await connectAs(s.url, bob.creds);
  const { ep, got, warnings } = recordingEndpoint(s.url, s.space, alice, { role: "reviewer" });
  try {
    await ep.start();
    const bad = buildMessage({
      space: s.space,
      from: { id: mallory.id, name: mallory.name },
      toService: "reviewer",
      text: "bad",
    });
    await sendBad(mn, subjectForMessage(bad), new TextEncoder().encode(JSON.stringify(bad)));
    await new Promise((r) => setTimeout(r, 1_000));
    const good = buildMessage({
      space: s.space,
      from: { id: bob.id, name: bob.name },
      toService: "reviewer",
      text: "task after",
    });
    await publishMessage(bn, good);
    await waitFor(() => got.includes("task after"), {
      what: "Bob's task after Mallory's undecodable one",
      timeoutMs: 15_000,
    });
  } catch (e) {
    console.error("alice got", got, "warnings", warnings);
    throw e;
  } finally {
    await ep.stop();
    await mn.close();
    await bn.close();
  }
});

// A3: one undecodable post retained in a channel: readHistory reads `m.headers` eagerly, so
// a member's channelHistory() and a join's backfill would fail for as long as it is retained.
Deno.test("redteam19c - an undecodable post in a channel's history: history and backfill still read the good posts", async () => {
  await using s = await startDeliverySpace({ prefix: "rt19chist" });
  const alice = await s.agent("alice");
  const bob = await s.agent("bob");
  const mallory = await s.agent("mallory");
  const mn = await connectAs(s.url, mallory.creds);
  const bn = await connectAs(s.url, bob.creds);
  const mk = (text: string) =>
    buildMessage({
      space: s.space,
      from: { id: bob.id, name: bob.name },
      channel: "general",
      text,
    });
  await publishMessage(bn, mk("old 1"));
  const bad = buildMessage({
    space: s.space,
    from: { id: mallory.id, name: mallory.name },
    channel: "general",
    text: "bad",
  });
  await sendBad(mn, subjectForMessage(bad), new TextEncoder().encode(JSON.stringify(bad)));
  await publishMessage(bn, mk("old 2"));
  const { ep, got, warnings } = recordingEndpoint(s.url, s.space, alice, { channels: ["general"] });
  try {
    await ep.start();
    // Backfill at join.
    await waitFor(() => got.includes("old 2"), { what: "the backfill", timeoutMs: 10_000 })
      .catch(() => {});
    const backfilled = ["old 1", "old 2"].filter((t) => got.includes(t));
    let hist: string[] = [];
    let histErr = "";
    try {
      hist = (await ep.channelHistory("general", { limit: 10 })).map((m) =>
        (m.parts[0] as { text: string }).text
      );
    } catch (e) {
      histErr = String((e as Error).message ?? e);
    }
    assert.deepEqual(
      { backfilled, hist: hist.filter((t) => t.startsWith("old")), histErr },
      { backfilled: ["old 1", "old 2"], hist: ["old 1", "old 2"], histErr: "" },
      `warnings: ${warnings.join(",")}`,
    );
  } finally {
    await ep.stop();
    await mn.close();
    await bn.close();
  }
});

// A4: Mallory writes her own presence row (allowed) with an undecodable header block. Live
// watchers drop it; a newcomer's snapshot decodes each stored row's `hdrs` with
// MsgHdrsImpl.decode, which throws: the newcomer's presence watch fails at Mallory's row, so
// it never sees rows stored after hers (Bob, who came later) nor any live change.
Deno.test("redteam19c - an undecodable presence row: a newcomer's roster still shows the other members", async () => {
  await using s = await startDeliverySpace({ prefix: "rt19cpres" });
  const alice = await s.agent("alice");
  const bob = await s.agent("bob");
  const mallory = await s.agent("mallory");
  const mn = await connectAs(s.url, mallory.creds);
  const b = recordingEndpoint(s.url, s.space, bob);
  const a = recordingEndpoint(s.url, s.space, alice);
  try {
    const row = JSON.stringify({
      card: { id: mallory.id, name: mallory.name },
      status: "online",
      ts: Date.now(),
    });
    await sendBad(
      mn,
      `$KV.${bucketNames(s.space).presence}.local.mallory`,
      new TextEncoder().encode(row),
    );
    await b.ep.start(); // Bob's row is stored after Mallory's.
    await a.ep.start();
    await waitFor(() => a.ep.getRoster().some((p) => p.card.id === bob.id), {
      what: "bob on alice's roster",
      timeoutMs: 10_000,
    }).catch(() => {});
    assert.deepEqual(
      {
        bobOnRoster: a.ep.getRoster().some((p) => p.card.id === bob.id),
        watchFailed: a.warnings.includes("presence_watch_failed"),
      },
      { bobOnRoster: true, watchFailed: false },
      `alice's roster: ${JSON.stringify(a.ep.getRoster().map((p) => p.card.id))}; warnings ${
        a.warnings.join(",")
      }`,
    );
  } finally {
    await a.ep.stop();
    await b.ep.stop();
    await mn.close();
  }
});
void P;
