import assert from "node:assert/strict";
import { ensureIdpPin } from "../../lib/auth/idp_pin.ts";
import { deriveOwnerForIdpSubject } from "../../lib/auth/owner.ts";
import { cotalAuthProvider, type CotalAuthSession } from "../../lib/auth/provider.ts";
import { ensureIssuer, ensureOwnerSecret } from "../../lib/auth/secrets.ts";
import { validateUserToken } from "../../lib/auth/validate.ts";
import { registry } from "../../lib/registry.ts";
import { MemorySecretStore } from "../../lib/workspace/memory_secret_store.ts";
import { tempDir } from "../_harness/broker.ts";
import { startTestIdp } from "../_harness/idp.ts";
import { code } from "./_helpers.ts";

const SPACE = "alpha";

Deno.test("auth - importing lib/auth registers auth-provider:cotal", () => {
  assert.equal(registry.resolve("auth-provider", "cotal"), cotalAuthProvider);
  assert.ok(Object.isFrozen(cotalAuthProvider));
});

Deno.test("auth - cotal provider session bridges a real IdP from provisioned material", async () => {
  const idp = await startTestIdp({ alg: "RS256" });
  await using _idp = idp;
  const store = new MemorySecretStore();
  const stateDir = await tempDir("cotal-auth-state-");
  const context = { space: SPACE, store, stateDir };
  await assert.rejects(cotalAuthProvider.create(context), code("idp_pin_missing"));
  await ensureIdpPin({ stateDir }, SPACE, {
    issuer: idp.issuer,
    audience: idp.audience,
    jwksUrl: idp.jwksUrl,
  });
  await assert.rejects(cotalAuthProvider.create(context), code("issuer_missing"));
  await ensureIssuer(store, SPACE);
  await assert.rejects(cotalAuthProvider.create(context), code("owner_secret_missing"));
  const secret = await ensureOwnerSecret(store, SPACE);

  const session = await cotalAuthProvider.create(context) as CotalAuthSession;
  const owner = await deriveOwnerForIdpSubject(secret, idp.issuer, idp.sub);
  await session.ledger.grant({
    owner,
    actor: "alice",
    subscribe: [],
    allowSubscribe: ["general"],
    allowPublish: ["general"],
  });
  const { token } = await session.bridge.exchange(await idp.sign(), { actor: "alice" });
  const v = await validateUserToken(token, { space: SPACE, resolver: session.issuer.resolver() });
  assert.equal(v.owner, owner);
  await assert.rejects(session.userCredentials({ actor: "alice" }), code("auth_callout_missing"));
  await session.close();
});
