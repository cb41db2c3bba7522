/**
 * A manager that signs locally re-signs the space's daemon creds before they need it, however
 * short their span: an embedder's 30-second delivery cred was re-signed once at start and then
 * only on a fixed 6-hour schedule, so the delivery daemon's cred expired (independent embedder
 * run, issue 15).
 */
import assert from "node:assert/strict";
import { parseCreds } from "../../lib/nats/mod.ts";
import { decodeJwtUnverified } from "../../lib/nats/jwt.ts";
import { mintCreds, newIdentity } from "../../lib/trust/mod.ts";
import { deliveryCredsKey } from "../../lib/workspace/keys.ts";
import { waitFor } from "../_harness/broker.ts";
import { startManagerMesh } from "./_manager_mesh.ts";

Deno.test("manager - a 30-second daemon cred is re-signed at half its life left, again and again, never reaching expiry", async () => {
  await using mesh = await startManagerMesh("resign");
  const key = deliveryCredsKey(mesh.space, { root: mesh.root });
  const identity = newIdentity();
  await mesh.store.put(
    key,
    await mintCreds(mesh.auth, identity, "delivery", { expiresInSeconds: 30 }),
  );
  await new Promise((r) => setTimeout(r, 1_100));
  const seen = new Set<string>();
  const lines: string[] = [];
  await mesh.manager({ log: (l) => lines.push(l) });
  // The re-sign at start, then one about 15 s later: three generations within 25 s.
  await waitFor(async () => {
    seen.add((await parseCreds((await mesh.store.get(key))!)).jwt);
    return seen.size >= 3;
  }, { timeoutMs: 25_000, intervalMs: 250, what: "two re-signs of the 30-second delivery cred" })
    .catch((e) => {
      throw new Error(`${e.message}; manager said: ${lines.join(" | ")}`);
    });
  const now = Math.floor(Date.now() / 1000);
  const claims = decodeJwtUnverified((await parseCreds((await mesh.store.get(key))!)).jwt);
  assert.equal(claims.sub, identity.id, "the same key, re-signed");
  assert.ok(claims.exp! - now > 10, `the stored cred has ${claims.exp! - now} s left`);
  assert.equal(claims.exp! - claims.iat, 30, "its span kept");
});
