/**
 * The protocol guard's text helpers: a CONNECT's options (plain lowercase field names only) and
 * its signature, a line as text, joined buffers, and the refusal that ends a connection.
 *
 * @module
 */

/**
 * `v` as an object whose keys are plain lowercase ASCII. The broker's JSON decoder matches
 * field names case-insensitively, with Unicode folding (`DELIVER_SUBJECT`, or a long s for
 * an `s`, would still set `deliver_subject`), so any other key is refused rather than checked.
 */
export function plainKeys(v: unknown, what: string): Record<string, unknown> {
  if (typeof v !== "object" || v === null || Array.isArray(v)) refuse(`${what} is not an object`);
  for (const k of Object.keys(v)) {
    if (!/^[a-z0-9_]+$/.test(k)) refuse(`${what} has a field name that is not lowercase ASCII`);
  }
  return v as Record<string, unknown>;
}

/** Why the guard ends a connection (caught where a chunk is pushed). */
export class Refusal extends Error {}

/** Ends the connection with `why`. */
export function refuse(why: string): never {
  throw new Refusal(why);
}

/** A CONNECT's `sig` (base64url or base64, as clients send it) as bytes; empty when unreadable. */
export function signatureBytes(sig: unknown): Uint8Array {
  if (typeof sig !== "string" || sig.length > 128) return new Uint8Array();
  try {
    const b64 = sig.replace(/-/g, "+").replace(/_/g, "/").replace(/=+$/, "");
    const bin = atob(b64 + "=".repeat((4 - b64.length % 4) % 4));
    return Uint8Array.from(bin, (c) => c.charCodeAt(0));
  } catch {
    return new Uint8Array();
  }
}

/** The CONNECT options as an object (or the connection ends). */
export function connectObject(text: string): Record<string, unknown> {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    refuse("CONNECT is not followed by JSON");
  }
  // The broker reads CONNECT's field names in any case (the last spelling wins), so a `Jwt`
  // beside the `jwt` the guard checked would be what it uses: only the plain spelling passes.
  return plainKeys(v, "CONNECT");
}

/** The bytes of `parts`, joined in one buffer. */
export function concatAll(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/**
 * One line as text: byte for byte (Latin-1) for the short lines of PUB and SUB, whose tokens
 * must be printable ASCII anyway; UTF-8 for a CONNECT, whose JSON may carry any text.
 */
export function lineText(bytes: Uint8Array): string {
  if (bytes.length > 4096 || (bytes.length >= 7 && (bytes[0] | 0x20) === 0x63)) {
    return new TextDecoder().decode(bytes);
  }
  return String.fromCharCode.apply(null, bytes as unknown as number[]);
}
