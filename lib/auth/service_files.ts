/**
 * Where the auth service keeps its non-secret state and its discovery file under a `.cotal`
 * root, and the discovery file itself: `auth-service.json` `{ver, space, url, pid, cap}`,
 * 0600, written last (after the callout is flushed and the listener is up) and removed on
 * exit. Its `cap` is the exchange capability, so only processes that can read the file can
 * exchange tokens.
 *
 * @module
 */

import { CotalError } from "../errors.ts";
import { spaceKeyHex } from "../workspace/mod.ts";
import { isPlainObject } from "./jwks.ts";

/** The discovery file's name. */
export const AUTH_SERVICE_FILE = "auth-service.json";

/** The auth service's paths under a root. */
export interface AuthServicePaths {
  /** The IdP pin and the actor ledger (a filesystem store root): `<root>/secrets/auth-service`. */
  stateDir: string;
  /** `<root>/run/space.<hex>/auth-service.json`. */
  discoveryFile: string;
}

/** The paths of `space`'s auth service under the `.cotal` root `root`. */
export function authServicePaths(root: string, space: string): AuthServicePaths {
  const r = root.replace(/\/+$/, "");
  return {
    stateDir: `${r}/secrets/auth-service`,
    discoveryFile: `${r}/run/space.${spaceKeyHex(space)}/${AUTH_SERVICE_FILE}`,
  };
}

/**
 * Where `space`'s auth service reads its IdP pin and actor ledger under the `.cotal` root
 * `root` (the specification's name; the same as `authServicePaths(root, space).stateDir`). A host
 * running `runAuthService` provisions those there first.
 *
 * @example
 * ```ts
 * import { findCotalRoot, userAuthStateDir } from "@cotal/deno";
 * const dir = userAuthStateDir(findCotalRoot(), "team");
 * ```
 */
export function userAuthStateDir(root: string, space: string): string {
  return authServicePaths(root, space).stateDir;
}

/**
 * The `.cotal` root a process works in when none is named: `<cwd>/.cotal`, where `cotal up`
 * (without `--root`) and the daemons it starts keep their state.
 *
 * @example
 * ```ts
 * import { findCotalRoot } from "@cotal/deno";
 * console.log(findCotalRoot()); // e.g. /home/me/project/.cotal
 * ```
 */
export function findCotalRoot(cwd: string = Deno.cwd()): string {
  return `${cwd.replace(/\/+$/, "")}/.cotal`;
}

/** What a running auth service publishes to local clients. */
export interface AuthServiceDiscovery {
  /** Always 1. */
  ver: 1;
  /** The space the service serves. */
  space: string;
  /** `http://127.0.0.1:<port>`: the loopback face. */
  url: string;
  /** The service's process id. */
  pid: number;
  /** The exchange capability (`Authorization: Bearer <cap>`). Secret. */
  cap: string;
}

/** Write the discovery file atomically with mode 0600 (its directory 0700). */
export async function writeDiscoveryFile(path: string, rec: AuthServiceDiscovery): Promise<void> {
  const dir = path.slice(0, path.lastIndexOf("/"));
  await Deno.mkdir(dir, { recursive: true, mode: 0o700 });
  await Deno.chmod(dir, 0o700);
  const tmp = `${path}.${crypto.randomUUID()}.tmp`;
  try {
    // createNew (O_EXCL) never writes through a planted file or link; chmod beats the umask.
    await Deno.writeTextFile(tmp, JSON.stringify(rec), { createNew: true, mode: 0o600 });
    await Deno.chmod(tmp, 0o600);
    await Deno.rename(tmp, path);
  } finally {
    await Deno.remove(tmp).catch(() => {});
  }
}

/** Remove the discovery file if it is still ours (names `cap`); a successor's file is kept. */
export async function removeDiscoveryFile(path: string, cap?: string): Promise<void> {
  if (cap !== undefined) {
    const rec = await readDiscoveryFile(path).catch(() => undefined);
    if (rec && rec.cap !== cap) return;
  }
  await Deno.remove(path).catch((err) => {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
  });
}

/**
 * Read a discovery file; `undefined` when absent. A file that is not one (or is not a regular
 * file) is refused with `auth_service_discovery_malformed`. Existence is not readiness: probe
 * `GET <url>/health` too, since a crashed service may have left its file behind.
 *
 * @example
 * ```ts
 * const d = await readDiscoveryFile(authServicePaths(root, "team").discoveryFile);
 * if (d) await fetch(`${d.url}/health`);
 * ```
 */
export async function readDiscoveryFile(path: string): Promise<AuthServiceDiscovery | undefined> {
  let text: string;
  try {
    const info = await Deno.lstat(path);
    if (!info.isFile) throw malformed(path);
    text = await Deno.readTextFile(path);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return undefined;
    throw err;
  }
  let rec: unknown;
  try {
    rec = JSON.parse(text);
  } catch {
    throw malformed(path);
  }
  const ok = isPlainObject(rec) && rec.ver === 1 && typeof rec.space === "string" &&
    typeof rec.url === "string" && /^http:\/\/(127\.0\.0\.1|\[::1\]):\d+$/.test(rec.url) &&
    Number.isSafeInteger(rec.pid) && typeof rec.cap === "string" && /^[0-9a-f]{64}$/.test(rec.cap);
  if (!ok) throw malformed(path);
  return rec as unknown as AuthServiceDiscovery;
}

function malformed(path: string): CotalError {
  return new CotalError(
    "auth_service_discovery_malformed",
    `${path} is not an auth-service discovery file; remove it and restart the auth service.`,
  );
}
