/**
 * The control rail's reply cache: a command with effects re-sent (same nonce) is answered with
 * its first copy's reply, kept while its nonce is remembered; at the cap the oldest finished
 * reply goes, never one still running (red team 25 flushed a slow spawn's entry with cheap
 * failing commands, and its caller's re-send was refused as a replay).
 */
import assert from "node:assert/strict";
import type { ControlReply } from "../../lib/manager/control_rail.ts";
import { REPLY_CACHE_CAP, REPLY_KEEP_MS, ReplyCache } from "../../lib/manager/control_server.ts";

const done = (id: string): Promise<ControlReply> =>
  Promise.resolve({ v: 1, id, ok: true, data: null } as ControlReply);

Deno.test("reply cache - a running command's reply outlives a flood of finished ones at the cap", async () => {
  let now = 0;
  const cache = new ReplyCache(() => now);
  const slow = Promise.withResolvers<ControlReply>();
  cache.set("victim", slow.promise);
  // Each request arrives in its own callback: the last one's reply has settled meanwhile.
  for (let i = 0; i < 2 * REPLY_CACHE_CAP; i++) {
    cache.set(`flood${i}`, done(`flood${i}`));
    await null;
  }
  assert.ok(cache.get("victim"), "the running command's entry was evicted");
  assert.ok(cache.size <= REPLY_CACHE_CAP);
  slow.resolve({ v: 1, id: "victim", ok: true, data: "row" } as ControlReply);
  const reply = await cache.get("victim")!;
  assert.ok(reply.ok && reply.data === "row");
  // Kept as long as the nonce is remembered, then gone.
  now += REPLY_KEEP_MS + 1;
  assert.equal(cache.get("victim"), undefined);
});
