/**
 * Unpadded base64url (RFC 4648 §5), the encoding of every JWT segment, on V8's native
 * `Uint8Array` base64 codec (several times faster than a JS loop on the signing path).
 *
 * @module
 */

const SHAPE = /^[A-Za-z0-9_-]*$/;

/** Encodes bytes as unpadded base64url. */
export function base64urlEncode(bytes: Uint8Array): string {
  return bytes.toBase64({ alphabet: "base64url", omitPadding: true });
}

/**
 * Decodes strict unpadded base64url, or returns `undefined` for padding, whitespace,
 * characters outside the alphabet, an impossible length, or non-zero trailing bits, so each
 * byte string has exactly one accepted spelling (as Go's strict `RawURLEncoding`).
 */
export function base64urlDecode(text: string): Uint8Array | undefined {
  if (typeof text !== "string" || text.length % 4 === 1 || !SHAPE.test(text)) return undefined;
  try {
    // "strict" wants the padding back, and in exchange refuses non-zero trailing bits.
    const padded = text + "=".repeat((4 - (text.length % 4)) % 4);
    return Uint8Array.fromBase64(padded, { alphabet: "base64url", lastChunkHandling: "strict" });
  } catch {
    return undefined;
  }
}
