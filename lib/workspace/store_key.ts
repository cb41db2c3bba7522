/**
 * Store-key syntax shared by every `SecretStore` implementation here, so a key the
 * in-memory store accepts is one the filesystem store accepts too.
 *
 * @module
 */

import { CotalError } from "../errors.ts";

/** Prefix of the temp siblings `FsSecretStore` writes; no key may name one. */
export const TEMP_PREFIX = ".cotal-tmp-";

/** Longest key accepted, in UTF-16 code units; far above any key Cotal builds. */
const MAX_KEY_LENGTH = 1024;

/** A key rendered for an error message: escaped, and cut short so a huge key cannot flood logs. */
export function describeKey(key: string): string {
  const shown = key.length > 120 ? `${key.slice(0, 120)}...` : key;
  return JSON.stringify(shown);
}

function refuse(key: string, why: string): never {
  throw new CotalError(
    "store_bad_key",
    `Secret-store key ${
      describeKey(key)
    } ${why}; use a relative key such as "space.<hex>/delivery.creds".`,
  );
}

/**
 * Validate a store key and return its `/`-separated segments. Refuses empty keys, NUL,
 * backslashes, absolute keys, empty, `.` and `..` segments, and temp-file names, each as a
 * {@linkcode CotalError} with code `store_bad_key`.
 */
export function checkStoreKey(key: string): string[] {
  if (typeof key !== "string" || key.length === 0) refuse(String(key), "is empty");
  if (key.length > MAX_KEY_LENGTH) refuse(key, `is longer than ${MAX_KEY_LENGTH} characters`);
  if (key.includes("\0")) refuse(key, "contains a NUL character");
  // A backslash is a separator on Windows and an ordinary byte on POSIX: refusing it keeps a
  // key naming the same file everywhere.
  if (key.includes("\\")) refuse(key, "contains a backslash");
  if (key.startsWith("/")) refuse(key, "is absolute");
  const segments = key.split("/");
  for (const segment of segments) {
    if (segment === "") refuse(key, "has an empty path segment");
    if (segment === "." || segment === "..") refuse(key, `has a "${segment}" segment`);
  }
  if (segments[segments.length - 1].startsWith(TEMP_PREFIX)) {
    refuse(key, `names a temporary file (prefix "${TEMP_PREFIX}")`);
  }
  return segments;
}
