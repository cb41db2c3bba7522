/**
 * A faster read path for the state the callout consults on every connect (the actor ledger),
 * without caching it: each `get` still reads the file, synchronously (a few µs, against a
 * thread-pool round trip for each of the filesystem store's lstat checks). When the bytes
 * equal those of the last checked read they are returned as they are; anything else takes the
 * full {@linkcode FsSecretStore} path (every component lstat-ed, symlinks refused). A revoke is
 * therefore seen by the very next connect, exactly as with the plain store.
 *
 * @module
 */

import type { FsSecretStore, SecretStore } from "../workspace/mod.ts";
import { checkStoreKey, createOnce } from "../workspace/mod.ts";

/** Wrap `store` so repeated reads of unchanged keys skip the per-component checks. */
export function freshReadStore(store: FsSecretStore): SecretStore {
  const checked = new Map<string, string>();
  return {
    async get(key) {
      const path = `${store.root}/${checkStoreKey(key).join("/")}`;
      const known = checked.get(key);
      if (known !== undefined) {
        try {
          if (Deno.lstatSync(path).isFile && Deno.readTextFileSync(path) === known) return known;
        } catch {
          // Gone or unreadable: the full path decides (absent, or a refusal).
        }
      }
      checked.delete(key);
      const value = await store.get(key);
      if (value !== undefined) checked.set(key, value);
      return value;
    },
    async put(key, value) {
      checked.delete(key);
      await store.put(key, value);
    },
    async create(key, value) {
      checked.delete(key);
      return await createOnce(store, key, value);
    },
    async delete(key) {
      checked.delete(key);
      await store.delete(key);
    },
  };
}
