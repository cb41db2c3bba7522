/**
 * The secret-store seam. Every credential and signing record a Cotal daemon reads or writes
 * goes through one of these, so a hosted composition can swap the filesystem for its own
 * backend (KMS, Vault, a database) without touching daemon code.
 *
 * `get` hands raw bytes into process memory: this is a blob seam, not a remote signer.
 *
 * Contract:
 * - `get(key)` resolves `undefined` when the key is absent; a rejection means refusal
 *   (bad key, unsafe path, I/O failure), never absence.
 * - `put(key, value)` replaces the whole value atomically: a concurrent reader sees the old
 *   value or the new one, never a torn mix. Daemons re-read creds while running, so this matters.
 * - `create(key, value)`, when the store has it, writes only when the key is absent and
 *   resolves `false` otherwise; of two concurrent creators exactly one sees `true`. A store
 *   of only `get`, `put` and `delete` (the specification's) works too: Cotal then reads and
 *   puts, and re-reads what stayed.
 * - `delete(key)` is idempotent (absent is success). It is not shredding and not revocation.
 *
 * @module
 */

/** A store of named secret blobs; see the module doc for the contract every backend keeps. */
export interface SecretStore {
  /** The value at `key`, or undefined. */
  get(key: string): Promise<string | undefined>;
  /** Replaces the value at `key` atomically. */
  put(key: string, value: string): Promise<void>; // atomic replace
  /**
   * Writes `key` only if absent; false when it exists. Optional: without it Cotal reads then
   * puts (see `createOnce`), which is exact within one process.
   */
  create?(key: string, value: string): Promise<boolean>;
  /** Removes `key` (absent is fine). */
  delete(key: string): Promise<void>;
}
