import assert from "node:assert/strict";
import { exportJWK, generateKeyPair } from "jose";
import { pinnedJwksResolver, type PublicJwk } from "../../lib/auth/jwks.ts";
import { code } from "./_helpers.ts";

async function publicJwk(alg: "EdDSA" | "ES256" | "RS256", kid: string) {
  const pair = await generateKeyPair(alg, { extractable: true });
  return { ...(await exportJWK(pair.publicKey)), kid } as PublicJwk;
}

async function weakRsaJwk(kid: string) {
  // jose refuses to generate a 1024-bit key, so WebCrypto makes the weak one directly.
  const pair = await crypto.subtle.generateKey(
    {
      name: "RSASSA-PKCS1-v1_5",
      modulusLength: 1024,
      publicExponent: new Uint8Array([1, 0, 1]),
      hash: "SHA-256",
    },
    true,
    ["sign", "verify"],
  );
  return { ...(await crypto.subtle.exportKey("jwk", pair.publicKey)), kid } as PublicJwk;
}

Deno.test("auth - pinned resolver pins each key's algorithm by its key type", async () => {
  const ed = await publicJwk("EdDSA", "ed");
  const ec = await publicJwk("ES256", "ec");
  const rsa = await publicJwk("RS256", "rsa");
  const resolve = pinnedJwksResolver({ keys: [ed, ec, rsa] });
  assert.ok(await resolve("ed", "EdDSA"));
  assert.ok(await resolve("ec", "ES256"));
  assert.ok(await resolve("rsa", "RS256"));
  // The header's alg cannot re-purpose a key of another type.
  assert.equal(await resolve("ec", "RS256"), undefined);
  assert.equal(await resolve("rsa", "ES256"), undefined);
  assert.equal(await resolve("ed", "ES256"), undefined);
  assert.equal(await resolve("missing", "EdDSA"), undefined);
  // An allow-list narrows the set.
  const edOnly = pinnedJwksResolver({ keys: [ed, ec, rsa] }, { algorithms: ["EdDSA"] });
  assert.equal(await edOnly("ec", "ES256"), undefined);
  assert.ok(await edOnly("ed", "EdDSA"));
});

Deno.test("auth - pinned resolver skips keys it cannot safely use", async () => {
  const weak = await weakRsaJwk("weak");
  const enc = { ...(await publicJwk("RS256", "enc")), use: "enc", alg: "RSA-OAEP" };
  const ps = { ...(await publicJwk("RS256", "ps")), alg: "PS256" };
  const noKid = { ...(await publicJwk("EdDSA", "x")), kid: undefined };
  const verifyless = { ...(await publicJwk("EdDSA", "ops")), key_ops: ["encrypt"] };
  const resolve = pinnedJwksResolver({ keys: [weak, enc, ps, noKid, verifyless] });
  assert.equal(await resolve("weak", "RS256"), undefined);
  assert.equal(await resolve("enc", "RS256"), undefined);
  assert.equal(await resolve("ps", "RS256"), undefined);
  assert.equal(await resolve("ops", "EdDSA"), undefined);
});

Deno.test("auth - pinned resolver refuses private material, duplicate kids and junk", async () => {
  const pair = await generateKeyPair("EdDSA", { extractable: true });
  const priv = { ...(await exportJWK(pair.privateKey)), kid: "p" } as PublicJwk;
  assert.throws(() => pinnedJwksResolver({ keys: [priv] }), code("jwks_private_key"));
  const secret = { kty: "oct", k: "c2VjcmV0", kid: "s" } as PublicJwk;
  assert.throws(() => pinnedJwksResolver({ keys: [secret] }), code("jwks_private_key"));
  const ed = await publicJwk("EdDSA", "dup");
  assert.throws(() => pinnedJwksResolver({ keys: [ed, { ...ed }] }), code("jwks_duplicate_kid"));
  const many = Array.from({ length: 33 }, (_, i) => ({ ...ed, kid: `k${i}` }));
  assert.throws(() => pinnedJwksResolver({ keys: many }), code("jwks_too_many_keys"));
  for (const junk of [null, {}, { keys: "x" }, { keys: [1] }, { keys: [{}] }]) {
    assert.throws(() => pinnedJwksResolver(junk as never), code("jwks_malformed"));
  }
  // A key whose members are not valid key material fails closed when used.
  const broken = pinnedJwksResolver({
    keys: [{ kty: "OKP", crv: "Ed25519", x: "AAAA", kid: "b" }],
  });
  await assert.rejects(broken("b", "EdDSA"), code("jwks_malformed"));
});
