/**
 * `FsSecretStore`: the filesystem `SecretStore`. One file per key under a root directory,
 * directories 0700 (or setgid with no access for others, shared with a group on purpose) and
 * files 0600 whatever the process umask, writes atomic by temp file +
 * fsync + rename, and every path component checked with `lstat` so no key resolves through
 * a symlink planted under the root.
 *
 * Residual risk: the checks and the open are separate system calls (Deno has no `openat` or
 * `O_NOFOLLOW`), so a process that can already write inside the root could swap a directory
 * for a symlink between them. The root is 0700, so that process needs the store owner's uid.
 *
 * @module
 */

import { CotalError } from "../errors.ts";
import { checkStoreKey, describeKey, TEMP_PREFIX } from "./store_key.ts";
import type { SecretStore } from "./types.ts";

const DIR_MODE = 0o700;
const FILE_MODE = 0o600;
/** The group bits of a file shared read-only with the store's group (0640). */
const SHARED_FILE_GROUP = 0o040;

type Located = { readonly path: string; readonly dir: string; readonly exists: boolean };

function ioError(action: string, key: string, err: unknown): CotalError {
  // The OS message names the path and the errno, never the value being written.
  const why = err instanceof Error ? err.message : String(err);
  return new CotalError(
    "store_io",
    `Could not ${action} secret-store key ${
      describeKey(key)
    } (${why}); check the store directory's owner, permissions and free space.`,
    { cause: err },
  );
}

function symlinkError(key: string, component: string): CotalError {
  return new CotalError(
    "store_symlink",
    `Secret-store key ${describeKey(key)} resolves through the symlink ${
      JSON.stringify(component)
    }; remove the link and keep real directories and files under the store root.`,
  );
}

async function lstatOrNull(path: string): Promise<Deno.FileInfo | null> {
  try {
    return await Deno.lstat(path);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return null;
    throw err;
  }
}

/**
 * Whether a directory's mode is one an operator chose to share it with the store's group: the
 * setgid bit (no umask sets it) and nothing for others. systemd hosts lay the store out so
 * (lib/mesh/systemd.ts: the supervisor and the signer, `cotal-store`, 2710 and 2770).
 */
function sharedOnPurpose(mode: number): boolean {
  return (mode & 0o2000) !== 0 && (mode & 0o007) === 0;
}

/**
 * Tighten a directory Cotal owns to 0700 (a permissive umask or an older tool may have widened
 * it), unless the operator shares it with the store's group on purpose.
 */
async function hardenDir(path: string, info: Deno.FileInfo): Promise<void> {
  if (info.mode === null || (info.mode & 0o777) === DIR_MODE || sharedOnPurpose(info.mode)) {
    return;
  }
  await Deno.chmod(path, DIR_MODE);
}

async function syncDir(dir: string): Promise<void> {
  // The rename is durable only once the directory entry itself is on disk.
  using handle = await Deno.open(dir, { read: true });
  await handle.sync();
}

async function writeAll(file: Deno.FsFile, bytes: Uint8Array): Promise<void> {
  let offset = 0;
  while (offset < bytes.length) {
    const n = await file.write(bytes.subarray(offset));
    if (n <= 0) throw new Error("the file accepted no bytes");
    offset += n;
  }
}

/** The filesystem `SecretStore`; keys map to files under `root` byte for byte. */
export class FsSecretStore implements SecretStore {
  /** The directory every key lives under (absolute). */
  readonly root: string;

  /** A store rooted at `root`; a relative root resolves against the working directory now. */
  constructor(root: string) {
    if (typeof root !== "string" || root.length === 0 || root.includes("\0")) {
      throw new CotalError(
        "store_bad_root",
        "The secret-store root is empty or contains NUL; pass the directory that holds the secrets.",
      );
    }
    const absolute = root.startsWith("/") ? root : `${Deno.cwd()}/${root}`;
    this.root = absolute.length > 1 ? absolute.replace(/\/+$/, "") : absolute;
  }

  /** Read `key`; `undefined` when absent. */
  async get(key: string): Promise<string | undefined> {
    const at = await this.#locate(key, false);
    if (at === null || !at.exists) return undefined;
    try {
      return await Deno.readTextFile(at.path);
    } catch (err) {
      if (err instanceof Deno.errors.NotFound) return undefined;
      throw ioError("read", key, err);
    }
  }

  /** Replace `key` atomically: readers see the old value or the new one, never a mix. */
  async put(key: string, value: string): Promise<void> {
    const at = await this.#locate(key, true);
    if (at === null) throw new Error("unreachable: locate with create returned null");
    await this.#writeTemp(key, at, value, async (tmp) => {
      await Deno.rename(tmp, at.path);
      return true;
    });
  }

  /** Write `key` only if absent; `false` when it already exists (including a concurrent win). */
  async create(key: string, value: string): Promise<boolean> {
    const at = await this.#locate(key, true);
    if (at === null) throw new Error("unreachable: locate with create returned null");
    if (at.exists) return false;
    return await this.#writeTemp(key, at, value, async (tmp) => {
      // link(2) fails when the name exists, so creation is atomic and the new file appears
      // with its full content already in place.
      try {
        await Deno.link(tmp, at.path);
      } catch (err) {
        if (err instanceof Deno.errors.AlreadyExists) return false;
        throw err;
      }
      await Deno.remove(tmp);
      return true;
    });
  }

  /** Remove `key`; absent is success. */
  async delete(key: string): Promise<void> {
    const at = await this.#locate(key, false);
    if (at === null || !at.exists) return;
    try {
      await Deno.remove(at.path);
      await syncDir(at.dir);
    } catch (err) {
      if (err instanceof Deno.errors.NotFound) return;
      throw ioError("delete", key, err);
    }
  }

  async #writeTemp(
    key: string,
    at: Located,
    value: string,
    commit: (tmp: string) => Promise<boolean>,
  ): Promise<boolean> {
    const tmp = `${at.dir}/${TEMP_PREFIX}${crypto.randomUUID()}`;
    let file: Deno.FsFile | undefined;
    try {
      // createNew is O_EXCL: it never follows or reuses an existing name.
      file = await Deno.open(tmp, { write: true, createNew: true, mode: FILE_MODE });
      // The umask can only remove bits from FILE_MODE; chmod makes the mode exact.
      await Deno.chmod(tmp, FILE_MODE);
      await writeAll(file, new TextEncoder().encode(value));
      await file.sync();
      file.close();
      file = undefined;
      const final = await lstatOrNull(at.path);
      if (final?.isSymlink) throw symlinkError(key, key);
      // A file the operator shared read-only with the store's group, in a directory shared on
      // purpose, stays readable by that group when replaced (under systemd the signer re-signs
      // the supervisor's cred, which the supervisor reads as a member).
      if (final?.isFile && final.mode !== null && (final.mode & 0o077) === SHARED_FILE_GROUP) {
        const dir = await Deno.lstat(at.dir);
        if (dir.mode !== null && sharedOnPurpose(dir.mode)) await Deno.chmod(tmp, 0o640);
      }
      const done = await commit(tmp);
      await syncDir(at.dir);
      return done;
    } catch (err) {
      if (err instanceof CotalError) throw err;
      throw ioError("write", key, err);
    } finally {
      try {
        file?.close();
      } catch { /* already closed */ }
      // After a rename or link+unlink the name is gone and this is a no-op; after a failure it
      // removes the partial temp so nothing is left behind.
      await Deno.remove(tmp).catch(() => {});
    }
  }

  /**
   * Resolve `key` to a path, refusing symlinks and non-directories on the way. With `create`,
   * missing directories are made 0700 (and existing ones tightened); without it, a missing
   * directory means the key is absent (`null`).
   */
  async #locate(key: string, create: boolean): Promise<Located | null> {
    const segments = checkStoreKey(key);
    try {
      if (!(await this.#ensureRoot(create))) return null;
      let dir = this.root;
      for (let i = 0; i < segments.length - 1; i++) {
        dir = `${dir}/${segments[i]}`;
        const component = segments.slice(0, i + 1).join("/");
        let info = await lstatOrNull(dir);
        if (info === null) {
          if (!create) return null;
          try {
            await Deno.mkdir(dir, { mode: DIR_MODE });
          } catch (err) {
            if (!(err instanceof Deno.errors.AlreadyExists)) throw err;
          }
          info = await Deno.lstat(dir);
        }
        if (info.isSymlink) throw symlinkError(key, component);
        if (!info.isDirectory) {
          throw new CotalError(
            "store_not_dir",
            `Secret-store key ${describeKey(key)} needs ${
              JSON.stringify(component)
            } to be a directory, but it is a file; move that file away.`,
          );
        }
        if (create) await hardenDir(dir, info);
      }
      const path = `${dir}/${segments[segments.length - 1]}`;
      const info = await lstatOrNull(path);
      if (info?.isSymlink) throw symlinkError(key, key);
      if (info !== null && !info.isFile) {
        throw new CotalError(
          "store_not_file",
          `Secret-store key ${
            describeKey(key)
          } names something that is not a regular file; remove it.`,
        );
      }
      return { path, dir, exists: info !== null };
    } catch (err) {
      if (err instanceof CotalError) throw err;
      throw ioError(create ? "prepare" : "look up", key, err);
    }
  }

  async #ensureRoot(create: boolean): Promise<boolean> {
    // The root itself may be a symlink the operator chose (e.g. onto a mounted volume), so it
    // is stat-ed, not lstat-ed; only components under it are held to the no-symlink rule.
    let info: Deno.FileInfo;
    try {
      info = await Deno.stat(this.root);
    } catch (err) {
      // A reader granted only its own key's directory (the delivery daemon's permission row)
      // may not stat the root; the lstat of every component below still guards the path.
      if (!create && err instanceof Deno.errors.NotCapable) return true;
      if (!(err instanceof Deno.errors.NotFound)) throw err;
      if (!create) return false;
      await Deno.mkdir(this.root, { recursive: true, mode: DIR_MODE });
      info = await Deno.stat(this.root);
    }
    if (!info.isDirectory) {
      throw new CotalError(
        "store_bad_root",
        `The secret-store root ${
          JSON.stringify(this.root)
        } is not a directory; point the store at a directory.`,
      );
    }
    if (create) await hardenDir(this.root, info);
    return true;
  }
}

/**
 * The workspace default store: an {@linkcode FsSecretStore} at `<root>/secrets`, where `root` is
 * the `.cotal` state directory.
 */
export function workspaceSecretStore(root: string): FsSecretStore {
  if (typeof root !== "string" || root.length === 0) {
    throw new CotalError(
      "store_bad_root",
      "The workspace root is empty; pass the .cotal state directory.",
    );
  }
  return new FsSecretStore(`${root.replace(/\/+$/, "")}/secrets`);
}
