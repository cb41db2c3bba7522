/**
 * The store's own health, beside its creds' (doctor.ts): every file and directory private to
 * its owner (0600 and 0700; `--fix` tightens them), no symlink anywhere, and every record a
 * daemon relies on readable: the broker record, each space's account record, and its
 * membership feed config when present.
 *
 * @module
 */
import { CotalError } from "../errors.ts";
import { discoverSpaces } from "./doctor.ts";
import type { FsSecretStore } from "./fs_secret_store.ts";
import { membershipConfigKey, spaceKeyHex } from "./keys.ts";
import { getSpaceAuth } from "./space_auth.ts";

/** One thing wrong with the store. */
export interface StoreProblem {
  /** The path under the store root (`auth/broker.json`, `space.<hex>/...`). */
  readonly path: string;
  /** A stable code: `loose_mode`, `symlink`, `record_unreadable`. */
  readonly code: string;
  /** One sentence: what is wrong and what fixes it. */
  readonly message: string;
  /** With `fix`: whether it was fixed. */
  fixed?: boolean;
}

async function walk(root: string, rel: string, out: StoreProblem[], fix: boolean): Promise<void> {
  const path = rel ? `${root}/${rel}` : root;
  const st = await Deno.lstat(path);
  if (st.isSymlink) {
    out.push({
      path: rel,
      code: "symlink",
      message: `${rel} is a symlink; the store holds only real files and directories: remove it.`,
    });
    return;
  }
  const want = st.isDirectory ? 0o700 : 0o600;
  const mode = (st.mode ?? 0) & 0o777;
  if (mode & 0o077) {
    const p: StoreProblem = {
      path: rel || ".",
      code: "loose_mode",
      message: `${rel || "the store"} has mode ${mode.toString(8).padStart(4, "0")}; ` +
        `others may read it (want ${want.toString(8).padStart(4, "0")}).`,
    };
    if (fix) {
      p.fixed = await Deno.chmod(path, want).then(() => true, () => false);
    }
    out.push(p);
  }
  if (st.isDirectory) {
    for await (const e of Deno.readDir(path)) {
      await walk(root, rel ? `${rel}/${e.name}` : e.name, out, fix);
    }
  }
}

/** Checks (and with `fix`, tightens) the file store under `root`; see the module doc. */
export async function doctorStore(
  store: FsSecretStore,
  opts: { fix?: boolean } = {},
): Promise<StoreProblem[]> {
  const out: StoreProblem[] = [];
  if (!(await Deno.lstat(store.root).catch(() => undefined))) return out;
  await walk(store.root, "", out, opts.fix === true);
  // An account record that names no space (or another one) is found by no space: name it here.
  const spaces = await discoverSpaces(store);
  const known = new Set(spaces.map((s) => `account.${spaceKeyHex(s)}.json`));
  const authDir = await Array.fromAsync(Deno.readDir(`${store.root}/auth`)).catch(() => []);
  for (const e of authDir) {
    if (/^account\.[0-9a-f]{32}\.json$/.test(e.name) && !known.has(e.name)) {
      out.push({
        path: `auth/${e.name}`,
        code: "record_unreadable",
        message: `The account record auth/${e.name} is not a space's account record (unreadable ` +
          `or naming another space); restore it from a backup (cotal space restore).`,
      });
    }
  }
  for (const space of spaces) {
    let accountPub: string | undefined;
    try {
      accountPub = (await getSpaceAuth(store, space)).account.pub;
    } catch (err) {
      out.push({
        path: `auth (space ${space})`,
        code: "record_unreadable",
        message: `The signer records of space '${space}' cannot be used: ${
          err instanceof CotalError ? err.message : String(err)
        }`,
      });
    }
    const key = membershipConfigKey(space, { injected: true });
    const text = await store.get(key).catch(() => null);
    if (text === undefined) continue;
    let ok = false;
    try {
      const c = JSON.parse(text ?? "");
      ok = typeof c?.accountId === "string" && (!accountPub || c.accountId === accountPub);
    } catch {
      ok = false;
    }
    if (!ok) {
      out.push({
        path: key,
        code: "record_unreadable",
        message: `The membership feed config of space '${space}' (${key}) is not JSON naming ` +
          `the space's account; run 'cotal up' to write it again.`,
      });
    }
  }
  return out;
}
