/**
 * The auth callout against a real broker: a bearer plus the sentinel creds connects into the
 * data account with exactly the ledger's ACL, and every refusal is a signed denial whose
 * reason the responder reports.
 */
import assert from "node:assert/strict";
import type { NatsConnection } from "nats";
import { chatReadFilter, chatSubject } from "../../lib/wire/subjects.ts";
import { waitFor } from "../_harness/broker.ts";
import { forge, now, ownerFor } from "./_helpers.ts";
import { CALLOUT_CONNECT_RATE } from "../../lib/auth/callout.ts";
import {
  connectUser,
  nonce,
  refusedConnect,
  type Responder,
  startCalloutMesh,
  startResponder,
} from "./_callout_mesh.ts";

function violations(nc: NatsConnection): string[] {
  const seen: string[] = [];
  (async () => {
    for await (const s of nc.status()) {
      const ctx = (s as { permissionContext?: { subject: string } }).permissionContext;
      if (s.data === "PERMISSIONS_VIOLATION" && ctx) seen.push(ctx.subject);
    }
  })();
  return seen;
}

/** Connect expecting a refusal and return the responder's reason code. */
async function deniedWith(r: Responder, attempt: () => Promise<NatsConnection>) {
  const decided = r.next();
  const err = await refusedConnect(attempt);
  assert.match(err.message, /Authorization Violation/i);
  return await decided;
}

Deno.test("callout - a bearer connects into the data account with exactly the ledger's ACL", async () => {
  const mesh = await startCalloutMesh();
  const r = await startResponder(mesh);
  try {
    const row = await mesh.grant("alice", { sub: ["general"], pub: ["general"] });
    const bearer = await mesh.bearer(row, 120);
    const decided = r.next();
    const nc = await connectUser(mesh, bearer);
    const d = await decided;
    assert.equal(d.outcome, "allow");
    assert.equal(d.principal, `${row.owner}.alice`);
    // The minted user JWT expires with the bearer.
    assert.ok(d.exp !== undefined && Math.abs(d.exp - (now() + 120)) <= 2);
    const seen = violations(nc);
    const me = { owner: row.owner, actor: "alice" };
    const got = nc.subscribe(chatReadFilter(mesh.space, "general"), { max: 1 });
    nc.publish(chatSubject(mesh.space, me, "general"), "hello");
    for await (const m of got) assert.equal(m.string(), "hello");
    // Outside the ACL: another channel, and posting as someone else.
    nc.publish(chatSubject(mesh.space, me, "secret"), "x");
    const other = { owner: await ownerFor("mallory"), actor: "mallory" };
    nc.publish(chatSubject(mesh.space, other, "general"), "x");
    nc.subscribe(chatReadFilter(mesh.space, "secret"));
    await waitFor(() => seen.length >= 3, { what: "three permission violations" });
    assert.deepEqual(
      seen.sort(),
      [
        chatReadFilter(mesh.space, "secret"),
        chatSubject(mesh.space, me, "secret"),
        chatSubject(mesh.space, other, "general"),
      ].sort(),
    );
    await nc.close();
  } finally {
    await r.stop();
    await mesh.close();
  }
});

Deno.test("callout - refusals are signed denials with the reason reported", async () => {
  const mesh = await startCalloutMesh();
  const r = await startResponder(mesh);
  try {
    const row = await mesh.grant("alice");
    const good = await mesh.bearer(row);
    const t = now();
    const act = { owner: row.owner, actor: "alice", lifecycleUid: row.lifecycleUid };
    const base = (over: Record<string, unknown>) => ({
      iss: `urn:cotal:auth:${mesh.space}`,
      aud: mesh.space,
      sub: row.owner,
      iat: t,
      nbf: t,
      exp: t + 300,
      ver: 1,
      scope: [],
      act,
      ...over,
    });
    const cases: [string, string, () => Promise<NatsConnection>][] = [
      ["no token", "callout_no_token", () => connectUser(mesh, "")],
      [
        "expired",
        "bearer_expired",
        async () =>
          connectUser(
            mesh,
            await forge(mesh.issuer, base({ iat: t - 400, nbf: t - 400, exp: t - 100 })),
          ),
      ],
      [
        "another space",
        "bearer_bad_audience",
        async () => connectUser(mesh, await forge(mesh.issuer, base({ aud: "elsewhere" }))),
      ],
      [
        "post-dated",
        "bearer_postdated",
        async () =>
          connectUser(
            mesh,
            await forge(mesh.issuer, base({ iat: t + 3600, nbf: t + 3600, exp: t + 3900 })),
          ),
      ],
      [
        "scope wider than the current grant",
        "bearer_scope_exceeds_grant",
        async () =>
          connectUser(
            mesh,
            await forge(mesh.issuer, base({ scope: ["admin"], act: { ...act, scope: ["admin"] } })),
          ),
      ],
      [
        "claimless (no lifecycle uid)",
        "bearer_stale",
        async () =>
          connectUser(
            mesh,
            await forge(mesh.issuer, base({ act: { owner: row.owner, actor: "alice" } })),
          ),
      ],
      ["bad nonce", "callout_bad_nonce", () => connectUser(mesh, good, { name: "a.b" })],
      ["short nonce", "callout_bad_nonce", () => connectUser(mesh, good, { name: "ab" })],
      ["wildcard nonce", "callout_bad_nonce", () => connectUser(mesh, good, { name: ">" })],
      [
        "long nonce",
        "callout_bad_nonce",
        () => connectUser(mesh, good, { name: "a".repeat(121) }),
      ],
    ];
    for (const [what, code, attempt] of cases) {
      const d = await deniedWith(r, attempt);
      assert.equal(d.outcome, "deny", what);
      assert.equal(d.code, code, `${what}: ${d.message}`);
    }
    // The same bearer with a valid nonce is let in.
    const nc = await connectUser(mesh, good, { name: nonce() });
    await nc.close();
  } finally {
    await r.stop();
    await mesh.close();
  }
});

Deno.test("callout - a principal's connects past its burst are refused with a signed reason; another principal still gets in", async () => {
  const mesh = await startCalloutMesh();
  const r = await startResponder(mesh);
  const open: NatsConnection[] = [];
  try {
    const aliceRow = await mesh.grant("alice");
    const alice = await mesh.bearer(aliceRow, 120);
    // Red team 21: kicked connections that reconnect at once were back at once. The callout
    // admits a burst, then refuses until the minute refills it.
    for (let i = 0; i < CALLOUT_CONNECT_RATE.burst; i++) {
      open.push(await connectUser(mesh, alice, { name: nonce() }));
    }
    const d = await deniedWith(r, () => connectUser(mesh, alice, { name: nonce() }));
    assert.equal(d.outcome, "deny");
    assert.equal(d.code, "callout_connect_rate");
    assert.match(d.message, /connected more than 64 times in a minute/);
    // Closing them gives nothing back before the refill: it counts connects, not connections.
    for (const nc of open.splice(0)) await nc.close();
    const again = await deniedWith(r, () => connectUser(mesh, alice, { name: nonce() }));
    assert.equal(again.code, "callout_connect_rate");
    // Another principal is not held by alice's rate.
    const bob = await mesh.bearer(await mesh.grant("bob"), 120);
    open.push(await connectUser(mesh, bob, { name: nonce() }));
    // Nor is alice's next lifecycle (a supervised agent's successor of the same name, red
    // team 49): the allowance is per principal and lifecycle.
    const alice2 = await mesh.bearer(await mesh.grant("alice", { owner: aliceRow.owner }), 120);
    open.push(await connectUser(mesh, alice2, { name: nonce() }));
  } finally {
    for (const nc of open) await nc.close().catch(() => {});
    await r.stop();
    await mesh.close();
  }
});
