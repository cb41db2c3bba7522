/**
 * The callout protocol from the broker's side. nats-server refuses every client publish to
 * `$SYS.REQ.USER.AUTH` (proven below), so these tests run the responder on another subject of
 * a real broker and play the server themselves: every request the responder must ignore (no
 * reply, seen as a timeout on a raw request) and every reply it must sign is checked byte for
 * byte.
 */
import assert from "node:assert/strict";
import { connect, headers, type NatsConnection } from "nats";
import { AUTH_CALLOUT_SUBJECT } from "../../lib/auth/callout_auth.ts";
import { calloutReason, startAuthCallout } from "../../lib/auth/callout.ts";
import {
  createCurve,
  createKeyPair,
  createUser,
  decodeJwt,
  encodeJwt,
  parseCreds,
  renderCreds,
  seedSigner,
  xkeyOpen,
  xkeySeal,
} from "../../lib/nats/mod.ts";
import { credsAuthenticatorFast } from "../../lib/trust/mod.ts";
import { startTestBroker, waitFor } from "../_harness/broker.ts";
import { code, now } from "./_helpers.ts";
import {
  type CalloutMesh,
  nonce,
  type Responder,
  startCalloutMesh,
  startResponder,
} from "./_callout_mesh.ts";

const TE = new TextEncoder();
const TD = new TextDecoder();

/** A fake nats-server identity: the nkey that signs requests and the xkey replies go to. */
async function fakeServer() {
  const id = await createKeyPair("server");
  const xkey = await createCurve();
  return { id, xkey, signer: await seedSigner(id.seed) };
}
type FakeServer = Awaited<ReturnType<typeof fakeServer>>;

interface RequestShape {
  server: FakeServer;
  connectOpts?: Record<string, unknown>;
  /** Override the signed `server_id` fields or the issuer. */
  serverId?: Record<string, unknown>;
  signer?: FakeServer;
  /** Seal to this key instead of the callout's. */
  sealTo?: string;
  /** The header key, default the server's xkey. */
  headerKey?: string | null;
  /** Send these bytes instead of a sealed request. */
  raw?: Uint8Array;
}

async function buildRequest(mesh: CalloutMesh, shape: RequestShape) {
  const user = await createUser();
  const server = shape.server;
  const signer = shape.signer ?? server;
  const token = await encodeJwt({
    sub: mesh.callout.account.pub,
    aud: "nats-authorization-request",
    exp: now() + 5,
    nats: {
      type: "authorization_request",
      server_id: {
        name: "fake",
        host: "127.0.0.1",
        id: server.id.publicKey,
        xkey: server.xkey.publicKey,
        ...shape.serverId,
      },
      user_nkey: user.publicKey,
      client_info: { host: "127.0.0.1", id: 7 },
      connect_opts: { protocol: 1, ...shape.connectOpts },
    },
  }, signer.signer);
  const data = shape.raw ??
    await xkeySeal(TE.encode(token), server.xkey.seed, shape.sealTo ?? mesh.callout.xkey.pub);
  const h = headers();
  if (shape.headerKey !== null) h.set("Nats-Server-Xkey", shape.headerKey ?? server.xkey.publicKey);
  return { data, h, user };
}

/** Send a request; resolves with the decoded response, or `undefined` after a silent timeout. */
async function ask(raw: NatsConnection, mesh: CalloutMesh, shape: RequestShape) {
  const { data, h, user } = await buildRequest(mesh, shape);
  let reply;
  try {
    reply = await raw.request(TEST_SUBJECT, data, { timeout: 600, headers: h });
  } catch (err) {
    if (/TIMEOUT/i.test(String((err as { code?: string }).code ?? err))) return undefined;
    throw err;
  }
  const opened = await xkeyOpen(reply.data, shape.server.xkey.seed, mesh.callout.xkey.pub);
  const res = await decodeJwt(TD.decode(opened), { type: "authorization_response" });
  return { res, user };
}

const TEST_SUBJECT = "cotal.test.callout";

/** The responder on a plain broker's test subject, with the mesh's secrets. */
async function withMesh(
  fn: (mesh: CalloutMesh, r: Responder, raw: NatsConnection) => Promise<void>,
  expectedServerIds?: string[],
) {
  const mesh = await startCalloutMesh();
  await using plain = await startTestBroker();
  const r = await startResponder(mesh, {
    subject: TEST_SUBJECT,
    ...(expectedServerIds ? { expectedServerIds } : {}),
  }, plain.url);
  const raw = await connect({ servers: plain.url });
  try {
    await fn(mesh, r, raw);
  } finally {
    await raw.close();
    await r.stop();
    await mesh.close();
  }
}

Deno.test("callout protocol - requests that are not provably from a server get no reply", async () => {
  const server = await fakeServer();
  const stranger = await fakeServer();
  const outsider = await fakeServer();
  await withMesh(async (mesh, r, raw) => {
    const cases: [string, string, RequestShape][] = [
      ["unsealed (no header)", "callout_unsealed", { server, headerKey: null }],
      ["garbage", "callout_unopenable", { server, raw: TE.encode("xkv1 not a box at all") }],
      ["sealed to another key", "callout_unopenable", {
        server,
        sealTo: (await createCurve()).publicKey,
      }],
      // Signed by one server while naming another: a forger inside the account.
      ["iss is not server_id.id", "callout_forged", { server, signer: stranger }],
      // The signed server xkey differs from the one the request was sealed with (a relay).
      ["re-sealed", "callout_resealed", {
        server,
        serverId: { xkey: stranger.xkey.publicKey },
      }],
      ["a server outside expectedServerIds", "callout_unknown_server", { server: outsider }],
    ];
    for (const [what, reason, shape] of cases) {
      const before = r.decisions.length;
      const answer = await ask(raw, mesh, {
        ...shape,
        connectOpts: { auth_token: "x", name: nonce() },
      });
      assert.equal(answer, undefined, `${what} got a reply`);
      await waitFor(() => r.decisions.length > before, { what: `the decision on ${what}` });
      const d = r.decisions.at(-1)!;
      assert.equal(d.outcome, "drop", what);
      assert.equal(d.code, reason, what);
    }
    assert.equal(r.callout.stats().drop, cases.length);
    // An allowed server is answered (a signed denial for the junk bearer).
    const ok = await ask(raw, mesh, {
      server,
      connectOpts: { auth_token: "x", name: nonce() },
    });
    assert.ok(ok?.res.nats.error);
  }, [server.id.publicKey, stranger.id.publicKey]);
});

Deno.test("callout protocol - denials are signed by the callout account and sealed back", async () => {
  const server = await fakeServer();
  await withMesh(async (mesh, r, raw) => {
    const empty = await ask(raw, mesh, { server, connectOpts: { name: nonce() } });
    assert.ok(empty, "an empty auth_token gets a reply, not a timeout");
    assert.match(empty.res.nats.error!, /no user token presented/i);
    assert.equal(empty.res.iss, mesh.callout.account.signingPub);
    assert.equal(empty.res.nats.issuer_account, mesh.callout.account.pub);
    assert.equal(empty.res.aud, server.id.publicKey);
    assert.equal(empty.res.sub, empty.user.publicKey);
    assert.equal(r.decisions.at(-1)!.code, "callout_no_token");
    const junk = await ask(raw, mesh, {
      server,
      connectOpts: { auth_token: "a.b.c", name: nonce() },
    });
    assert.ok(junk?.res.nats.error);
    assert.equal(r.decisions.at(-1)!.code, "bearer_malformed");
  });
});

Deno.test("callout protocol - the minted user JWT: data account, signing key, bearer exp, inbox nonce, tags", async () => {
  const server = await fakeServer();
  await withMesh(async (mesh, r, raw) => {
    const row = await mesh.grant("alice", { sub: ["general", "team.>"], pub: ["general"] });
    const bearer = await mesh.bearer(row, 200);
    const exp = await decodeBearerExp(bearer);
    for (const bad of [">", "*", "a.b", "ab", "x".repeat(121), "ab\u2014cdefgh"]) {
      const denied = await ask(raw, mesh, {
        server,
        connectOpts: { auth_token: bearer, name: bad },
      });
      assert.ok(denied?.res.nats.error, `nonce ${bad.slice(0, 10)} was not denied`);
      assert.equal(r.decisions.at(-1)!.code, "callout_bad_nonce");
    }
    const n = nonce();
    const allowed = await ask(raw, mesh, { server, connectOpts: { auth_token: bearer, name: n } });
    assert.ok(allowed?.res.nats.jwt, allowed?.res.nats.error);
    assert.equal(allowed.res.nats.issuer_account, mesh.callout.account.pub);
    const user = await decodeJwt(allowed.res.nats.jwt!, { type: "user" });
    assert.equal(user.sub, allowed.user.publicKey);
    assert.equal(user.iss, mesh.auth.account.signingPub);
    assert.equal(user.nats.issuer_account, mesh.auth.account.pub);
    assert.equal(user.exp, exp);
    assert.deepEqual(user.nats.tags, [
      `owner:${row.owner}`,
      "actor:alice",
      `principal:${row.owner}.alice`,
    ]);
    const inboxes = (user.nats.sub?.allow ?? []).filter((s) => s.startsWith("_INBOX"));
    assert.deepEqual(inboxes, [`_INBOX_${n}.>`]);
    assert.equal(user.name, `${row.owner}-alice`);
  });
});

/** The subject of the first permission violation on `nc`. */
function firstViolation(nc: NatsConnection): Promise<string | undefined> {
  return (async () => {
    for await (const s of nc.status()) {
      const ctx = (s as { permissionContext?: { subject: string } }).permissionContext;
      if (s.data === "PERMISSIONS_VIOLATION") return ctx?.subject;
    }
  })();
}

Deno.test("callout protocol - the callout user cannot publish requests; the sentinel is deny-all", async () => {
  const mesh = await startCalloutMesh();
  const r = await startResponder(mesh);
  try {
    const violation = firstViolation(r.nc);
    r.nc.publish(AUTH_CALLOUT_SUBJECT, "forged");
    assert.equal(await violation, AUTH_CALLOUT_SUBJECT);
    // Even a JWT for the callout user that allows every publish cannot inject a request: the
    // broker itself keeps clients off the request subject.
    const { jwt, seed } = await parseCreds(mesh.callout.calloutCreds);
    const wide = await encodeJwt({
      sub: (await decodeJwt(jwt, { type: "user" })).sub,
      nats: { type: "user", issuer_account: mesh.callout.account.pub, pub: { allow: [">"] } },
    }, await seedSigner(mesh.callout.account.signingSeed));
    const forger = await connect({
      servers: mesh.broker.url,
      authenticator: credsAuthenticatorFast(await renderCreds(wide, seed)),
    });
    const refused = firstViolation(forger);
    forger.publish(AUTH_CALLOUT_SUBJECT, "forged");
    assert.equal(await refused, AUTH_CALLOUT_SUBJECT);
    await forger.close();
    const sentinel = await decodeJwt((await parseCreds(mesh.callout.sentinelCreds)).jwt, {
      type: "user",
    });
    assert.deepEqual(sentinel.nats.pub, { deny: [">"] });
    assert.deepEqual(sentinel.nats.sub, { deny: [">"] });
    assert.equal(sentinel.nats.issuer_account, mesh.callout.account.pub);
    const account = await decodeJwt(mesh.callout.account.jwt, { type: "account" });
    const calloutUser = (await decodeJwt((await parseCreds(mesh.callout.calloutCreds)).jwt)).sub;
    assert.deepEqual(account.nats.authorization, {
      auth_users: [calloutUser],
      allowed_accounts: [mesh.auth.account.pub],
      xkey: mesh.callout.xkey.pub,
    });
    assert.equal(account.iss, mesh.auth.operator.pub);
    assert.equal(account.nats.limits?.mem_storage, 0);
    assert.equal(account.nats.limits?.disk_storage, 0);
  } finally {
    await r.stop();
    await mesh.close();
  }
});

Deno.test("callout protocol - refuses to start without its xkey seed", async () => {
  const mesh = await startCalloutMesh();
  try {
    const nc = await connect({
      servers: mesh.broker.url,
      authenticator: credsAuthenticatorFast(mesh.callout.calloutCreds),
    });
    try {
      await assert.rejects(
        startAuthCallout({
          nc,
          space: mesh.space,
          callout: { ...mesh.callout, xkey: { seed: "", pub: mesh.callout.xkey.pub } },
          serviceKeys: mesh.serviceKeys,
          resolver: mesh.issuer.resolver(),
          ledger: mesh.ledger,
        }),
        code("callout_missing_xkey"),
      );
    } finally {
      await nc.close();
    }
  } finally {
    await mesh.close();
  }
});

Deno.test("callout protocol - deny reasons are folded to printable ASCII", () => {
  assert.equal(
    calloutReason("no \u2014 way \u201cquoted\u201d\u2026 caf\u00e9"),
    'no - way "quoted"... caf?',
  );
  assert.equal(calloutReason("x".repeat(400)).length, 256);
  assert.match(calloutReason("line\nbreak"), /^line\?break$/);
});

async function decodeBearerExp(token: string): Promise<number> {
  const payload = JSON.parse(TD.decode(Uint8Array.from(
    atob(token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/")),
    (c) => c.charCodeAt(0),
  )));
  return await Promise.resolve(payload.exp as number);
}
