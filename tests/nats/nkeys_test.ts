import assert from "node:assert/strict";
import * as nkeysJs from "nkeys.js";
import { isCotalError } from "../../lib/errors.ts";
import {
  createAccount,
  createCurve,
  createOperator,
  createUser,
  decodePublicKey,
  encodeSeed,
  isPublicKey,
  type NKeyKind,
  parseSeed,
  publicKeyFromSeed,
  publicKeyKind,
  seedSigner,
  verifySignature,
} from "../../lib/nats/mod.ts";

const TE = new TextEncoder();
const TD = new TextDecoder();

Deno.test("nkeys - each role has its seed and public prefix", async () => {
  const cases: [() => ReturnType<typeof createUser>, NKeyKind, string][] = [
    [createOperator, "operator", "O"],
    [createAccount, "account", "A"],
    [createUser, "user", "U"],
    [createCurve, "curve", "X"],
  ];
  for (const [create, kind, letter] of cases) {
    const kp = await create();
    assert.equal(kp.kind, kind);
    assert.equal(kp.seed.slice(0, 2), `S${letter}`);
    assert.equal(kp.seed.length, 58);
    assert.equal(kp.publicKey[0], letter);
    assert.equal(kp.publicKey.length, 56);
    assert.equal(publicKeyKind(kp.publicKey), kind);
    assert.equal(parseSeed(kp.seed).kind, kind);
    assert.equal(await publicKeyFromSeed(kp.seed), kp.publicKey);
  }
});

Deno.test("nkeys - seeds made by nkeys.js work here, and ours work in nkeys.js", async () => {
  const makers: [() => nkeysJs.KeyPair, NKeyKind][] = [
    [nkeysJs.createOperator, "operator"],
    [nkeysJs.createAccount, "account"],
    [nkeysJs.createUser, "user"],
    [nkeysJs.createServer, "server"],
    [nkeysJs.createCurve, "curve"],
  ];
  for (const [make, kind] of makers) {
    const theirs = make();
    const seed = TD.decode(theirs.getSeed());
    assert.equal(parseSeed(seed).kind, kind);
    assert.equal(await publicKeyFromSeed(seed), theirs.getPublicKey());
  }
  for (const ours of [await createOperator(), await createAccount(), await createUser()]) {
    const theirs = nkeysJs.fromSeed(TE.encode(ours.seed));
    assert.equal(theirs.getPublicKey(), ours.publicKey);
    assert.equal(encodeSeed(ours.kind, parseSeed(ours.seed).raw), ours.seed);
  }
  const curve = await createCurve();
  assert.equal(nkeysJs.fromCurveSeed(TE.encode(curve.seed)).getPublicKey(), curve.publicKey);
});

Deno.test("nkeys - WebCrypto signatures verify in nkeys.js and the reverse", async () => {
  const data = TE.encode("a nonce from the server");
  const ours = await createUser();
  const signer = await seedSigner(ours.seed);
  assert.equal(signer.publicKey, ours.publicKey);
  const sig = await signer.sign(data);
  assert.equal(nkeysJs.fromPublic(ours.publicKey).verify(data, sig), true);

  const theirs = nkeysJs.createAccount();
  const theirSig = theirs.sign(data);
  assert.equal(await verifySignature(theirs.getPublicKey(), data, theirSig), true);
  // Same seed, same signature: ed25519 is deterministic, so the two implementations agree.
  const same = await seedSigner(TD.decode(theirs.getSeed()));
  assert.deepEqual(await same.sign(data), theirSig);
});

Deno.test("nkeys - verifySignature says false for a wrong key, data or signature", async () => {
  const data = TE.encode("payload");
  const a = await seedSigner((await createAccount()).seed);
  const b = await createAccount();
  const sig = await a.sign(data);
  assert.equal(await verifySignature(a.publicKey, data, sig), true);
  assert.equal(await verifySignature(b.publicKey, data, sig), false);
  assert.equal(await verifySignature(a.publicKey, TE.encode("payloaD"), sig), false);
  const flipped = sig.slice();
  flipped[10] ^= 1;
  assert.equal(await verifySignature(a.publicKey, data, flipped), false);
  assert.equal(await verifySignature(a.publicKey, data, sig.subarray(0, 63)), false);
});

Deno.test("nkeys - refuses a mistyped key, a public key as a seed, and the wrong role", async () => {
  const user = await createUser();
  const typo = user.publicKey.slice(0, 20) + (user.publicKey[20] === "A" ? "B" : "A") +
    user.publicKey.slice(21);
  assert.equal(isPublicKey(typo), false);
  assert.throws(() => decodePublicKey(typo), (e) => isCotalError(e, "nkey_bad_encoding"));
  assert.throws(
    () => decodePublicKey(user.publicKey, "account"),
    (e) =>
      isCotalError(e, "nkey_bad_prefix") &&
      /^Expected an account public key .* but got a user key/.test(e.message),
  );
  assert.throws(() => parseSeed(user.publicKey), (e) => isCotalError(e, "nkey_bad_seed"));
  assert.throws(() => parseSeed("not base32!"), (e) => isCotalError(e, "nkey_bad_encoding"));
  assert.throws(
    () => parseSeed(user.seed.toLowerCase()),
    (e) => isCotalError(e, "nkey_bad_encoding"),
  );
  await assert.rejects(
    seedSigner((await createCurve()).seed),
    (e) => isCotalError(e, "nkey_bad_seed"),
  );
  await assert.rejects(
    verifySignature((await createCurve()).publicKey, new Uint8Array(1), new Uint8Array(64)),
    (e) => isCotalError(e, "nkey_bad_prefix"),
  );
  assert.equal(isPublicKey(user.publicKey, "user"), true);
  assert.equal(isPublicKey(user.publicKey, "account"), false);
  assert.equal(isPublicKey(user.seed), false);
});
