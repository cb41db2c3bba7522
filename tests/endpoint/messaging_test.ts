import assert from "node:assert/strict";
import { waitFor } from "../_harness/broker.ts";
import type { CotalMessageEvent } from "../../lib/endpoint/mod.ts";
import { collect, startMesh } from "./_mesh.ts";

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
