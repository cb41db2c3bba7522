/**
 * Red team 20b: a pull's status answer (`NATS/1.0 404 No Messages`, the answer to a no-wait
 * MSG.NEXT on the member's own empty DM durable) aimed, through the request's reply subject,
 * at a bucket key the delivery daemon reads with npm:nats's KV *reads* rather than its own
 * follower (red team 19c's fix covered the mirrors and the lease watch only). nats-server 2.10
 * stores the status header with the row, and npm:nats then
 *
 * - reads the key as absent (`kv.get` answers null), and
 * - never ends a key listing that meets it (`kv.keys()` hangs: its ordered consumer takes the
 *   stored row for its own status).
 *
 * Aimed at:
 *
 * 1. `lease.0` of the delivery bucket: the lease watch reports a foreign row, the keeper reads
 *    the key, finds it "gone", cannot re-create it (the key exists) and leaves as if another
 *    daemon held the lease. Its successor finds no holder and no way to create until the row
 *    ages out, and the member re-aims.
 * 2. a `gap.` key of the set-aside bucket (30-day TTL): every later daemon start lists those
 *    keys after taking the lease (`SetAside.open`), and hangs there holding the lease.
 * 3. a key of the membership-feed bucket: every later feed start lists the bucket and hangs,
 *    so the membership view is never written again.
 *
 * Each test asserts the defence holds: the daemon keeps serving / comes up / its feed comes up.
 * The attacker is a member with its own cred (an embedder's agent), outside any relay.
 */
import assert from "node:assert/strict";
import type { NatsConnection } from "nats";
import { deliveryRequest } from "../../lib/delivery/mod.ts";
import { bucketNames, dmDurableName, streamNames } from "../../lib/wire/mod.ts";
import {
  type Agent,
  connectAs,
  type DaemonProcess,
  dlvCount,
  post,
  startDaemonProcess,
  startDeliverySpace,
} from "../delivery/_helpers.ts";

/** Aims the 404 status of a no-wait pull on `agent`'s own (empty) DM durable at `subject`. */
async function aimStatus(nc: NatsConnection, space: string, agent: Agent, subject: string) {
  const next = `$JS.API.CONSUMER.MSG.NEXT.${streamNames(space).dm}.${
    dmDurableName(agent.principal, agent.uid)
  }`;
  nc.publish(next, new TextEncoder().encode(JSON.stringify({ batch: 1, no_wait: true })), {
    reply: subject,
  });
  await nc.flush();
}

/** SIGTERM, then SIGKILL when the daemon has not ended within 5 s (a wedged start ignores SIGTERM). */
async function stop(d: DaemonProcess): Promise<boolean> {
  d.kill("SIGTERM");
  let timer: ReturnType<typeof setTimeout> | undefined;
  const ended = await Promise.race([
    d.exited.then(() => true),
    new Promise<false>((r) => timer = setTimeout(() => r(false), 5_000)),
  ]);
  clearTimeout(timer);
  if (!ended) {
    d.kill("SIGKILL");
    await d.exited;
  }
  return ended;
}

async function until(cond: () => Promise<boolean> | boolean, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await cond()) return true;
    await new Promise((r) => setTimeout(r, 200));
  }
  return await cond();
}

Deno.test("redteam20b - a 404 status aimed at the delivery lease row does not end the daemon", async () => {
  await using s = await startDeliverySpace({ prefix: "rt20bslease" });
  const daemon = startDaemonProcess(s);
  const mallory = await s.agent("mallory");
  const alice = await s.agent("alice");
  const bob = await s.agent("bob");
  const mn = await connectAs(s.url, mallory.creds);
  const an = await connectAs(s.url, alice.creds);
  const bn = await connectAs(s.url, bob.creds);
  let exited = false;
  daemon.exited.then(() => exited = true);
  try {
    await daemon.waitForLine(/delivery daemon up/, 30_000);
    await deliveryRequest(bn, s.space, bob.principal, "durableJoin", { channel: "general" });
    await post(an, s.space, alice, "general", "before");
    assert.ok(
      await until(async () => await dlvCount(bn, s.space, bob) === 1, 15_000),
      "first copy",
    );

    await aimStatus(mn, s.space, mallory, `$KV.${bucketNames(s.space).delivery}.lease.0`);
    await new Promise((r) => setTimeout(r, 3_000));
    await post(an, s.space, alice, "general", "after");
    const got = await until(async () => await dlvCount(bn, s.space, bob) === 2, 20_000);
    assert.ok(!exited, `the daemon left after one aimed status:\n${daemon.stderr()}`);
    assert.ok(got, `bob's copy never arrived:\n${daemon.stderr()}`);
  } finally {
    for (const c of [mn, an, bn]) await c.close().catch(() => {});
    await stop(daemon);
  }
});

Deno.test("redteam20b - a 404 status aimed at a set-aside gap key does not keep a restarted daemon from serving", async () => {
  await using s = await startDeliverySpace({ prefix: "rt20bsgap" });
  let daemon = startDaemonProcess(s);
  const mallory = await s.agent("mallory");
  const alice = await s.agent("alice");
  const bob = await s.agent("bob");
  const mn = await connectAs(s.url, mallory.creds);
  const an = await connectAs(s.url, alice.creds);
  const bn = await connectAs(s.url, bob.creds);
  try {
    await daemon.waitForLine(/delivery daemon up/, 30_000);
    await deliveryRequest(bn, s.space, bob.principal, "durableJoin", { channel: "general" });
    await aimStatus(mn, s.space, mallory, `$KV.${bucketNames(s.space).setaside}.gap.x.y`);
    await stop(daemon);
    daemon = startDaemonProcess(s);
    try {
      await daemon.waitForLine(/delivery daemon up/, 45_000);
    } catch (e) {
      assert.fail(`a restarted daemon never came up: ${(e as Error).message}`);
    }
    await post(an, s.space, alice, "general", "after restart");
    assert.ok(
      await until(async () => await dlvCount(bn, s.space, bob) === 1, 20_000),
      `bob's copy never arrived:\n${daemon.stderr()}`,
    );
  } finally {
    for (const c of [mn, an, bn]) await c.close().catch(() => {});
    await stop(daemon);
  }
});

Deno.test("redteam20b - a 404 status aimed at a membership-feed key does not keep a restarted feed down", async () => {
  await using s = await startDeliverySpace({ prefix: "rt20bsfeed" });
  let daemon = startDaemonProcess(s);
  const mallory = await s.agent("mallory");
  const mn = await connectAs(s.url, mallory.creds);
  try {
    await daemon.waitForLine(/membership feed up/, 30_000);
    await aimStatus(mn, s.space, mallory, `$KV.${bucketNames(s.space).membership}.zz.junk`);
    await stop(daemon);
    daemon = startDaemonProcess(s);
    await daemon.waitForLine(/delivery daemon up/, 45_000);
    await daemon.waitForLine(/membership feed (up|down)/, 30_000).catch(() => "");
    assert.match(
      daemon.stderr(),
      /membership feed up/,
      "the restarted daemon's feed never came up",
    );
    assert.ok(await stop(daemon), "the restarted daemon ignored SIGTERM");
  } finally {
    await mn.close().catch(() => {});
    await stop(daemon);
  }
});
