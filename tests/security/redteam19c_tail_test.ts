/**
 * Red team 19c: `cotal tail` (lib/mesh/ops.ts tail) reads `m.headers` of each live channel post
 * in its for-await loop: one undecodable post from a member (an agent cred minted for the root,
 * connected straight to the broker) would throw out of the loop and end the operator's tail.
 * Asserts the defence HOLDS: the tail keeps going and prints the next post.
 */
import assert from "node:assert/strict";
import {
  buildMessage,
  connectBroker,
  publishMessage,
  subjectForMessage,
} from "../../lib/wire/mod.ts";
import { mintForRoot, tail } from "../../lib/mesh/ops.ts";
import { down, up } from "../../lib/mesh/up.ts";
import { freePort, removeTempDir, tempDir, waitFor } from "../_harness/broker.ts";
import { sendBad } from "./_rt19c.ts";

Deno.test("redteam19c - an undecodable post does not end cotal tail", async () => {
  const root = await tempDir("cotal-root-");
  let ended: unknown = "still running";
  try {
    const r = await up({
      root,
      space: "t",
      host: "127.0.0.1",
      port: freePort(),
      detach: true,
      say: () => {},
      untilStopped: Promise.resolve(),
    });
    const seen: string[] = [];
    const ac = new AbortController();
    const ready = Promise.withResolvers<void>();
    const tailer = tail(root, "t", (l) => seen.push(l.text), {
      signal: ac.signal,
      ready: ready.resolve,
    }).then(() => (ended = "returned"), (e) => (ended = String(e?.message ?? e)));
    await ready.promise;
    const creds = await mintForRoot(root, "t", {
      profile: "operator",
      actor: "mallory",
    });
    const nc = await connectBroker({ servers: r.url, creds });
    const from = { id: "local.mallory", name: "mallory" };
    const bad = buildMessage({ space: "t", from, channel: "general", text: "bad" });
    await sendBad(nc, subjectForMessage(bad), new TextEncoder().encode(JSON.stringify(bad)));
    await publishMessage(nc, buildMessage({ space: "t", from, channel: "general", text: "after" }));
    await waitFor(() => seen.includes("after"), { what: "the post after", timeoutMs: 10_000 })
      .catch(() => {});
    await nc.close();
    assert.deepEqual({ seen: seen.includes("after"), ended }, {
      seen: true,
      ended: "still running",
    });
    ac.abort();
    await tailer;
  } finally {
    await down(root).catch(() => {});
    await removeTempDir(root);
  }
});
