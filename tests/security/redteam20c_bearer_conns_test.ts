/**
 * Red team 20c: the per-cred connection cap (64, the membership feed's kicks) groups a space's
 * connections by their CONNZ `authorized_user`. A user-mode member (an IdP bearer through the
 * auth callout) holds no nkey of its own: the callout mints a user JWT for the key the server
 * made for that one connection. So what the cap sees as "one cred" depends on that key.
 *
 * Attack A: one bearer opens 100 connections (each with a fresh nonce). The defence holds if the
 * daemon's own decision (`connectionsOverCap` over a real account CONNZ scan, exactly what the
 * feed runs) picks the extras of that principal's bearer.
 * Held: CONNZ reports a callout user's `authorized_user` as its JWT's name, `<owner>-<actor>`,
 * so every bearer of one member counts as one cred.
 * Attack B (collateral): 70 honest bearers of 70 different members open one connection each. The
 * defence holds if the cap kicks none of them.
 * Finding C (not an attack, found on the way): CONNZ carries no `tags` for a callout user on
 * either broker version, and `scanConnz` attributed a connection only by its signed
 * `principal:` tag, so a user-mode member's connections were nobody's: the membership feed never
 * listed its live channels and `evictPrincipal` found nothing to kick (and reported it gone). The
 * defence holds if the scan attributes the bearer's connection to its principal.
 * Attack D (found while fixing C): CONNZ's `authorized_user` for a cred connection is whatever
 * `nkey` the client sends beside its JWT in CONNECT. A member spreading its connections over
 * invented keys would pass the per-cred cap; one naming a victim's key would pile its
 * connections onto the victim's. The defence holds if the scan counts a cred connection by its
 * JWT's subject, whatever the client claims.
 */
import assert from "node:assert/strict";
import { type Authenticator, connect, type NatsConnection } from "nats";
import { connectionsOverCap, MAX_CONNECTIONS_PER_CRED } from "../../lib/delivery/conn_cap.ts";
import { scanConnz } from "../../lib/delivery/connz.ts";
import {
  credsAuthenticatorFast,
  MEMBERSHIP_INBOX_PREFIX,
  mintCreds,
  mintMembershipObserverCreds,
  newIdentity,
} from "../../lib/trust/mod.ts";
import { decodeJwtUnverified } from "../../lib/nats/jwt.ts";
import { connectUser, startCalloutMesh, startResponder } from "../auth/_callout_mesh.ts";

async function scanOver(mesh: Awaited<ReturnType<typeof startCalloutMesh>>) {
  const obs = await connect({
    servers: mesh.broker.url,
    authenticator: credsAuthenticatorFast(
      await mintMembershipObserverCreds(mesh.auth, newIdentity()),
    ),
    inboxPrefix: MEMBERSHIP_INBOX_PREFIX,
  });
  try {
    const scan = await scanConnz(obs, mesh.auth.account.pub, { subscriptions: false });
    assert.ok(scan.complete, scan.reason);
    return { conns: scan.conns, over: connectionsOverCap(scan.conns) };
  } finally {
    await obs.close();
  }
}

Deno.test("redteam20c - one IdP bearer cannot hold more connections than the per-cred cap", async () => {
  const mesh = await startCalloutMesh({ streams: true });
  const r = await startResponder(mesh);
  const conns: NatsConnection[] = [];
  try {
    const row = await mesh.grant("mallory");
    const bearer = await mesh.bearer(row);
    for (let i = 0; i < 100; i += 25) {
      const batch = await Promise.allSettled(
        Array.from({ length: 25 }, () => connectUser(mesh, bearer)),
      );
      for (const b of batch) if (b.status === "fulfilled") conns.push(b.value);
    }
    console.log(`mallory's one bearer holds ${conns.length} connections`);
    const { conns: seen, over } = await scanOver(mesh);
    const users = new Set(seen.map((c) => c.user));
    console.log(
      `scan: ${seen.length} connections, ${users.size} distinct users; ${over.length} over the cap`,
    );
    assert.ok(
      over.length >= conns.length - MAX_CONNECTIONS_PER_CRED,
      `the cap would kick ${over.length} of mallory's ${conns.length} connections`,
    );
  } finally {
    await Promise.all(conns.map((c) => c.close().catch(() => {})));
    await r.stop();
    await mesh.close();
  }
});

Deno.test("redteam20c - 70 honest bearers of 70 members are not one cred to the cap", async () => {
  const mesh = await startCalloutMesh({ streams: true });
  const r = await startResponder(mesh);
  const conns: NatsConnection[] = [];
  try {
    for (let i = 0; i < 70; i++) {
      const row = await mesh.grant(`m${i}`);
      conns.push(await connectUser(mesh, await mesh.bearer(row)));
    }
    const { over } = await scanOver(mesh);
    assert.equal(over.length, 0, `the cap would kick ${over.length} honest members' connections`);
  } finally {
    await Promise.all(conns.map((c) => c.close().catch(() => {})));
    await r.stop();
    await mesh.close();
  }
});

Deno.test({
  name:
    "redteam20c - a user-mode member's connection is attributed to its principal by the account scan",
}, async () => {
  const mesh = await startCalloutMesh({ streams: true });
  const r = await startResponder(mesh);
  const row = await mesh.grant("mallory");
  const nc = await connectUser(mesh, await mesh.bearer(row));
  try {
    nc.subscribe(`cotal.x.chat.*.*.general`, { callback: () => {} });
    const { conns } = await scanOver(mesh);
    const principal = `${row.owner}.${row.actor}`;
    assert.equal(
      conns.filter((c) => c.principal === principal).length,
      1,
      `the scan attributes ${JSON.stringify(conns.map((c) => c.principal ?? null))}`,
    );
  } finally {
    await nc.close().catch(() => {});
    await r.stop();
    await mesh.close();
  }
});

Deno.test("redteam20c - a cred's connections count as that cred whatever nkey its CONNECT claims", async () => {
  const mesh = await startCalloutMesh({ streams: true });
  const conns: NatsConnection[] = [];
  try {
    const victimCreds = await mintCreds(mesh.auth, newIdentity(), "observer");
    const victimKey = decodeJwtUnverified(victimCreds.split("\n")[1]).sub;
    const victim = await connect({
      servers: mesh.broker.url,
      authenticator: credsAuthenticatorFast(victimCreds),
    });
    const mallory = credsAuthenticatorFast(await mintCreds(mesh.auth, newIdentity(), "observer"));
    // Half claim invented keys (to slip under the cap), half claim the victim's (to pile onto it).
    const claims = (i: number) => i % 2 === 0 ? `U${crypto.randomUUID()}` : victimKey;
    for (let i = 0; i < MAX_CONNECTIONS_PER_CRED + 6; i += 10) {
      const batch = await Promise.allSettled(
        Array.from({ length: 10 }, (_, j) =>
          connect({
            servers: mesh.broker.url,
            authenticator:
              ((nonce?: string) => ({ ...mallory(nonce), nkey: claims(i + j) })) as Authenticator,
          })),
      );
      for (const b of batch) if (b.status === "fulfilled") conns.push(b.value);
    }
    const { conns: seen, over } = await scanOver(mesh);
    console.log(
      `mallory holds ${conns.length}; the scan sees ${
        new Set(seen.map((c) => c.user)).size
      } distinct users; ${over.length} over the cap`,
    );
    assert.ok(
      over.length >= conns.length - MAX_CONNECTIONS_PER_CRED,
      `the cap would kick ${over.length} of mallory's ${conns.length} connections`,
    );
    assert.equal(
      seen.filter((c) => c.user === victimKey).length,
      1,
      "the victim's key counts only the victim's own connection",
    );
    conns.push(victim);
  } finally {
    await Promise.all(conns.map((c) => c.close().catch(() => {})));
    await mesh.close();
  }
});
