import type { CotalErrorCode } from "../../lib/error_codes/mod.ts";
import assert from "node:assert/strict";
import { base64url, CompactSign, exportJWK, generateKeyPair } from "jose";
import { AUTH_POLICY, CLOCK_SKEW_SEC } from "../../lib/auth/constants.ts";
import { createUserTokenIssuer } from "../../lib/auth/issuer.ts";
import { pinnedJwksResolver } from "../../lib/auth/jwks.ts";
import { validateUserToken, type ValidateUserTokenOptions } from "../../lib/auth/validate.ts";
import { bearerClaims, code, forge, now, ownerFor, rawToken } from "./_helpers.ts";

const SPACE = "alpha";
const issuer = await createUserTokenIssuer({ space: SPACE });
const owner = await ownerFor("alice");
const opts: ValidateUserTokenOptions = { resolver: issuer.resolver(), space: SPACE };

function claims(over: Record<string, unknown> = {}) {
  return bearerClaims(SPACE, owner, over);
}

async function refused(token: string, expected: CotalErrorCode) {
  await assert.rejects(validateUserToken(token, opts), code(expected));
}

Deno.test("auth - a bearer the issuer mints validates to its reduced claims", async () => {
  const uid = "a".repeat(26);
  const issued = await issuer.issue({
    space: SPACE,
    owner,
    actor: "alice",
    scope: ["spawn", "role:reviewer"],
    lifecycleUid: uid,
    credentialId: "cred.1",
    ttlSec: 120,
  });
  const v = await validateUserToken(issued.token, opts);
  assert.equal(v.owner, owner);
  assert.equal(v.actor, "alice");
  assert.equal(v.space, SPACE);
  assert.deepEqual(v.scope, ["spawn", "role:reviewer"]);
  assert.equal(v.lifecycleUid, uid);
  assert.equal(v.credentialId, "cred.1");
  assert.equal(v.exp, issued.exp);
  assert.equal(v.exp - v.iat, 120);
  assert.equal(v.kid, issuer.activeKid);
  // The same bearer validates through a resolver pinned to the published JWKS.
  const pinned = pinnedJwksResolver(issuer.jwks());
  assert.equal(
    (await validateUserToken(issued.token, { ...opts, resolver: pinned })).actor,
    "alice",
  );
});

Deno.test("auth - audience must be exactly the space (a multi-audience bearer is refused)", async () => {
  await refused(await forge(issuer, claims({ aud: ["alpha", "beta"] })), "bearer_bad_audience");
  await refused(await forge(issuer, claims({ aud: ["beta", "alpha"] })), "bearer_bad_audience");
  await refused(await forge(issuer, claims({ aud: "beta" })), "bearer_bad_audience");
  await refused(await forge(issuer, claims({ aud: undefined })), "bearer_bad_audience");
  // The singleton array is the same audience.
  const single = await forge(issuer, claims({ aud: ["alpha"] }));
  assert.equal((await validateUserToken(single, opts)).owner, owner);
});

Deno.test("auth - the issuer must be urn:cotal:auth:<space> exactly", async () => {
  await refused(await forge(issuer, claims({ iss: "urn:cotal:auth:beta" })), "bearer_bad_issuer");
  await refused(await forge(issuer, claims({ iss: "urn:cotal:auth:alpha/" })), "bearer_bad_issuer");
  await refused(await forge(issuer, claims({ iss: undefined })), "bearer_bad_issuer");
});

Deno.test("auth - a bearer for another space is refused", async () => {
  const beta = await createUserTokenIssuer({ space: "beta" });
  const { token } = await beta.issue({ space: "beta", owner, actor: "alice" });
  // Even a resolver that knows beta's key refuses it for alpha.
  await assert.rejects(
    validateUserToken(token, { space: SPACE, resolver: beta.resolver() }),
    code("bearer_bad_audience"),
  );
  await refused(token, "bearer_unknown_kid");
});

Deno.test("auth - exp, iat and nbf are all required NumericDates", async () => {
  for (const name of ["exp", "iat", "nbf"]) {
    await refused(await forge(issuer, claims({ [name]: undefined })), "bearer_missing_claim");
    await refused(await forge(issuer, claims({ [name]: String(now()) })), "bearer_bad_claim");
    await refused(await forge(issuer, claims({ [name]: now() + 0.5 })), "bearer_bad_claim");
  }
});

Deno.test("auth - expiry is refused beyond the fixed skew and accepted within it", async () => {
  const t = now();
  const old = claims({ iat: t - 400, nbf: t - 400, exp: t - CLOCK_SKEW_SEC - 2 });
  await refused(await forge(issuer, old), "bearer_expired");
  const lapsed = claims({ iat: t - 300, nbf: t - 300, exp: t - 5 });
  assert.equal((await validateUserToken(await forge(issuer, lapsed), opts)).owner, owner);
  // An issuer on a slow clock mints an already expired bearer: refused the same way.
  const slow = await createUserTokenIssuer({
    space: SPACE,
    record: issuer.exportRecord(),
    clock: () => Date.now() - 3600_000,
  });
  const { token } = await slow.issue({ space: SPACE, owner, actor: "alice" });
  await refused(token, "bearer_expired");
});

Deno.test("auth - a post-dated bearer is refused even with a short lifetime", async () => {
  const t = now();
  const year = 365 * 86400;
  await refused(
    await forge(issuer, claims({ iat: t + year, nbf: t + year, exp: t + year + 600 })),
    "bearer_postdated",
  );
  await refused(
    await forge(issuer, claims({ iat: t, nbf: t + CLOCK_SKEW_SEC + 60, exp: t + 600 })),
    "bearer_postdated",
  );
  const fast = await createUserTokenIssuer({
    space: SPACE,
    record: issuer.exportRecord(),
    clock: () => Date.now() + 3600_000,
  });
  await refused(
    (await fast.issue({ space: SPACE, owner, actor: "alice" })).token,
    "bearer_postdated",
  );
});

Deno.test("auth - a lifetime over 900 s, or an inverted window, is refused", async () => {
  const t = now();
  await refused(
    await forge(issuer, claims({ iat: t, nbf: t, exp: t + 901 })),
    "bearer_lifetime_exceeded",
  );
  await refused(await forge(issuer, claims({ iat: t, nbf: t, exp: t })), "bearer_bad_claim");
  await refused(
    await forge(issuer, claims({ iat: t, nbf: t - 10, exp: t + 60 })),
    "bearer_bad_claim",
  );
});

Deno.test("auth - ver must be exactly 1", async () => {
  for (const ver of [0, 2, "1", undefined, true]) {
    await refused(await forge(issuer, claims({ ver })), "bearer_bad_version");
  }
});

Deno.test("auth - sub must be a derived owner string (no coercion)", async () => {
  const nkey = "U" + "A".repeat(55);
  for (const sub of [123, "local", nkey, owner.toUpperCase(), "u_short", undefined]) {
    await refused(
      await forge(issuer, claims({ sub, act: { owner: sub, actor: "alice" } })),
      "bearer_bad_subject",
    );
  }
});

Deno.test("auth - act must name this owner and a valid actor, with a closed key set", async () => {
  await refused(await forge(issuer, claims({ act: undefined })), "bearer_bad_actor");
  await refused(await forge(issuer, claims({ act: [owner, "alice"] })), "bearer_bad_actor");
  const other = await ownerFor("mallory");
  await refused(
    await forge(issuer, claims({ act: { owner: other, actor: "alice" } })),
    "bearer_bad_actor",
  );
  for (const actor of [7, "", "a.b", "a*", "a>", "a-b", "x".repeat(65)]) {
    await refused(await forge(issuer, claims({ act: { owner, actor } })), "bearer_bad_actor");
  }
  // An unknown act member (e.g. an elevated view this release does not mint) is refused.
  await refused(
    await forge(issuer, claims({ act: { owner, actor: "alice", view: "admin" } })),
    "bearer_bad_actor",
  );
});

Deno.test("auth - act.parent is one <derived owner>.<actor> link", async () => {
  const parentOwner = await ownerFor("parent");
  for (const parent of [`${parentOwner}.bob.extra`, `local.bob`, [`${parentOwner}.bob`], 5]) {
    await refused(
      await forge(issuer, claims({ act: { owner, actor: "alice", parent } })),
      "bearer_bad_actor",
    );
  }
  const ok = await forge(
    issuer,
    claims({ act: { owner, actor: "alice", parent: `${parentOwner}.bob` } }),
  );
  assert.equal((await validateUserToken(ok, opts)).parent, `${parentOwner}.bob`);
});

Deno.test("auth - scope, lifecycleUid, credentialId and jti have exact shapes", async () => {
  await refused(await forge(issuer, claims({ scope: "spawn" })), "bearer_bad_claim");
  await refused(await forge(issuer, claims({ scope: ["spawn", "spawn"] })), "bearer_bad_claim");
  await refused(await forge(issuer, claims({ scope: ["root"] })), "bearer_bad_claim");
  await refused(await forge(issuer, claims({ scope: undefined })), "bearer_bad_claim");
  await refused(
    await forge(
      issuer,
      claims({ scope: ["spawn"], act: { owner, actor: "alice", scope: ["admin"] } }),
    ),
    "bearer_bad_actor",
  );
  for (const lifecycleUid of ["A".repeat(26), "a".repeat(25), "a".repeat(33), 12]) {
    await refused(
      await forge(issuer, claims({ act: { owner, actor: "alice", lifecycleUid } })),
      "bearer_bad_actor",
    );
  }
  for (const credentialId of ["a:b", "x".repeat(257), "a..b", ""]) {
    await refused(
      await forge(issuer, claims({ act: { owner, actor: "alice", credentialId } })),
      "bearer_bad_actor",
    );
  }
  await refused(await forge(issuer, claims({ jti: "a b" })), "bearer_bad_claim");
  await refused(await forge(issuer, claims({ admin: true })), "bearer_bad_claim");
});

Deno.test("auth - key-carrying and crit headers are refused before verification", async () => {
  const attacker = await generateKeyPair("EdDSA", { extractable: true });
  const jwk = await exportJWK(attacker.publicKey);
  const body = claims();
  for (
    const [name, value] of [
      ["jwk", jwk],
      ["jku", "http://127.0.0.1:1/jwks"],
      ["x5u", "http://127.0.0.1:1/cert"],
      ["x5c", ["MIIB"]],
    ] as const
  ) {
    const token = await new CompactSign(new TextEncoder().encode(JSON.stringify(body)))
      .setProtectedHeader({ alg: "EdDSA", kid: issuer.activeKid, [name]: value })
      .sign(attacker.privateKey);
    await refused(token, "bearer_embedded_key");
  }
  // Refused even with our own valid signature: the header itself is the offence.
  await refused(await forge(issuer, body, { jwk }), "bearer_embedded_key");
  await refused(await forge(issuer, body, { crit: ["exp"], exp: 1 }), "bearer_crit_header");
  await refused(await forge(issuer, body, { b64: false }), "bearer_crit_header");
  await refused(await forge(issuer, body, { cty: "JWT" }), "bearer_bad_header");
});

Deno.test("auth - alg none, HS256, RS256 and ES256 are refused even when the key would verify", async () => {
  const body = claims();
  await refused(rawToken({ alg: "none", kid: issuer.activeKid }, body), "bearer_alg_refused");
  await refused(rawToken({ alg: "none" }, body, "c2ln"), "bearer_alg_refused");
  // HS256 keyed with the issuer's public key bytes: the classic key-confusion forgery.
  const x = issuer.jwks().keys[0].x!;
  const hmacKey = await crypto.subtle.importKey(
    "raw",
    new TextEncoder().encode(x),
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["sign"],
  );
  const unsigned = rawToken({ alg: "HS256", kid: issuer.activeKid }, body).slice(0, -1);
  const mac = new Uint8Array(
    await crypto.subtle.sign("HMAC", hmacKey, new TextEncoder().encode(unsigned)),
  );
  await refused(`${unsigned}.${base64url.encode(mac)}`, "bearer_alg_refused");
  // A correctly signed ES256 / RS256 token whose key is in the resolver's set is still refused.
  for (const alg of ["ES256", "RS256"] as const) {
    const pair = await generateKeyPair(alg, { extractable: true });
    const pub = { ...(await exportJWK(pair.publicKey)), kid: `k-${alg}` };
    const token = await new CompactSign(new TextEncoder().encode(JSON.stringify(body)))
      .setProtectedHeader({ alg, kid: pub.kid })
      .sign(pair.privateKey);
    const resolver = pinnedJwksResolver({ keys: [pub as never] });
    await assert.rejects(
      validateUserToken(token, { space: SPACE, resolver }),
      code("bearer_alg_refused"),
    );
  }
});

Deno.test("auth - unknown kid, missing kid and a forged signature are refused", async () => {
  const body = claims();
  await refused(await forge(issuer, body, { kid: "nope" }), "bearer_unknown_kid");
  await refused(await forge(issuer, body, { kid: undefined }), "bearer_unknown_kid");
  const good = await forge(issuer, body);
  const [h, , s] = good.split(".");
  const tampered = `${h}.${
    rawToken({}, claims({ act: { owner, actor: "root" } })).split(".")[1]
  }.${s}`;
  await refused(tampered, "bearer_bad_signature");
  for (const junk of ["", "a.b", "a.b.c.d", "%%%.a.b", "x".repeat(20_000)]) {
    await refused(junk, "bearer_malformed");
  }
  await assert.rejects(validateUserToken(42 as unknown as string, opts), code("bearer_malformed"));
});

Deno.test("auth - skew and TTL cap are frozen policy, not options or env knobs", async () => {
  assert.ok(Object.isFrozen(AUTH_POLICY));
  assert.throws(() => {
    (AUTH_POLICY as { clockSkewSec: number }).clockSkewSec = 1e9;
  });
  assert.equal(AUTH_POLICY.clockSkewSec, CLOCK_SKEW_SEC);
  const t = now();
  const old = await forge(issuer, claims({ iat: t - 7200, nbf: t - 7200, exp: t - 3600 }));
  const long = await forge(issuer, claims({ iat: t, nbf: t, exp: t + 86400 }));
  // Option names a caller might try are ignored; env cannot widen either.
  const widened = {
    ...opts,
    clockTolerance: 1e9,
    clockSkewSec: Number.NaN,
    maxTtlSec: Number.NaN,
  } as ValidateUserTokenOptions;
  Deno.env.set("COTAL_CLOCK_SKEW_SEC", "999999");
  Deno.env.set("COTAL_MAX_BEARER_TTL_SEC", "999999");
  try {
    await assert.rejects(validateUserToken(old, widened), code("bearer_expired"));
    await assert.rejects(validateUserToken(long, widened), code("bearer_lifetime_exceeded"));
  } finally {
    Deno.env.delete("COTAL_CLOCK_SKEW_SEC");
    Deno.env.delete("COTAL_MAX_BEARER_TTL_SEC");
  }
});

Deno.test("auth - validateUserToken refuses missing options", async () => {
  const { token } = await issuer.issue({ space: SPACE, owner, actor: "alice" });
  await assert.rejects(
    validateUserToken(token, { space: "", resolver: issuer.resolver() }),
    code("bearer_bad_options"),
  );
  await assert.rejects(
    validateUserToken(token, { space: SPACE } as ValidateUserTokenOptions),
    code("bearer_bad_options"),
  );
});
