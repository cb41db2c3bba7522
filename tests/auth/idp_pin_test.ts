import assert from "node:assert/strict";
import { checkIdpUrl, discoverIdp } from "../../lib/auth/idp_fetch.ts";
import { ensureIdpPin, type IdpPin, loadIdpPin } from "../../lib/auth/idp_pin.ts";
import { idpPinKey } from "../../lib/auth/keys.ts";
import { MemorySecretStore } from "../../lib/workspace/memory_secret_store.ts";
import { tempDir } from "../_harness/broker.ts";
import { startTestIdp } from "../_harness/idp.ts";
import { code } from "./_helpers.ts";

const SPACE = "alpha";
const PIN: IdpPin = {
  issuer: "https://idp.example/realms/cotal",
  audience: "cotal",
  jwksUrl: "https://idp.example/realms/cotal/protocol/openid-connect/certs",
  algorithms: ["RS256"],
};

Deno.test("auth - an IdP pin is created once and a different one is refused", async () => {
  const store = new MemorySecretStore();
  await assert.rejects(loadIdpPin(store, SPACE), code("idp_pin_missing"));
  assert.deepEqual(await ensureIdpPin(store, SPACE, PIN), PIN);
  assert.deepEqual(await ensureIdpPin(store, SPACE, { ...PIN }), PIN, "the same pin is idempotent");
  assert.deepEqual(await loadIdpPin(store, SPACE), PIN);
  for (
    const other of [
      { ...PIN, issuer: "https://other.example" },
      { ...PIN, audience: "other" },
      { ...PIN, jwksUrl: "https://idp.example/other" },
      { ...PIN, algorithms: ["RS256", "ES256"] as IdpPin["algorithms"] },
    ]
  ) {
    await assert.rejects(ensureIdpPin(store, SPACE, other), code("idp_pin_conflict"));
  }
  assert.deepEqual(await loadIdpPin(store, SPACE), PIN, "a refused re-pin changes nothing");
});

Deno.test("auth - IdP pin URLs must be https or loopback, without spoofable parts", async () => {
  const store = new MemorySecretStore();
  for (
    const jwksUrl of [
      "http://idp.example/certs",
      "https://real.example@evil.example/certs",
      "https://idp.example/certs?x=1",
      "https://idp.example/certs#frag",
      "ftp://idp.example/certs",
      "not a url",
    ]
  ) {
    await assert.rejects(ensureIdpPin(store, SPACE, { ...PIN, jwksUrl }), code("idp_url_refused"));
  }
  assert.equal(checkIdpUrl("http://127.0.0.1:8080/jwks/"), "http://127.0.0.1:8080/jwks");
  assert.equal(checkIdpUrl("http://[::1]:8080/jwks"), "http://[::1]:8080/jwks");
  assert.equal(checkIdpUrl("http://localhost/jwks"), "http://localhost/jwks");
  assert.throws(() => checkIdpUrl("http://127.0.0.1.evil.example/jwks"), code("idp_url_refused"));
});

Deno.test("auth - IdP pin shapes are strict on write and on read", async () => {
  const store = new MemorySecretStore();
  const bad: unknown[] = [
    { ...PIN, issuer: "" },
    { ...PIN, jwks: { keys: [] } },
    { issuer: PIN.issuer, audience: PIN.audience, jwks: { keys: [] } },
    { issuer: PIN.issuer, audience: PIN.audience },
    { ...PIN, algorithms: ["HS256"] },
    { ...PIN, extra: true },
  ];
  for (const pin of bad) {
    await assert.rejects(ensureIdpPin(store, SPACE, pin as IdpPin), code("idp_pin_invalid"));
  }
  for (const text of ["{", JSON.stringify({ ver: 2, ...PIN }), JSON.stringify({ ver: 1 })]) {
    await store.put(idpPinKey(SPACE), text);
    await assert.rejects(loadIdpPin(store, SPACE), code("idp_pin_malformed"));
  }
});

Deno.test("auth - IdP pin lives under a state dir by default and can pin a static JWKS", async () => {
  const dir = await tempDir("cotal-pin-");
  const idp = await startTestIdp({ alg: "EdDSA" });
  await using _idp = idp;
  const found = await discoverIdp(idp.issuer);
  const pin: IdpPin = { issuer: found.issuer, audience: idp.audience, jwks: idp.jwks() };
  await ensureIdpPin({ stateDir: dir }, SPACE, pin);
  assert.deepEqual(await loadIdpPin({ stateDir: dir }, SPACE), pin);
  const info = await Deno.stat(`${dir}/${idpPinKey(SPACE)}`);
  assert.equal(info.mode! & 0o777, 0o600);
});

Deno.test("auth - discovery refuses an issuer mismatch", async () => {
  const idp = await startTestIdp({ alg: "ES256", issuer: (o) => `${o}/tenant` });
  await using _idp = idp;
  await assert.rejects(
    discoverIdp(`${idp.issuer}/`),
    (e) => code("idp_discovery_mismatch")(e),
  );
  assert.equal((await discoverIdp(idp.issuer)).jwksUrl, idp.jwksUrl);
  await assert.rejects(discoverIdp(`${idp.origin}/nowhere`), code("idp_fetch_failed"));
});
