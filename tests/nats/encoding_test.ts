import assert from "node:assert/strict";
import { base32Decode, base32Encode } from "../../lib/nats/base32.ts";
import { base64urlDecode, base64urlEncode } from "../../lib/nats/base64url.ts";

Deno.test("encoding - base32 and base64url round trip every length", () => {
  for (let n = 0; n < 70; n++) {
    const bytes = crypto.getRandomValues(new Uint8Array(n));
    assert.deepEqual(base32Decode(base32Encode(bytes)), bytes);
    const text = base64urlEncode(bytes);
    assert.match(text, /^[A-Za-z0-9_-]*$/);
    assert.deepEqual(base64urlDecode(text), bytes);
  }
  // RFC 4648 test vectors.
  assert.equal(base32Encode(new TextEncoder().encode("foobar")), "MZXW6YTBOI");
  assert.equal(base64urlEncode(new Uint8Array([0xfb, 0xff])), "-_8");
});

Deno.test("encoding - base64url accepts one spelling per byte string", () => {
  assert.deepEqual(base64urlDecode("AQIDBA"), new Uint8Array([1, 2, 3, 4]));
  for (const bad of ["AQIDBB", "AQ==", "A", "AQ I", "AQ+D", "AQ/D", "AQID\n"]) {
    assert.equal(base64urlDecode(bad), undefined, JSON.stringify(bad));
  }
  assert.deepEqual(base64urlDecode("AQ"), new Uint8Array([1]));
  assert.equal(base32Decode("MZXW6YTBOI="), undefined);
  assert.equal(base32Decode("mzxw6ytboi"), undefined);
});
