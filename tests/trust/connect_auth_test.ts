import assert from "node:assert/strict";
import { fromPublic } from "nkeys.js";
import {
  createSpaceAuth,
  credsAuthenticatorFast,
  mintCreds,
  newIdentity,
  newLifecycleUid,
  token,
} from "../../lib/trust/mod.ts";
import { credsId } from "./_helpers.ts";

const auth = await createSpaceAuth("auth");

function code(c: string) {
  return (err: unknown) => {
    assert.equal((err as { code?: string }).code, c, String(err));
    return true;
  };
}

Deno.test("trust - credsAuthenticatorFast signs the nonce as the creds' user", async () => {
  const creds = await mintCreds(auth, newIdentity(), "probe");
  const out = credsAuthenticatorFast(creds)("server-nonce-123") as {
    jwt: string;
    nkey: string;
    sig: string;
  };
  assert.equal(out.nkey, credsId(creds));
  assert.ok(creds.includes(out.jwt));
  const sig = Uint8Array.from(atob(out.sig), (c) => c.charCodeAt(0));
  assert.ok(fromPublic(out.nkey).verify(new TextEncoder().encode("server-nonce-123"), sig));
});

Deno.test("trust - credsAuthenticatorFast refuses malformed and mismatched creds", async () => {
  assert.throws(() => credsAuthenticatorFast("not creds"), code("creds_bad_format"));
  const a = await mintCreds(auth, newIdentity(), "probe");
  const b = await mintCreds(auth, newIdentity(), "probe");
  const seedOfB = /BEGIN USER NKEY SEED-+\n(\S+)\n/.exec(b)![1];
  const seedOfA = /BEGIN USER NKEY SEED-+\n(\S+)\n/.exec(a)![1];
  assert.throws(() => credsAuthenticatorFast(a.replace(seedOfA, seedOfB)), code("creds_mismatch"));
});

Deno.test("trust - credsAuthenticatorFast re-reads a function source on each connect", async () => {
  let current = await mintCreds(auth, newIdentity(), "probe");
  const first = credsId(current);
  const authn = credsAuthenticatorFast(() => current);
  assert.equal((authn("n1") as { nkey: string }).nkey, first);
  current = await mintCreds(auth, newIdentity(), "agent", { lifecycleUid: newLifecycleUid() });
  assert.equal((authn("n2") as { nkey: string }).nkey, credsId(current));
  assert.notEqual(credsId(current), first);
});

Deno.test("trust - token() follows the wire rule", () => {
  assert.equal(token(" my space "), "my_space");
  assert.equal(token("team/a"), "team_a");
  assert.equal(token("a.b*c>"), "a_b_c_");
  assert.equal(token("ok-name_1"), "ok-name_1");
  assert.equal(token("   "), "_");
  assert.equal(token("é"), "_");
});
