/**
 * Byte helpers shared by the readers that collect a bounded body in chunks.
 *
 * @module
 */

/** The chunks as one array, in order. */
export function concatBytes(chunks: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(chunks.reduce((n, c) => n + c.byteLength, 0));
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.byteLength;
  }
  return out;
}
