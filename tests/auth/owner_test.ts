import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { deriveOwnerForIdpSubject, deriveOwnerToken } from "../../lib/auth/owner.ts";
import { code, SECRET } from "./_helpers.ts";

/** An independent derivation (node:crypto, hand-rolled base32) to pin the exact bytes. */
function expectedOwner(secret: Uint8Array, subject: string): string {
  const mac = createHmac("sha256", secret).update(`cotal-owner-v1:${subject}`, "utf8").digest();
  const alphabet = "abcdefghijklmnopqrstuvwxyz234567";
  let bits = "";
  for (const b of mac.subarray(0, 16)) bits += b.toString(2).padStart(8, "0");
  let out = "";
  for (let i = 0; i < bits.length; i += 5) {
    out += alphabet[parseInt(bits.slice(i, i + 5).padEnd(5, "0"), 2)];
  }
  return `u_${out}`;
}

Deno.test("auth - deriveOwnerToken is HMAC-SHA256 to u_ + 26 lowercase base32", async () => {
  const owner = await deriveOwnerToken(SECRET, "alice");
  assert.match(owner, /^u_[a-z2-7]{26}$/);
  assert.equal(owner, expectedOwner(SECRET, "alice"));
  assert.equal(await deriveOwnerToken(SECRET, "alice"), owner, "stable across calls (re-login)");
  assert.notEqual(await deriveOwnerToken(SECRET, "bob"), owner);
  // Another space has another secret, so the same person is unlinkable across spaces.
  const other = new Uint8Array(32).fill(9);
  assert.notEqual(await deriveOwnerToken(other, "alice"), owner);
  // Never nkey-shaped (56 upper-case characters).
  assert.ok(!/^[A-Z2-7]{56}$/.test(owner));
});

Deno.test("auth - IdP owners use a JSON array, so delimiters cannot collide", async () => {
  const a = await deriveOwnerForIdpSubject(SECRET, "a", "b|c");
  const b = await deriveOwnerForIdpSubject(SECRET, "a|b", "c");
  assert.notEqual(a, b);
  assert.equal(a, expectedOwner(SECRET, JSON.stringify(["a", "b|c"])));
  assert.notEqual(
    await deriveOwnerForIdpSubject(SECRET, "https://idp-one", "42"),
    await deriveOwnerForIdpSubject(SECRET, "https://idp-two", "42"),
  );
});

Deno.test("auth - owner derivation refuses a short secret and an empty subject", async () => {
  await assert.rejects(
    deriveOwnerToken(new Uint8Array(31), "alice"),
    code("owner_secret_too_short"),
  );
  await assert.rejects(
    deriveOwnerToken("x".repeat(64) as unknown as Uint8Array, "alice"),
    code("owner_secret_too_short"),
  );
  await assert.rejects(deriveOwnerToken(SECRET, ""), code("owner_subject_empty"));
  await assert.rejects(deriveOwnerForIdpSubject(SECRET, "", "sub"), code("owner_subject_empty"));
  await assert.rejects(deriveOwnerForIdpSubject(SECRET, "iss", ""), code("owner_subject_empty"));
});
