import type { CotalErrorCode } from "../../lib/error_codes/mod.ts";
import assert from "node:assert/strict";
import { base64url } from "jose";
import { createIdpBridge, type IdpBridgeOptions } from "../../lib/auth/idp_bridge.ts";
import { discoverIdp } from "../../lib/auth/idp_fetch.ts";
import { actorLedgerKey } from "../../lib/auth/keys.ts";
import { createActorLedger } from "../../lib/auth/ledger.ts";
import { deriveOwnerForIdpSubject } from "../../lib/auth/owner.ts";
import { ensureIssuer, ensureOwnerSecret } from "../../lib/auth/secrets.ts";
import { validateUserToken } from "../../lib/auth/validate.ts";
import { MemorySecretStore } from "../../lib/workspace/memory_secret_store.ts";
import { startTestIdp, type TestIdpAlg, type TestIdpOptions } from "../_harness/idp.ts";
import { code, now, rawToken } from "./_helpers.ts";

const SPACE = "alpha";
const ALGS: TestIdpAlg[] = ["RS256", "ES256", "EdDSA"];

async function setup(idpOpts: TestIdpOptions, over: Partial<IdpBridgeOptions> = {}) {
  const idp = await startTestIdp(idpOpts);
  const store = new MemorySecretStore();
  const tokenIssuer = await ensureIssuer(store, SPACE);
  const ownerSecret = await ensureOwnerSecret(store, SPACE);
  const ledger = createActorLedger({ space: SPACE, store });
  const owner = await deriveOwnerForIdpSubject(ownerSecret, idp.issuer, idp.sub);
  const opts: IdpBridgeOptions = {
    issuer: idp.issuer,
    audience: idp.audience,
    jwksUrl: idp.jwksUrl,
    space: SPACE,
    ownerSecret,
    ledger,
    tokenIssuer,
    ...over,
  };
  const bridge = createIdpBridge(opts);
  const grant = () =>
    ledger.grant({
      owner,
      actor: "alice",
      subscribe: ["general"],
      allowSubscribe: ["general"],
      allowPublish: ["general"],
      scope: ["spawn"],
    });
  return { idp, store, tokenIssuer, ownerSecret, ledger, owner, bridge, grant, opts };
}

for (const alg of ALGS) {
  Deno.test(`auth - IdP bridge exchanges a real ${alg} IdP token for a Cotal bearer`, async () => {
    const t = await setup({ alg });
    await using _idp = t.idp;
    const row = await t.grant();
    // Discovery pins the same JWKS URL the IdP publishes.
    assert.deepEqual(await discoverIdp(t.idp.issuer), {
      issuer: t.idp.issuer,
      jwksUrl: t.idp.jwksUrl,
    });
    const idpToken = await t.idp.sign();
    const idpExp = JSON.parse(new TextDecoder().decode(base64url.decode(idpToken.split(".")[1])))
      .exp;
    const out = await t.bridge.exchange(idpToken, { actor: "alice" });
    assert.equal(out.owner, t.owner);
    assert.equal(out.actor, "alice");
    assert.ok(out.exp <= idpExp, "the bearer never outlives the IdP proof");
    const v = await validateUserToken(out.token, {
      space: SPACE,
      resolver: t.tokenIssuer.resolver(),
    });
    assert.equal(v.owner, t.owner);
    assert.equal(v.lifecycleUid, row.lifecycleUid);
    assert.deepEqual(v.scope, ["spawn"]);
    assert.equal((await t.ledger.authorizeBearer(v)).actor, "alice");
    // A second exchange reuses the cached JWKS.
    await t.bridge.exchange(await t.idp.sign(), { actor: "alice" });
    assert.equal(t.idp.jwksRequests, 1);
  });
}

Deno.test("auth - IdP bridge caps the bearer at the proof's remaining life", async () => {
  const t = await setup({ alg: "ES256" });
  await using _idp = t.idp;
  await t.grant();
  const idpExp = now() + 40;
  const out = await t.bridge.exchange(await t.idp.sign({ exp: idpExp }), {
    actor: "alice",
    ttlSec: 900,
  });
  assert.ok(out.exp <= idpExp);
  const short = await t.bridge.exchange(await t.idp.sign(), { actor: "alice", ttlSec: 60 });
  assert.ok(short.exp <= now() + 60);
  await assert.rejects(
    t.bridge.exchange(await t.idp.sign(), { actor: "alice", ttlSec: 901 }),
    code("bearer_bad_ttl"),
  );
  await assert.rejects(
    t.bridge.exchange(await t.idp.sign(), { actor: "alice", ttlSec: 0 }),
    code("bearer_bad_ttl"),
  );
});

Deno.test("auth - IdP bridge refuses bad claims from a real IdP", async () => {
  const t = await setup({ alg: "RS256" });
  await using _idp = t.idp;
  await t.grant();
  const x = (claims: Record<string, unknown>) => t.idp.sign(claims);
  const cases: [Promise<string>, CotalErrorCode][] = [
    [x({ exp: now() - 1, iat: now() - 301 }), "idp_expired"],
    [x({ iss: `${t.idp.issuer}/` }), "idp_bad_issuer"],
    [x({ iss: "https://evil.example/realms/cotal" }), "idp_bad_issuer"],
    [x({ aud: "account" }), "idp_bad_audience"],
    // Keycloak's common ["cotal", "account"] shape is multi-audience and refused.
    [x({ aud: [t.idp.audience, "account"] }), "idp_bad_audience"],
    [x({ exp: undefined }), "idp_missing_claim"],
    [x({ iat: undefined }), "idp_missing_claim"],
    [x({ exp: String(now() + 60) }), "idp_bad_claim"],
    [x({ iat: now() + 3600, exp: now() + 3900 }), "idp_postdated"],
    [x({ nbf: now() + 3600 }), "idp_postdated"],
    [x({ sub: "" }), "idp_bad_subject"],
    [x({ sub: 42 }), "idp_bad_subject"],
    [x({ sub: "a\nb" }), "idp_bad_subject"],
  ];
  for (const [token, expected] of cases) {
    await assert.rejects(t.bridge.exchange(await token, { actor: "alice" }), code(expected));
  }
  // The singleton audience array is accepted.
  await t.bridge.exchange(await x({ aud: [t.idp.audience] }), { actor: "alice" });
});

Deno.test("auth - IdP bridge refuses none, HS256, embedded keys and unknown keys", async () => {
  const t = await setup({ alg: "RS256" });
  await using _idp = t.idp;
  await t.grant();
  const claims = {
    iss: t.idp.issuer,
    aud: t.idp.audience,
    sub: t.idp.sub,
    iat: now(),
    exp: now() + 60,
  };
  await assert.rejects(
    t.bridge.exchange(rawToken({ alg: "none", kid: t.idp.kid }, claims), { actor: "alice" }),
    code("idp_alg_refused"),
  );
  // HS256 keyed with the IdP's public RSA modulus: the key-confusion forgery.
  const n = t.idp.jwks().keys[0].n!;
  const key = await crypto.subtle.importKey(
    "raw",
    new TextEncoder().encode(n),
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["sign"],
  );
  const input = rawToken({ alg: "HS256", kid: t.idp.kid }, claims).slice(0, -1);
  const mac = await crypto.subtle.sign("HMAC", key, new TextEncoder().encode(input));
  await assert.rejects(
    t.bridge.exchange(`${input}.${base64url.encode(new Uint8Array(mac))}`, { actor: "alice" }),
    code("idp_alg_refused"),
  );
  const pub = t.idp.jwks().keys[0];
  for (
    const header of [{ jwk: pub }, { jku: `${t.idp.origin}/evil-jwks` }, { x5u: "https://x/c" }]
  ) {
    await assert.rejects(
      t.bridge.exchange(await t.idp.sign({}, { header }), { actor: "alice" }),
      code("idp_embedded_key"),
    );
  }
  await assert.rejects(
    t.bridge.exchange(await t.idp.sign({}, { strangerKey: true }), { actor: "alice" }),
    code("idp_unknown_kid"),
  );
  await assert.rejects(
    t.bridge.exchange(await t.idp.sign({}, { header: { kid: "enc-key" } }), { actor: "alice" }),
    code("idp_unknown_kid"),
  );
  // The published RSA-OAEP encryption key is never usable for signatures.
  const encKid = t.idp.jwks().keys.find((k) => k.use === "enc")!.kid;
  await assert.rejects(
    t.bridge.exchange(await t.idp.sign({}, { header: { kid: encKid } }), { actor: "alice" }),
    code("idp_unknown_kid"),
  );
});

Deno.test("auth - IdP bridge mints only for granted actors and fails closed on the ledger", async () => {
  const t = await setup({ alg: "EdDSA" });
  await using _idp = t.idp;
  await assert.rejects(
    t.bridge.exchange(await t.idp.sign(), { actor: "alice" }),
    code("actor_not_granted"),
  );
  await t.grant();
  await t.bridge.exchange(await t.idp.sign(), { actor: "alice" });
  await assert.rejects(
    t.bridge.exchange(await t.idp.sign(), { actor: "bob" }),
    code("actor_not_granted"),
  );
  // Another IdP subject derives another owner, which holds no grant.
  await assert.rejects(
    t.bridge.exchange(await t.idp.sign({ sub: "someone-else" }), { actor: "alice" }),
    code("actor_not_granted"),
  );
  await assert.rejects(
    t.bridge.exchange(await t.idp.sign(), { actor: "a.b" }),
    code("actor_bad_name"),
  );
  await t.ledger.revoke(t.owner, "alice");
  await assert.rejects(
    t.bridge.exchange(await t.idp.sign(), { actor: "alice" }),
    code("actor_not_granted"),
  );
  await t.grant();
  await t.store.put(actorLedgerKey(SPACE), "{corrupt");
  await assert.rejects(
    t.bridge.exchange(await t.idp.sign(), { actor: "alice" }),
    code("ledger_unreadable"),
  );
});

Deno.test("auth - IdP pins are fixed at creation and never loosened by a token", async () => {
  const es = await startTestIdp({ alg: "ES256" });
  await using _es = es;
  const t = await setup({ alg: "RS256" }, { algorithms: ["RS256"], authorizedParty: "cotal-cli" });
  await using _idp = t.idp;
  await t.grant();
  // A token from a wrong client id is refused when azp is pinned.
  await assert.rejects(
    t.bridge.exchange(await t.idp.sign({ azp: "other-client" }), { actor: "alice" }),
    code("idp_bad_authorized_party"),
  );
  await assert.rejects(
    t.bridge.exchange(await t.idp.sign({ azp: undefined }), { actor: "alice" }),
    code("idp_bad_authorized_party"),
  );
  // An ES256-only bridge over a static JWKS: mutating the caller's set later adds no key.
  const jwks = es.jwks();
  const pinned = createIdpBridge({
    ...t.opts,
    issuer: es.issuer,
    audience: es.audience,
    jwksUrl: undefined,
    jwks,
    algorithms: ["ES256"],
    authorizedParty: undefined,
  });
  assert.equal((await pinned.verify(await es.sign())).alg, "ES256");
  const rotatedKid = await es.rotate();
  jwks.keys.push(...es.jwks().keys);
  await assert.rejects(pinned.verify(await es.sign()), code("idp_unknown_kid"));
  assert.equal(es.kid, rotatedKid);
  // An RS256-pinned bridge refuses an EdDSA token whatever its header says.
  const ed = await startTestIdp({ alg: "EdDSA", issuer: t.idp.issuer });
  await using _ed = ed;
  await assert.rejects(
    t.bridge.exchange(await ed.sign({ sub: t.idp.sub, azp: "cotal-cli" }), { actor: "alice" }),
    code("idp_alg_refused"),
  );
});

Deno.test("auth - IdP JWKS refresh: an unknown kid re-reads the set after the cooldown", async () => {
  const t = await setup({ alg: "ES256" }, { jwksRefreshCooldownMs: 0 });
  await using _idp = t.idp;
  await t.grant();
  await t.bridge.exchange(await t.idp.sign(), { actor: "alice" });
  assert.equal(t.idp.jwksRequests, 1);
  await t.idp.rotate();
  await t.bridge.exchange(await t.idp.sign(), { actor: "alice" });
  assert.equal(t.idp.jwksRequests, 2);
  // With the default cooldown, junk kids do not make the bridge re-fetch.
  const cooled = createIdpBridge({ ...t.opts, jwksRefreshCooldownMs: undefined });
  await cooled.exchange(await t.idp.sign(), { actor: "alice" });
  const before = t.idp.jwksRequests;
  for (let i = 0; i < 5; i++) {
    await assert.rejects(
      cooled.exchange(await t.idp.sign({}, { strangerKey: true }), { actor: "alice" }),
      code("idp_unknown_kid"),
    );
  }
  assert.equal(t.idp.jwksRequests, before);
});

Deno.test("auth - IdP JWKS fetch has a size cap and a timeout", async () => {
  const big = await setup({ alg: "EdDSA", jwksPadBytes: 70 * 1024 });
  await using _big = big.idp;
  await big.grant();
  await assert.rejects(
    big.bridge.exchange(await big.idp.sign(), { actor: "alice" }),
    code("idp_response_too_large"),
  );
  const slow = await setup({ alg: "EdDSA", hangJwks: true }, { fetchTimeoutMs: 200 });
  await using _slow = slow.idp;
  await slow.grant();
  await assert.rejects(
    slow.bridge.exchange(await slow.idp.sign(), { actor: "alice" }),
    code("idp_fetch_timeout"),
  );
});

Deno.test("auth - IdP bridge options are checked at creation", async () => {
  const t = await setup({ alg: "EdDSA" });
  await using _idp = t.idp;
  for (
    const jwksUrl of [
      "http://idp.example/jwks",
      "https://u:p@idp.example/jwks",
      "https://idp.example/jwks?x=1",
      "https://idp.example/jwks#f",
      "file:///etc/jwks",
    ]
  ) {
    assert.throws(() => createIdpBridge({ ...t.opts, jwksUrl }), code("idp_url_refused"));
  }
  const other = await ensureIssuer(new MemorySecretStore(), "beta");
  const bad: Partial<IdpBridgeOptions>[] = [
    { jwks: t.idp.jwks() },
    { jwksUrl: undefined },
    { issuer: "" },
    { audience: "" },
    { algorithms: [] },
    { algorithms: ["HS256" as never] },
    { tokenIssuer: other },
    { ownerSecret: new Uint8Array(16) },
    { fetchTimeoutMs: Number.NaN },
    { jwksMaxAgeMs: -1 },
  ];
  for (const over of bad) {
    assert.throws(() => createIdpBridge({ ...t.opts, ...over }), code("idp_bad_options"));
  }
});

Deno.test("auth - IdP bridge grants nothing from a malformed authorizer answer", async () => {
  const t = await setup({ alg: "EdDSA" });
  await using _idp = t.idp;
  const row = await t.grant();
  const answers: unknown[] = [
    null,
    [row],
    { ...row, actor: "bob" },
    { ...row, owner: `u_${"a".repeat(26)}` },
    { ...row, lifecycleUid: undefined },
    { ...row, scope: "admin" },
  ];
  for (const answer of answers) {
    const bridge = createIdpBridge({
      ...t.opts,
      ledger: { authorize: () => Promise.resolve(answer as never) },
    });
    await assert.rejects(
      bridge.exchange(await t.idp.sign(), { actor: "alice" }),
      code("actor_not_granted"),
    );
  }
});
