/**
 * Writing a file whole or not at all. Each write goes to a temp file in the target's own
 * directory (created exclusively, with its final mode), then is renamed over the target; on any
 * failure the temp file is removed, so no half-written file, and no copy of a secret under
 * another name, is ever left behind. Filesystem errors become one sentence with a stable code.
 *
 * @module
 */
import { CotalError } from "./errors.ts";

/** Options of {@linkcode writeFileAtomic}. */
export interface AtomicWriteOptions {
  /** The file's mode (default 0600: most of what Cotal writes is private). */
  mode?: number;
  /** Refuse (`file_exists`) when the target exists; default: replace it. */
  noClobber?: boolean;
  /** How the target is named in errors (e.g. "--out"); default: "the file". */
  what?: string;
}

function parentOf(path: string): string {
  const i = path.lastIndexOf("/");
  return i < 0 ? "." : i === 0 ? "/" : path.slice(0, i);
}

/** One sentence for a filesystem error while writing `path`. */
export function writeError(path: string, what: string, err: unknown): CotalError {
  const p = JSON.stringify(path);
  if (err instanceof Deno.errors.NotFound) {
    return new CotalError(
      "dir_missing",
      `${what} ${p} is in a directory that does not exist; create it first (mkdir -p ${
        JSON.stringify(parentOf(path))
      }).`,
    );
  }
  if (err instanceof Deno.errors.PermissionDenied) {
    return new CotalError("permission_denied", `${what} ${p} cannot be written by this user.`);
  }
  if (err instanceof Deno.errors.IsADirectory) {
    return new CotalError("is_directory", `${what} ${p} is a directory; name a file.`);
  }
  if (err instanceof Deno.errors.NotADirectory) {
    return new CotalError(
      "not_directory",
      `${what} ${p} has a file where a directory should be in its path; fix the path.`,
    );
  }
  const text = String((err as Error)?.message ?? err);
  if (/no space left|ENOSPC|os error 28/i.test(text)) {
    return new CotalError(
      "disk_full",
      `${what} ${p} could not be written: its filesystem is full; free some space and retry.`,
    );
  }
  if (/read-only file system|os error 30/i.test(text)) {
    return new CotalError("read_only", `${what} ${p} is on a read-only filesystem.`);
  }
  return new CotalError("write_failed", `${what} ${p} could not be written (${text}).`);
}

/** Writes `data` to `path` atomically (see the module doc). */
export async function writeFileAtomic(
  path: string,
  data: string | Uint8Array,
  opts: AtomicWriteOptions = {},
): Promise<void> {
  const what = opts.what ?? "The file";
  const existing = await Deno.lstat(path).catch(() => undefined);
  if (existing?.isDirectory) throw writeError(path, what, new Deno.errors.IsADirectory());
  if (existing && opts.noClobber) {
    throw new CotalError(
      "file_exists",
      `${what} ${JSON.stringify(path)} already exists; remove it or name another file.`,
    );
  }
  const tmp = `${parentOf(path)}/.${
    path.slice(path.lastIndexOf("/") + 1)
  }.tmp-${crypto.randomUUID()}`;
  const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
  try {
    await Deno.writeFile(tmp, bytes, { mode: opts.mode ?? 0o600, createNew: true });
    // The mode is set at creation through the umask; make it exact.
    await Deno.chmod(tmp, opts.mode ?? 0o600);
    await Deno.rename(tmp, path);
  } catch (err) {
    await Deno.remove(tmp).catch(() => {});
    throw writeError(path, what, err);
  }
}

/**
 * Makes sure `path` is a regular file of this user before something opens it by name and
 * follows links (a shell redirection, a lock): created empty (0600, exclusively, so a link
 * planted there is never followed) when missing; refused (`file_not_own`) when it is a link,
 * not a regular file, or another user's. In a sticky shared dir (a systemd host's `run/` and
 * `logs/`) nobody else can then replace it.
 */
export async function ensureOwnFile(path: string, what = "The file"): Promise<void> {
  try {
    (await Deno.open(path, { write: true, createNew: true, mode: 0o600 })).close();
    return;
  } catch (err) {
    if (!(err instanceof Deno.errors.AlreadyExists)) throw writeError(path, what, err);
  }
  const st = await Deno.lstat(path).catch((err) => {
    throw writeError(path, what, err);
  });
  const uid = ownUid();
  if (!st.isFile || (uid !== null && st.uid !== uid)) {
    throw new CotalError(
      "file_not_own",
      `${what} ${JSON.stringify(path)} is ${
        st.isSymlink ? "a link" : !st.isFile ? "not a regular file" : "another user's file"
      }, which this user will not open there; remove it and retry.`,
    );
  }
}

/** This process's uid, or null where it cannot be known (no `--allow-sys=uid` in its row). */
function ownUid(): number | null {
  try {
    return Deno.uid();
  } catch {
    return null;
  }
}
