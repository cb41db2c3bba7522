/**
 * Our creds and JWTs in other people's code: npm:nats's own credsAuthenticator, jose's
 * generic JWT decoder, and nkeys.js signature verification.
 */
import assert from "node:assert/strict";
import { connect, credsAuthenticator } from "nats";
import { decodeJwt, decodeProtectedHeader } from "jose";
import { fromPublic, fromSeed } from "nkeys.js";
import { uniqueSpace } from "../_harness/broker.ts";
import {
  createSpaceAuth,
  mintCreds,
  mintMembershipObserverCreds,
  newIdentity,
} from "../../lib/trust/mod.ts";
import { credsId, startAuthBroker } from "./_helpers.ts";

const auth = await createSpaceAuth(uniqueSpace("interop"));

function verifyWithNkeys(jwt: string): boolean {
  const [h, p, s] = jwt.split(".");
  const iss = decodeJwt(jwt).iss!;
  const sig = Uint8Array.from(
    atob(s.replace(/-/g, "+").replace(/_/g, "/")),
    (c) => c.charCodeAt(0),
  );
  return fromPublic(iss).verify(new TextEncoder().encode(`${h}.${p}`), sig);
}

Deno.test("trust - our creds load unchanged in npm:nats credsAuthenticator", async () => {
  await using b = await startAuthBroker(auth, [auth]);
  const creds = await mintCreds(auth, newIdentity(), "operator", {
    principal: { owner: "local", actor: "op" },
  });
  const nc = await connect({
    servers: b.url,
    authenticator: credsAuthenticator(new TextEncoder().encode(creds)),
    inboxPrefix: `_INBOX_${credsId(creds)}`,
    reconnect: false,
  });
  try {
    const info = await (await nc.jetstreamManager()).getAccountInfo();
    assert.equal(typeof info.limits.max_storage, "number");
  } finally {
    await nc.close();
  }
});

Deno.test("trust - our JWTs decode with standard decoders and verify with nkeys.js", async () => {
  const id = newIdentity();
  // Our identity seed is a standard nkey seed.
  assert.equal(fromSeed(new TextEncoder().encode(id.seed)).getPublicKey(), id.id);
  const creds = await mintCreds(auth, id, "probe");
  const userJwt = /BEGIN NATS USER JWT-+\n(\S+)\n/.exec(creds)![1];
  const sysJwt = /BEGIN NATS USER JWT-+\n(\S+)\n/.exec(
    await mintMembershipObserverCreds(auth, newIdentity()),
  )![1];
  for (const jwt of [auth.operator.jwt, auth.sys.jwt, auth.account.jwt, userJwt, sysJwt]) {
    assert.deepEqual(decodeProtectedHeader(jwt), { typ: "JWT", alg: "ed25519-nkey" });
    const claims = decodeJwt(jwt) as { nats?: { type?: string; version?: number } };
    assert.equal(claims.nats?.version, 2);
    assert.ok(verifyWithNkeys(jwt), `signature of a ${claims.nats?.type} JWT`);
  }
  const user = decodeJwt(userJwt) as { sub: string; iss: string; nats: { issuer_account: string } };
  assert.equal(user.sub, id.id);
  assert.equal(user.iss, auth.account.signingPub);
  assert.equal(user.nats.issuer_account, auth.account.pub);
  const op = decodeJwt(auth.operator.jwt) as {
    iss: string;
    sub: string;
    nats: Record<string, string>;
  };
  assert.equal(op.iss, op.sub);
  assert.equal(op.nats.system_account, auth.sys.pub);
});
