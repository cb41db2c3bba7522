/**
 * A space whose users are signed by a key no seed exists for: an ed25519 key generated
 * non-extractable in WebCrypto, standing in for a KMS or Vault-transit key. The account JWT is
 * re-signed to list it (`setAccountSigningKey`), creds are minted through `keySigner`, and a
 * real broker in operator mode accepts them while refusing the old local key's.
 */
import assert from "node:assert/strict";
import { encodePublicKey, type Signer } from "../../lib/nats/mod.ts";
import { isCotalError } from "../../lib/errors.ts";
import {
  createSpaceAuth,
  keySigner,
  mintCreds,
  mintWith,
  newIdentity,
  setAccountSigningKey,
} from "../../lib/trust/mod.ts";
import { uniqueSpace } from "../_harness/broker.ts";
import { rawConnect, startAuthBroker } from "./_helpers.ts";

/** A "KMS" key: its private half is created non-extractable and only ever signs. */
async function kmsKey(): Promise<{ signer: Signer; privateKey: CryptoKey }> {
  const pair = await crypto.subtle.generateKey("Ed25519", false, [
    "sign",
    "verify",
  ]) as CryptoKeyPair;
  const raw = new Uint8Array(await crypto.subtle.exportKey("raw", pair.publicKey));
  return {
    privateKey: pair.privateKey,
    signer: {
      publicKey: encodePublicKey("account", raw),
      sign: async (data) =>
        new Uint8Array(await crypto.subtle.sign("Ed25519", pair.privateKey, data as BufferSource)),
    },
  };
}

Deno.test("trust - users signed through keySigner by a key with no seed are accepted; the old key's are refused", async () => {
  const space = uniqueSpace("kms");
  const local = await createSpaceAuth(space);
  const kms = await kmsKey();
  // No seed can be had from it.
  await assert.rejects(crypto.subtle.exportKey("pkcs8", kms.privateKey));
  const auth = await setAccountSigningKey(local, kms.signer.publicKey);
  assert.equal(auth.account.signingSeed, "");
  assert.equal(auth.account.signingPub, kms.signer.publicKey);
  assert.equal(auth.account.pub, local.account.pub, "the same account");

  await using broker = await startAuthBroker(auth, [auth]);
  const signer = keySigner(space, auth.account.pub, kms.signer);
  assert.equal(signer.where, "remote", "no seed in this process");
  const creds = await mintWith(signer, newIdentity(), "observer");
  assert.equal(await rawConnect(broker.url, creds), "PONG");
  // The key the account no longer lists signs nothing the broker takes.
  const stale = await mintCreds(local, newIdentity(), "observer");
  assert.match(await rawConnect(broker.url, stale), /-ERR 'Authorization Violation'/);
  // A bundle with no seed cannot mint locally: it says why.
  await assert.rejects(
    mintCreds(auth, newIdentity(), "observer"),
    (e: unknown) => isCotalError(e, "missing_signing_seed"),
  );
});

Deno.test("trust - keySigner refuses a signer that is no account key, and setAccountSigningKey a key that is no account key", async () => {
  const space = uniqueSpace("kmsbad");
  const local = await createSpaceAuth(space);
  const user = newIdentity();
  const bad: Signer = { publicKey: user.id, sign: () => Promise.resolve(new Uint8Array(64)) };
  await assert.rejects(
    mintWith(keySigner(space, local.account.pub, bad), newIdentity(), "observer"),
    (e: unknown) => isCotalError(e, "invalid_signing_key"),
  );
  await assert.rejects(
    setAccountSigningKey(local, user.id),
    (e: unknown) => isCotalError(e, "invalid_signing_key"),
  );
});
