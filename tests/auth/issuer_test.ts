import type { CotalErrorCode } from "../../lib/error_codes/mod.ts";
import assert from "node:assert/strict";
import { calculateJwkThumbprint } from "jose";
import { MAX_BEARER_TTL_SEC, RETIRED_KID_RETENTION_SEC } from "../../lib/auth/constants.ts";
import { createUserTokenIssuer, type IssueRequest } from "../../lib/auth/issuer.ts";
import { pinnedJwksResolver } from "../../lib/auth/jwks.ts";
import { validateUserToken } from "../../lib/auth/validate.ts";
import { code, now, ownerFor } from "./_helpers.ts";

const SPACE = "alpha";
const owner = await ownerFor("alice");

Deno.test("auth - issuer kid is the RFC 7638 thumbprint and the JWKS has no private part", async () => {
  const issuer = await createUserTokenIssuer({ space: SPACE });
  const { keys } = issuer.jwks();
  assert.equal(keys.length, 1);
  const [k] = keys;
  assert.deepEqual(Object.keys(k).sort(), ["alg", "crv", "kid", "kty", "use", "x"]);
  assert.equal(k.kid, issuer.activeKid);
  assert.equal(k.kid, await calculateJwkThumbprint({ kty: "OKP", crv: "Ed25519", x: k.x! }));
  assert.equal(issuer.issuer, "urn:cotal:auth:alpha");
  assert.ok(!JSON.stringify(issuer).includes('"d"'));
});

Deno.test("auth - issuer caps the lifetime and refuses what the validator would refuse", async () => {
  const issuer = await createUserTokenIssuer({ space: SPACE });
  const full = await issuer.issue({ space: SPACE, owner, actor: "alice" });
  assert.ok(full.exp - now() <= MAX_BEARER_TTL_SEC && full.exp - now() >= MAX_BEARER_TTL_SEC - 2);
  const base: IssueRequest = { space: SPACE, owner, actor: "alice" };
  const cases: [Partial<IssueRequest> & Record<string, unknown>, CotalErrorCode][] = [
    [{ ttlSec: 0 }, "bearer_bad_ttl"],
    [{ ttlSec: MAX_BEARER_TTL_SEC + 1 }, "bearer_bad_ttl"],
    [{ ttlSec: Number.NaN }, "bearer_bad_ttl"],
    [{ ttlSec: 1.5 }, "bearer_bad_ttl"],
    [{ ttlSec: -5 }, "bearer_bad_ttl"],
    [{ notAfter: now() - 1 }, "bearer_bad_ttl"],
    [{ space: "beta" }, "bearer_wrong_space"],
    [{ owner: "local" }, "bearer_bad_subject"],
    [{ owner: "U" + "A".repeat(55) }, "bearer_bad_subject"],
    [{ actor: "a.b" }, "bearer_bad_actor"],
    [{ actor: "a-b" }, "bearer_bad_actor"],
    [{ scope: ["root"] }, "bearer_bad_claim"],
    [{ scope: ["spawn", "spawn"] }, "bearer_bad_claim"],
    [{ lifecycleUid: "UPPER".repeat(6) }, "bearer_bad_actor"],
    [{ credentialId: "a:b" }, "bearer_bad_actor"],
    [{ parent: "a.b.c" }, "bearer_bad_actor"],
  ];
  for (const [over, expected] of cases) {
    await assert.rejects(issuer.issue({ ...base, ...over } as IssueRequest), code(expected));
  }
  // notAfter caps exp below the requested lifetime.
  const capped = await issuer.issue({ ...base, ttlSec: 900, notAfter: now() + 42 });
  assert.ok(capped.exp <= now() + 42);
  // Every accepted shape round-trips through the validator.
  const v = await validateUserToken(capped.token, { space: SPACE, resolver: issuer.resolver() });
  assert.equal(v.exp, capped.exp);
});

Deno.test("auth - rotate keeps old bearers valid; retire waits out the retention window", async () => {
  let clock = Date.now();
  const issuer = await createUserTokenIssuer({ space: SPACE, clock: () => clock });
  const first = issuer.activeKid;
  const old = await issuer.issue({ space: SPACE, owner, actor: "alice" });
  const second = await issuer.rotate();
  assert.notEqual(second, first);
  assert.equal(issuer.activeKid, second);
  assert.deepEqual(issuer.jwks().keys.map((k) => k.kid), [second, first]);
  const fresh = await issuer.issue({ space: SPACE, owner, actor: "alice" });
  assert.equal(fresh.kid, second);
  const opts = { space: SPACE, resolver: issuer.resolver() };
  assert.equal((await validateUserToken(old.token, opts)).kid, first);

  assert.throws(() => issuer.retire(second), code("issuer_retire_active"));
  assert.throws(() => issuer.retire("nope"), code("issuer_unknown_kid"));
  clock += (RETIRED_KID_RETENTION_SEC - 10) * 1000;
  assert.throws(() => issuer.retire(first), code("issuer_retire_too_early"));
  clock += 10_000;
  const snapshot = pinnedJwksResolver(issuer.jwks());
  issuer.retire(first);
  assert.deepEqual(issuer.jwks().keys.map((k) => k.kid), [second]);
  // A bearer signed by the retired kid no longer verifies here; a JWKS snapshot taken before
  // the retirement (a remote verifier's cache) still holds the key, hence the window.
  await assert.rejects(validateUserToken(old.token, opts), code("bearer_unknown_kid"));
  assert.ok(await snapshot(first, "EdDSA"));
});

Deno.test("auth - issuer record round-trips and refuses tampering", async () => {
  const issuer = await createUserTokenIssuer({ space: SPACE });
  await issuer.rotate();
  const record = issuer.exportRecord();
  const again = await createUserTokenIssuer({ space: SPACE, record });
  assert.equal(again.activeKid, issuer.activeKid);
  assert.deepEqual(again.jwks(), issuer.jwks());
  const { token } = await again.issue({ space: SPACE, owner, actor: "alice" });
  await validateUserToken(token, { space: SPACE, resolver: pinnedJwksResolver(issuer.jwks()) });

  const rec = JSON.parse(record);
  const variants: unknown[] = [
    "not json",
    { ...rec, ver: 2 },
    { ...rec, issuer: "urn:cotal:auth:beta" },
    { ...rec, keys: [] },
    { ...rec, activeKid: "missing" },
    { ...rec, keys: [{ ...rec.keys[0], kid: rec.keys[1].kid }, rec.keys[1]] },
    { ...rec, keys: [rec.keys[0], rec.keys[0]] },
    { ...rec, keys: [{ ...rec.keys[0], privateJwk: { ...rec.keys[0].privateJwk, d: undefined } }] },
  ];
  for (const v of variants) {
    const text = typeof v === "string" ? v : JSON.stringify(v);
    await assert.rejects(
      createUserTokenIssuer({ space: SPACE, record: text }),
      code("issuer_record_malformed"),
    );
  }
  // A record for alpha does not load as beta's issuer.
  await assert.rejects(
    createUserTokenIssuer({ space: "beta", record }),
    code("issuer_record_malformed"),
  );
});

Deno.test("auth - issuer refuses an empty space", async () => {
  await assert.rejects(createUserTokenIssuer({ space: "" }), code("issuer_bad_space"));
});
