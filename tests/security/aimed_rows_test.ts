/**
 * Broker answers aimed at coordination rows (the third red team's G, H and I). Any agent may
 * ask `$JS.API.INFO`, and the broker sends its JSON answer to whatever reply subject the agent
 * names, a bucket key included: the row is replaced by something no Cotal writer wrote. Such a
 * row is nobody's: the delivery daemon writes its lease back and keeps serving (it used to exit,
 * and its successor waited for a holder that did not exist), a newcomer takes a vacant lease at
 * once, a member row is put back from the daemon's last good copy, and the supervisor writes
 * its own lease back instead of disarming it. Presence rows no longer name lifecycle uids, the
 * keys of member and ACL rows.
 */
import assert from "node:assert/strict";
import type { NatsConnection } from "nats";
import { deliveryRequest } from "../../lib/delivery/mod.ts";
import { bucketNames, memberKey } from "../../lib/wire/resources.ts";
import { waitFor } from "../_harness/broker.ts";
import {
  connectAs,
  dlvCount,
  post,
  startDaemonProcess,
  startDeliverySpace,
} from "../delivery/_helpers.ts";
import { startManagerMesh } from "../manager/_manager_mesh.ts";
import { mintCreds, newIdentity } from "../../lib/trust/mod.ts";
import { connectBroker } from "../../lib/wire/connect.ts";

/** Aims the broker's answer to `$JS.API.INFO` at `subject`. */
async function aim(nc: NatsConnection, subject: string): Promise<void> {
  nc.publish("$JS.API.INFO", new Uint8Array(), { reply: subject });
  await nc.flush();
}

async function row(nc: NatsConnection, bucket: string, key: string): Promise<unknown> {
  const kv = await nc.jetstream().views.kv(bucket, { bindOnly: true });
  const e = await kv.get(key);
  try {
    return e ? JSON.parse(new TextDecoder().decode(e.value)) : undefined;
  } catch {
    return "not JSON";
  }
}

Deno.test("security - an answer aimed at the delivery lease neither stops the daemon nor holds off its successor", async () => {
  await using s = await startDeliverySpace({ prefix: "aimlease" });
  let daemon = startDaemonProcess(s);
  const mallory = await s.agent("mallory");
  const alice = await s.agent("alice");
  const bob = await s.agent("bob");
  const mn = await connectAs(s.url, mallory.creds);
  const an = await connectAs(s.url, alice.creds);
  const bn = await connectAs(s.url, bob.creds);
  const bucket = bucketNames(s.space).delivery;
  try {
    await daemon.waitForLine(/delivery daemon up/);
    await deliveryRequest(bn, s.space, bob.principal, "durableJoin", { channel: "general" });
    await aim(mn, `$KV.${bucket}.lease.0`);
    await daemon.waitForLine(/the lease row was overwritten by no holder .*; wrote it back/);
    await waitFor(
      async () =>
        typeof (await row(mn, bucket, "lease.0") as { holder?: string })?.holder === "string",
      {
        what: "the lease row written back",
      },
    );
    // Still serving: a post reaches Bob's durable.
    await post(an, s.space, alice, "general", "after the aimed answer");
    await waitFor(async () => await dlvCount(bn, s.space, bob) === 1, { what: "the copy" });

    // Its successor, with the row blanked again and no lock to prove anything: takes it at once.
    daemon.kill("SIGKILL");
    await daemon.exited;
    await aim(mn, `$KV.${bucket}.lease.0`);
    const t0 = Date.now();
    daemon = startDaemonProcess(s, ["--lease-wait", "60"]);
    await daemon.waitForLine(/delivery daemon up/, 30_000);
    assert.ok(Date.now() - t0 < 20_000, `the successor took ${Date.now() - t0} ms`);
  } finally {
    for (const c of [mn, an, bn]) await c.close().catch(() => {});
    daemon.kill();
    await daemon.exited;
  }
});

Deno.test("security - an answer aimed at a member row is put back by the delivery daemon; durable delivery goes on", async () => {
  await using s = await startDeliverySpace({ prefix: "aimmember" });
  const daemon = startDaemonProcess(s);
  const mallory = await s.agent("mallory");
  const alice = await s.agent("alice");
  const bob = await s.agent("bob");
  const mn = await connectAs(s.url, mallory.creds);
  const an = await connectAs(s.url, alice.creds);
  const bn = await connectAs(s.url, bob.creds);
  const members = bucketNames(s.space).members;
  try {
    await daemon.waitForLine(/delivery daemon up/);
    await deliveryRequest(bn, s.space, bob.principal, "durableJoin", { channel: "general" });
    // The test knows Bob's uid; an agent no longer learns it from presence.
    const key = memberKey("general", bob.principal, bob.uid);
    await aim(mn, `$KV.${members}.${key}`);
    await daemon.waitForLine(/member row .* was overwritten by no writer; put it back/);
    const reader = await connectBroker({ servers: s.url, creds: await s.mint("delivery") });
    try {
      await waitFor(async () => {
        const r = await row(reader, members, key) as Record<string, unknown> | string;
        return typeof r === "object" && r !== null && !("type" in r);
      }, { what: "the member row put back" });
    } finally {
      await reader.close();
    }
    await post(an, s.space, alice, "general", "still a member");
    await waitFor(async () => await dlvCount(bn, s.space, bob) === 1, { what: "bob's copy" });
  } finally {
    for (const c of [mn, an, bn]) await c.close().catch(() => {});
    daemon.kill();
    await daemon.exited;
  }
});

Deno.test("security - an answer aimed at the supervisor's lease does not disarm it", async () => {
  await using mesh = await startManagerMesh("aimmgr");
  const lines: string[] = [];
  const mgr = await mesh.manager({ log: (l) => lines.push(l) });
  const creds = await mintCreds(mesh.auth, newIdentity(), "agent", {
    principal: { owner: "local", actor: "mallory" },
    lifecycleUid: "abcdefghijklmnopqrstuvwxyz",
  });
  const nc = await connectAs(mesh.url, creds);
  const bucket = bucketNames(mesh.space).manager;
  try {
    await aim(nc, `$KV.${bucket}.lease.${mgr.instanceId}`);
    // Two renewals later it still holds its lease, and says nothing of losing it.
    await new Promise((r) => setTimeout(r, 7_000));
    assert.ok(!lines.some((l) => /changed hands/.test(l)), lines.join("\n"));
    const rd = await connectBroker({
      servers: mesh.url,
      creds: await mintCreds(mesh.auth, newIdentity(), "supervisor"),
    });
    try {
      const r = await row(rd, bucket, `lease.${mgr.instanceId}`) as { instanceId?: string };
      assert.equal(r?.instanceId, mgr.instanceId);
    } finally {
      await rd.close();
    }
  } finally {
    await nc.close();
  }
});
