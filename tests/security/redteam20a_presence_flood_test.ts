/**
 * Red team 20a: every member watches the presence bucket by subscribing to all its writes, and
 * each agent may write its own key (rows up to 64 KiB). A member with its own cred (no relay,
 * no byte budget, no connection limit) rewrites its own presence key with ~60 KiB rows from 8
 * connections at wire speed for 20 s: the broker copies every write to every watcher. The test
 * asserts the defence holds: an honest watcher stays connected and still sees a peer leave.
 */
import assert from "node:assert/strict";
import type { NatsConnection } from "nats";
import { CotalEndpoint } from "../../lib/endpoint/mod.ts";
import { bucketNames } from "../../lib/wire/resources.ts";
import { waitFor } from "../_harness/broker.ts";
import { connectAs, startDeliverySpace } from "../delivery/_helpers.ts";

Deno.test("redteam20a - a member flooding its own presence key does not cut or blind other members' roster", async () => {
  await using s = await startDeliverySpace({ prefix: "rt20apres" });
  const mallory = await s.agent("mallory");
  const alice = await s.agent("alice");
  const bob = await s.agent("bob");
  const mk = (a: typeof alice) =>
    new CotalEndpoint({
      servers: s.url,
      space: s.space,
      card: { name: a.name },
      creds: a.creds,
      lifecycleUid: a.uid,
    });
  const aep = mk(alice);
  const bep = mk(bob);
  const errors: string[] = [];
  for (const ev of ["error", "warning"] as const) {
    bep.addEventListener(ev, (e) => {
      errors.push(String((e as unknown as { error?: Error }).error?.message));
    });
  }
  await aep.start();
  await bep.start();
  const conns: NatsConnection[] = [];
  let stop = false;
  try {
    await waitFor(() => bep.getRoster().some((p) => p.card.name === "alice"), {
      what: "bob seeing alice",
      timeoutMs: 15_000,
    });
    const key = `$KV.${bucketNames(s.space).presence}.local.mallory`;
    const row = new TextEncoder().encode(JSON.stringify({ pad: "p".repeat(60_000) }));
    for (let i = 0; i < 8; i++) conns.push(await connectAs(s.url, mallory.creds));
    let sent = 0;
    const floods = conns.map(async (c) => {
      while (!stop) {
        for (let j = 0; j < 200; j++) c.publish(key, row);
        sent += 200;
        await c.flush().catch(() => {});
      }
    });
    await new Promise((r) => setTimeout(r, 8000));
    // Alice leaves during the flood: bob must see it.
    await aep.stop();
    const gone = await waitFor(
      () => !bep.getRoster().some((p) => p.card.name === "alice" && p.status !== "offline"),
      {
        what: "bob seeing alice leave during the flood",
        timeoutMs: 15_000,
      },
    ).then(() => "ok", (e) => (e as Error).message);
    stop = true;
    await Promise.all(floods);
    console.log(
      `mallory sent ${sent} presence rows (${
        (sent * row.length / 2 ** 20).toFixed(0)
      } MiB); bob errors: ${errors.slice(0, 3).join(" | ") || "none"}`,
    );
    assert.equal(gone, "ok");
    assert.deepEqual(errors.filter((e) => /slow consumer|closed|disconnect/i.test(e)), []);
  } finally {
    stop = true;
    for (const c of conns) await c.close().catch(() => {});
    await bep.stop().catch(() => {});
    await aep.stop().catch(() => {});
  }
});
