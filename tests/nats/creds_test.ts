import assert from "node:assert/strict";
import { credsAuthenticator } from "nats";
import { isCotalError } from "../../lib/errors.ts";
import {
  createAccount,
  createOperator,
  createUser,
  encodeJwt,
  parseCreds,
  renderCreds,
  seedSigner,
} from "../../lib/nats/mod.ts";

async function userCreds() {
  const account = await createAccount();
  const user = await createUser();
  const jwt = await encodeJwt(
    { sub: user.publicKey, name: "u", nats: { type: "user" } },
    await seedSigner(account.seed),
  );
  return { account, user, jwt };
}

Deno.test("creds - render and parse round trip in the standard layout", async () => {
  const { user, jwt } = await userCreds();
  const text = await renderCreds(jwt, user.seed);
  const lines = text.split("\n");
  assert.equal(lines[0], "-----BEGIN NATS USER JWT-----");
  assert.equal(lines[1], jwt);
  assert.equal(lines[2], "------END NATS USER JWT------");
  assert.ok(lines.includes("-----BEGIN USER NKEY SEED-----"));
  assert.equal(lines[lines.indexOf("-----BEGIN USER NKEY SEED-----") + 1], user.seed);
  assert.ok(lines.includes("------END USER NKEY SEED------"));
  assert.ok(!text.includes("\r"));
  assert.deepEqual(await parseCreds(text), { jwt, seed: user.seed });
  // Files edited on Windows still parse.
  assert.deepEqual(await parseCreds(text.replaceAll("\n", "\r\n")), { jwt, seed: user.seed });
});

Deno.test("creds - npm:nats credsAuthenticator reads our file unchanged", async () => {
  const { user, jwt } = await userCreds();
  const text = await renderCreds(jwt, user.seed);
  const auth = credsAuthenticator(new TextEncoder().encode(text));
  const result = auth("nonce-from-server") as { jwt: string; nkey: string; sig: string };
  assert.equal(result.jwt, jwt);
  assert.equal(result.nkey, user.publicKey);
  assert.ok(result.sig.length > 0);
});

Deno.test("creds - render refuses a non-user JWT or a seed that does not match", async () => {
  const { account, user, jwt } = await userCreds();
  const operator = await createOperator();
  const accountJwt = await encodeJwt(
    { sub: account.publicKey, nats: { type: "account" } },
    await seedSigner(operator.seed),
  );
  await assert.rejects(
    renderCreds(accountJwt, user.seed),
    (e) => isCotalError(e, "creds_not_user") && /not an account JWT/.test(e.message),
  );
  await assert.rejects(renderCreds(jwt, account.seed), (e) => isCotalError(e, "creds_not_user"));
  await assert.rejects(
    renderCreds(jwt, (await createUser()).seed),
    (e) => isCotalError(e, "creds_mismatch") && e.message.includes(user.publicKey),
  );
  await assert.rejects(renderCreds("nope", user.seed), (e) => isCotalError(e, "jwt_bad_encoding"));
});

function mistype(key: string): string {
  return key.slice(0, 10) + (key[10] === "B" ? "C" : "B") + key.slice(11);
}

Deno.test("creds - parse refuses missing blocks, a bare JWT and a mismatched seed", async () => {
  const { user, jwt } = await userCreds();
  const text = await renderCreds(jwt, user.seed);
  await assert.rejects(parseCreds(""), (e) => isCotalError(e, "creds_bad_format"));
  await assert.rejects(parseCreds(jwt), (e) => isCotalError(e, "creds_bad_format"));
  const noSeed = text.slice(0, text.indexOf("*"));
  await assert.rejects(
    parseCreds(noSeed),
    (e) => isCotalError(e, "creds_bad_format") && e.message.includes("NKEY SEED"),
  );
  const other = await createUser();
  await assert.rejects(
    parseCreds(text.replace(user.seed, other.seed)),
    (e) => isCotalError(e, "creds_mismatch"),
  );
  await assert.rejects(
    parseCreds(text.replace(user.seed, mistype(user.seed))),
    (e) => isCotalError(e, "nkey_bad_encoding") && e.message.includes("checksum"),
  );
});
