/**
 * Proof, on this machine, that a lease's previous holder is dead. A daemon holds an exclusive
 * `flock` on its lock file for its whole life and writes a fresh random id into it; the id goes
 * into its broker lease row too. The kernel drops the flock when the process dies (kill -9
 * included), so a successor that gets the flock and finds the lease row carrying the id still
 * in the file knows that row's holder is gone, and may take the lease over at once instead of
 * waiting out its TTL. A row with any other id (a live holder, another machine) proves nothing.
 *
 * @module
 */
import { ensureOwnFile } from "../atomic_file.ts";
import { CotalError, isCotalError } from "../errors.ts";

/** A held (or, while a live process holds it, not yet held) lock file. */
export class HolderLock {
  readonly path: string;
  /** This process's id, written into the file once the flock is ours. */
  readonly id: string = crypto.randomUUID();
  #file: Deno.FsFile;
  #held = false;
  #previous?: string;

  private constructor(path: string, file: Deno.FsFile) {
    this.path = path;
    this.#file = file;
  }

  /**
   * Opens (creating, 0600) the lock file and tries to take the flock once. The file must be a
   * regular file of this user, checked before and after the open: in a shared run dir another
   * user could have planted a link there, and the holder truncates what it opens.
   */
  static async open(path: string): Promise<HolderLock> {
    let file: Deno.FsFile;
    try {
      await ensureOwnFile(path, "The lock file");
      file = await Deno.open(path, { read: true, write: true, mode: 0o600 });
    } catch (err) {
      if (isCotalError(err, "file_not_own")) {
        throw new CotalError("holder_lock_unsafe", err.message);
      }
      throw new CotalError(
        "holder_lock_unavailable",
        `Cannot open the lock file ${path} (${(err as Error).name}); check its directory exists ` +
          `and this daemon may write it.`,
      );
    }
    const [opened, named] = await Promise.all([file.stat(), Deno.lstat(path).catch(() => null)]);
    if (!named?.isFile || named.ino !== opened.ino || named.dev !== opened.dev) {
      file.close();
      throw new CotalError(
        "holder_lock_unsafe",
        `The lock file ${JSON.stringify(path)} changed while it was opened (a link swapped in); ` +
          `remove it and retry.`,
      );
    }
    const lock = new HolderLock(path, file);
    await lock.tryTake();
    return lock;
  }

  /** True once this process holds the flock. */
  get held(): boolean {
    return this.#held;
  }

  /**
   * The id the file held when this process took the flock: the last holder's, dead now. Only
   * set once {@linkcode held}.
   */
  get previous(): string | undefined {
    return this.#previous;
  }

  /** Takes the flock if no live process holds it; then records this process's id. */
  async tryTake(): Promise<boolean> {
    if (this.#held) return true;
    if (!(await this.#file.tryLock(true))) return false;
    this.#held = true;
    const text = await this.#readAll();
    this.#previous = /^[0-9a-f-]{36}$/.test(text.trim()) ? text.trim() : undefined;
    await this.#file.truncate(0);
    await this.#file.seek(0, Deno.SeekMode.Start);
    await this.#file.write(new TextEncoder().encode(this.id + "\n"));
    return true;
  }

  /**
   * True when a lease row carrying `rowId` was written by a holder proven dead: this process
   * holds the flock and the row's id is the one the file held when it was taken.
   */
  provesDead(rowId: unknown): boolean {
    return this.#held && typeof rowId === "string" && rowId === this.#previous;
  }

  async #readAll(): Promise<string> {
    await this.#file.seek(0, Deno.SeekMode.Start);
    const buf = new Uint8Array(128);
    const n = await this.#file.read(buf);
    return new TextDecoder().decode(buf.subarray(0, n ?? 0));
  }

  /** Drops the flock (the file stays: its id names this process as the last holder). */
  close(): void {
    try {
      this.#file.close();
    } catch {
      // Already closed.
    }
    this.#held = false;
  }
}
