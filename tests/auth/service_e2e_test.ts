/**
 * User mode end to end: a real IdP on loopback, the auth-service daemon as a real process
 * under its permission row, a real broker with the callout account preloaded, and clients
 * (raw npm:nats and CotalEndpoint) that exchange IdP tokens for bearers and connect with the
 * sentinel creds. Connect refusals are read from the daemon's audit log.
 */
import assert from "node:assert/strict";
import type { NatsConnection } from "nats";
import type { ActorRow } from "../../lib/auth/ledger.ts";
import { CotalEndpoint, type CotalMessageEvent } from "../../lib/endpoint/mod.ts";
import { chatReadFilter, chatSubject } from "../../lib/wire/subjects.ts";
import { waitFor } from "../_harness/broker.ts";
import { forge, now, rawToken } from "./_helpers.ts";
import { refusedConnect } from "./_callout_mesh.ts";
import { type ServiceMesh, type ServiceProcess, startServiceMesh } from "./_service_mesh.ts";

async function bearerFor(mesh: ServiceMesh, svc: ServiceProcess, actor: string, ttlSec = 300) {
  const r = await mesh.exchange(svc, { idpToken: await mesh.idp.sign(), actor, ttlSec });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body.token as string;
}

/** The daemon's next callout decision after a refused connect. */
async function refusedWith(svc: ServiceProcess, attempt: () => Promise<NatsConnection>) {
  const from = svc.events.length;
  const err = await refusedConnect(attempt);
  assert.match(err.message, /Authorization Violation/i);
  return await svc.waitEvent((e) => e.event === "callout", from);
}

/**
 * A user-mode endpoint. Its lifecycle uid is the grant's, so a channel gap across a reconnect
 * is filled from its chathist_ consumer; DM durables are not provisioned here (consume off).
 */
function endpointFor(
  mesh: ServiceMesh,
  row: ActorRow,
  bearer: () => Promise<string>,
): CotalEndpoint {
  return new CotalEndpoint({
    space: mesh.space,
    servers: mesh.broker.url,
    card: { name: row.actor, owner: row.owner, actor: row.actor },
    lifecycleUid: row.lifecycleUid,
    bearer,
    sentinelCreds: mesh.callout.sentinelCreds,
    channels: ["general"],
    consume: false,
  });
}

Deno.test("user mode - IdP token, bearer, connect: messages flow within the ledger's ACL", async () => {
  const mesh = await startServiceMesh({ streams: true });
  try {
    const svc = await mesh.start();
    const a = await mesh.grant("alice", { sub: ["general"], pub: ["general"] });
    const b = await mesh.grant("bob", { sub: ["general"], pub: [] });
    const alice = endpointFor(mesh, a, () => bearerFor(mesh, svc, "alice"));
    const bob = endpointFor(mesh, b, () => bearerFor(mesh, svc, "bob"));
    const got: CotalMessageEvent[] = [];
    bob.addEventListener("message", (e) => {
      got.push(e);
    });
    try {
      await alice.start();
      await bob.start();
      const sent = await alice.multicast("hello through the callout");
      await waitFor(() => got.some((e) => e.message.id === sent.id), { what: "bob to get it" });
      assert.equal(
        got.find((e) => e.message.id === sent.id)!.message.from.id,
        `${mesh.owner}.alice`,
      );
    } finally {
      await alice.stop();
      await bob.stop();
    }
    const allows = svc.events.filter((e) => e.event === "callout" && e.outcome === "allow");
    assert.ok(allows.some((e) => e.principal === `${mesh.owner}.alice`));
    assert.ok(allows.some((e) => e.principal === `${mesh.owner}.bob`));

    // Raw client: bob may read general but post nowhere, and never read other channels.
    const nc = await mesh.connectUser(await bearerFor(mesh, svc, "bob"));
    const seen: string[] = [];
    (async () => {
      for await (const s of nc.status()) {
        const ctx = (s as { permissionContext?: { subject: string } }).permissionContext;
        if (s.data === "PERMISSIONS_VIOLATION" && ctx) seen.push(ctx.subject);
      }
    })();
    const me = { owner: mesh.owner, actor: "bob" };
    nc.publish(chatSubject(mesh.space, me, "general"), "x");
    nc.subscribe(chatReadFilter(mesh.space, "secret"));
    await waitFor(() => seen.length >= 2, { what: "two permission violations" });
    assert.deepEqual(
      seen.sort(),
      [
        chatReadFilter(mesh.space, "secret"),
        chatSubject(mesh.space, me, "general"),
      ].sort(),
    );
    await nc.close();
  } finally {
    await mesh.close();
  }
});

Deno.test("user mode - connects are refused through the daemon's callout, with the reason logged", async () => {
  const mesh = await startServiceMesh();
  try {
    const svc = await mesh.start();
    const row = await mesh.grant("alice");
    const t = now();
    const claims = (over: Record<string, unknown>) => ({
      iss: `urn:cotal:auth:${mesh.space}`,
      aud: mesh.space,
      sub: mesh.owner,
      iat: t,
      nbf: t,
      exp: t + 300,
      ver: 1,
      scope: [],
      act: { owner: mesh.owner, actor: "alice", lifecycleUid: row.lifecycleUid },
      ...over,
    });
    const good = await bearerFor(mesh, svc, "alice");
    const cases: [string, string, () => Promise<NatsConnection>][] = [
      [
        "expired bearer",
        "bearer_expired",
        async () =>
          mesh.connectUser(
            await forge(mesh.issuer, claims({ iat: t - 600, nbf: t - 600, exp: t - 60 })),
          ),
      ],
      [
        "a bearer for another space",
        "bearer_bad_audience",
        async () => mesh.connectUser(await forge(mesh.issuer, claims({ aud: "other-space" }))),
      ],
      [
        "a post-dated bearer",
        "bearer_postdated",
        async () =>
          mesh.connectUser(
            await forge(mesh.issuer, claims({ iat: t + 3600, nbf: t + 3600, exp: t + 3900 })),
          ),
      ],
      [
        "alg none",
        "bearer_alg_refused",
        () => mesh.connectUser(rawToken({ alg: "none", kid: mesh.issuer.activeKid }, claims({}))),
      ],
      [
        "a malformed inbox nonce",
        "callout_bad_nonce",
        () => mesh.connectUser(good, { name: "a.b" }),
      ],
      ["no bearer", "callout_no_token", () => mesh.connectUser("")],
    ];
    for (const [what, reason, attempt] of cases) {
      const d = await refusedWith(svc, attempt);
      assert.equal(d.outcome, "deny", what);
      assert.equal(d.code, reason, what);
    }

    // Revocation: the next connect is denied while the old bearer is still unexpired.
    const before = await mesh.connectUser(good);
    await before.close();
    await mesh.ledger.revoke(mesh.owner, "alice");
    const revoked = await refusedWith(svc, () => mesh.connectUser(good));
    assert.equal(revoked.code, "actor_not_granted");
    // A re-grant rotates the lifecycle: the old bearer is stale, a fresh one connects.
    await mesh.grant("alice");
    const stale = await refusedWith(svc, () => mesh.connectUser(good));
    assert.equal(stale.code, "bearer_stale");
    const fresh = await mesh.connectUser(await bearerFor(mesh, svc, "alice"));
    await fresh.close();
    assert.ok(!JSON.stringify(svc.events).includes(good), "the log never holds a bearer");
  } finally {
    await mesh.close();
  }
});

Deno.test("user mode - the broker disconnects a client when its bearer expires", async () => {
  const mesh = await startServiceMesh();
  try {
    const svc = await mesh.start();
    await mesh.grant("alice");
    const r = await mesh.exchange(svc, {
      idpToken: await mesh.idp.sign(),
      actor: "alice",
      ttlSec: 3,
    });
    const exp = r.body.exp as number;
    const nc = await mesh.connectUser(r.body.token as string);
    const closed = await Promise.race([
      nc.closed().then((err) => ({ err, at: Date.now() })),
      new Promise<undefined>((res) => setTimeout(() => res(undefined), 15_000)),
    ]);
    assert.ok(closed, "the connection outlived its bearer");
    assert.ok(closed.at >= (exp - 1) * 1000, "closed before the bearer's exp");
    assert.match(String(closed.err), /expired/i);
  } finally {
    await mesh.close();
  }
});

Deno.test("user mode - a bearer function keeps an endpoint connected across three expiries", async () => {
  const mesh = await startServiceMesh({ streams: true });
  try {
    const svc = await mesh.start();
    const a = await mesh.grant("alice");
    const b = await mesh.grant("bob", { sub: ["general"], pub: [] });
    const ttl = 4;
    let minted = 0;
    const alice = endpointFor(mesh, a, () => (minted++, bearerFor(mesh, svc, "alice", ttl)));
    const bob = endpointFor(mesh, b, () => bearerFor(mesh, svc, "bob", ttl));
    const got: CotalMessageEvent[] = [];
    bob.addEventListener("message", (e) => {
      got.push(e);
    });
    try {
      await alice.start();
      await bob.start();
      const started = Date.now();
      let round = 0;
      while (Date.now() - started < (3 * ttl + 1) * 1000) {
        await waitFor(() => alice.connected && bob.connected, {
          timeoutMs: 10_000,
          what: "both endpoints connected",
        });
        const sent = await alice.multicast(`round ${round++}`);
        await waitFor(() => got.some((e) => e.message.id === sent.id), {
          timeoutMs: 10_000,
          what: `bob to get round ${round - 1}`,
        });
        await new Promise((r) => setTimeout(r, 1_000));
      }
      assert.ok(minted >= 4, `only ${minted} bearers minted over three lifetimes`);
      assert.ok(alice.connected && bob.connected);
    } finally {
      await alice.stop();
      await bob.stop();
    }
  } finally {
    await mesh.close();
  }
});

Deno.test("user mode - an endpoint warns while its bearer source fails and recovers with it", async () => {
  const mesh = await startServiceMesh({ streams: true });
  try {
    const svc = await mesh.start();
    const a = await mesh.grant("alice");
    let failing = false;
    const alice = endpointFor(mesh, a, async () => {
      if (failing) throw new Error("the IdP is unreachable");
      return await bearerFor(mesh, svc, "alice", 4);
    });
    const warnings: string[] = [];
    const connections: boolean[] = [];
    alice.addEventListener("warning", (e) => {
      warnings.push(e.error.code);
    });
    alice.addEventListener("connection", (e) => {
      connections.push(e.connected);
    });
    try {
      await alice.start();
      failing = true;
      // The live bearer runs out while renewal keeps failing: the broker drops the connection.
      await waitFor(() => connections.includes(false), { timeoutMs: 15_000, what: "a disconnect" });
      await waitFor(() => warnings.includes("credential_source_failed"), {
        timeoutMs: 15_000,
        what: "a warning naming the failing source",
      });
      assert.equal(alice.connected, false);
      failing = false;
      await waitFor(() => alice.connected, { timeoutMs: 30_000, what: "the endpoint to recover" });
      await alice.multicast("back");
    } finally {
      await alice.stop();
    }
  } finally {
    await mesh.close();
  }
});
