import assert from "node:assert/strict";
import * as nkeysJs from "nkeys.js";
import { isCotalError } from "../../lib/errors.ts";
import {
  createCurve,
  createUser,
  encodePublicKey,
  xkeyOpen,
  XKeyPair,
  xkeySeal,
} from "../../lib/nats/mod.ts";

const TE = new TextEncoder();
const TD = new TextDecoder();
const message = TE.encode("an authorization request JWT, say");

Deno.test("xkey - nkeys.js opens what we seal, from a seed or an XKeyPair", async () => {
  const ours = await createCurve();
  const theirs = nkeysJs.createCurve();
  for (const sender of [ours.seed, await XKeyPair.fromSeed(ours.seed)]) {
    const sealed = await xkeySeal(message, sender, theirs.getPublicKey());
    assert.equal(TD.decode(sealed.subarray(0, 4)), "xkv1");
    assert.deepEqual(theirs.open(sealed, ours.publicKey), message);
  }
});

Deno.test("xkey - we open what nkeys.js seals, and each side's output is the other's format", async () => {
  const ours = await createCurve();
  const theirs = nkeysJs.createCurve();
  const sealed = theirs.seal(message, ours.publicKey);
  assert.deepEqual(await xkeyOpen(sealed, ours.seed, theirs.getPublicKey()), message);
  const pair = await XKeyPair.fromSeed(ours.seed);
  assert.deepEqual(await xkeyOpen(sealed, pair, theirs.getPublicKey()), message);
  // A seed made by nkeys.js works here too.
  const theirSeed = TD.decode(theirs.getSeed());
  const back = await xkeySeal(message, theirSeed, ours.publicKey);
  assert.deepEqual(await xkeyOpen(back, ours.seed, theirs.getPublicKey()), message);
  // Same layout, byte for byte: nkeys.js with our nonce produces our exact box.
  const nonce = back.slice(4, 28);
  assert.deepEqual(theirs.seal(message, ours.publicKey, nonce), back);
});

Deno.test("xkey - a cached shared key serves repeated seals and opens", async () => {
  const a = await XKeyPair.fromSeed((await createCurve()).seed);
  const b = await XKeyPair.fromSeed((await createCurve()).seed);
  for (let i = 0; i < 3; i++) {
    const sealed = await xkeySeal(TE.encode(`m${i}`), a, b.publicKey);
    assert.equal(TD.decode(await xkeyOpen(sealed, b, a.publicKey)), `m${i}`);
  }
  assert.equal(await a.sharedKey(b.publicKey), await a.sharedKey(b.publicKey));
  assert.deepEqual(await a.sharedKey(b.publicKey), await b.sharedKey(a.publicKey));
});

Deno.test("xkey - open refuses the wrong key, tampering, a bad header and garbage", async () => {
  const a = await createCurve();
  const b = await createCurve();
  const c = await createCurve();
  const sealed = await xkeySeal(message, a.seed, b.publicKey);
  await assert.rejects(
    xkeyOpen(sealed, c.seed, a.publicKey),
    (e) => isCotalError(e, "xkey_open_failed"),
  );
  await assert.rejects(
    xkeyOpen(sealed, b.seed, c.publicKey),
    (e) => isCotalError(e, "xkey_open_failed"),
  );
  const tampered = sealed.slice();
  tampered[tampered.length - 1] ^= 1;
  await assert.rejects(
    xkeyOpen(tampered, b.seed, a.publicKey),
    (e) => isCotalError(e, "xkey_open_failed"),
  );
  const header = sealed.slice();
  header[0] = "y".charCodeAt(0);
  await assert.rejects(
    xkeyOpen(header, b.seed, a.publicKey),
    (e) => isCotalError(e, "xkey_bad_message") && e.message.includes("xkv1"),
  );
  await assert.rejects(
    xkeyOpen(sealed.subarray(0, 28), b.seed, a.publicKey),
    (e) => isCotalError(e, "xkey_bad_message"),
  );
  await assert.rejects(
    xkeyOpen(TE.encode('{"json":true}'), b.seed, a.publicKey),
    (e) => isCotalError(e, "xkey_bad_message"),
  );
});

Deno.test("xkey - refuses non-curve keys on either side", async () => {
  const user = await createUser();
  const curve = await createCurve();
  await assert.rejects(
    xkeySeal(message, user.seed, curve.publicKey),
    (e) => isCotalError(e, "xkey_bad_key") && e.message.includes("not a user seed"),
  );
  await assert.rejects(
    xkeySeal(message, curve.seed, user.publicKey),
    (e) => isCotalError(e, "xkey_bad_key") && e.message.includes("X…"),
  );
  // A low-order point (all zeros): WebCrypto refuses it rather than deriving a null key.
  const zero = encodePublicKey("curve", new Uint8Array(32));
  await assert.rejects(xkeySeal(message, curve.seed, zero), (e) => isCotalError(e, "xkey_bad_key"));
});
