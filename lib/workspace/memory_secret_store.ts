/**
 * `MemorySecretStore`: a `SecretStore` held in a `Map`, for tests and embedders that keep
 * secrets elsewhere and only need the seam. It accepts exactly the keys `FsSecretStore` does.
 *
 * @module
 */

import { checkStoreKey } from "./store_key.ts";
import type { SecretStore } from "./types.ts";

/** An in-process `SecretStore`; values live only as long as the object. */
export class MemorySecretStore implements SecretStore {
  readonly #values = new Map<string, string>();

  /** A store pre-filled with `entries` (each key is validated). */
  constructor(entries?: Iterable<readonly [string, string]>) {
    for (const [key, value] of entries ?? []) {
      checkStoreKey(key);
      this.#values.set(key, value);
    }
  }

  /** Read `key`; `undefined` when absent. */
  get(key: string): Promise<string | undefined> {
    return Promise.resolve().then(() => {
      checkStoreKey(key);
      return this.#values.get(key);
    });
  }

  /** Replace `key`. */
  put(key: string, value: string): Promise<void> {
    return Promise.resolve().then(() => {
      checkStoreKey(key);
      this.#values.set(key, value);
    });
  }

  /** Write `key` only if absent; `false` when it exists. */
  create(key: string, value: string): Promise<boolean> {
    return Promise.resolve().then(() => {
      checkStoreKey(key);
      if (this.#values.has(key)) return false;
      this.#values.set(key, value);
      return true;
    });
  }

  /** Remove `key`; absent is success. */
  delete(key: string): Promise<void> {
    return Promise.resolve().then(() => {
      checkStoreKey(key);
      this.#values.delete(key);
    });
  }

  /** The keys currently held, sorted (for tests and diagnostics; values are not exposed). */
  keys(): string[] {
    return [...this.#values.keys()].sort();
  }
}
