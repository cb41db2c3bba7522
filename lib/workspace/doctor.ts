/**
 * `doctorAuth`: the health of every credential a workspace store holds, and the one repair
 * that needs no network: re-signing the daemon creds under authority continuity.
 *
 * @module
 */

import { CotalError } from "../errors.ts";
import { decodeJwt, parseCreds } from "../nats/mod.ts";
import { RENEW_FRACTION } from "../trust/mod.ts";
import { FsSecretStore, workspaceSecretStore } from "./fs_secret_store.ts";
import {
  CONNECTION_EVICTOR_CREDS_KIND,
  DELIVERY_CREDS_KIND,
  MEMBERSHIP_OBSERVER_CREDS_KIND,
  MEMBERSHIP_RW_CREDS_KIND,
  spaceKeyHex,
  spaceSecretKey,
  supervisorCredsKey,
} from "./keys.ts";
import { remintDaemonCreds, type RemintResult } from "./renewal.ts";
import { TEMP_PREFIX } from "./store_key.ts";
import { BROKER_AUTH_KEY } from "./trust_keys.ts";
import type { SecretStore } from "./types.ts";

/** A cred's health: past 75 % of its life is `near-expiry` (its renewal owner is late). */
export type CredHealth =
  | "healthy"
  | "near-expiry"
  | "expired"
  | "unbounded"
  | "unreadable"
  | "missing"
  | "foreign";

/** The states that make a cred (and `status`, `doctor auth`) fail: its daemon cannot use it. */
export function isFailingCred(status: CredHealth): boolean {
  return status === "expired" || status === "unreadable" || status === "missing" ||
    status === "foreign";
}

/** One row of the report. Never carries secret material. */
export interface DoctorAuthRow {
  /** The store key. */
  key: string;
  /** Its basename (`delivery.creds`). */
  kind: string;
  /** The space, when the key is one of a known space's per-space kinds. */
  space?: string;
  status: CredHealth;
  /** True for the daemon creds `--fix` may re-sign (delivery, membership-rw). */
  daemon: boolean;
  /** The JWT's `iat` and `exp`, Unix seconds, when readable. */
  issuedAt?: number;
  expiresAt?: number;
  /** Seconds until expiry (negative once expired). */
  remainingSeconds?: number;
  /** For `unreadable`: the refusal code. */
  detail?: string;
  /** With `fix`: the re-sign outcome for this cred. */
  fix?: RemintResult;
}

/** Options of {@linkcode doctorAuth}. */
export interface DoctorAuthOptions {
  /** Re-sign unhealthy daemon creds under continuity (no preflight, no network). */
  fix?: boolean;
  /**
   * The spaces to check. Default: every space with an account record in a filesystem store; an
   * injected store cannot be enumerated, so it needs this list.
   */
  spaces?: readonly string[];
  /** Unix seconds to judge against; default now. */
  now?: number;
}

const SPACE_KINDS = [
  DELIVERY_CREDS_KIND,
  MEMBERSHIP_RW_CREDS_KIND,
  MEMBERSHIP_OBSERVER_CREDS_KIND,
  CONNECTION_EVICTOR_CREDS_KIND,
];
const DAEMON_KINDS = new Set([DELIVERY_CREDS_KIND, MEMBERSHIP_RW_CREDS_KIND]);
const SYS_KINDS = new Set([MEMBERSHIP_OBSERVER_CREDS_KIND, CONNECTION_EVICTOR_CREDS_KIND]);

/**
 * Health of one creds text at `now`; pure. With `issuer`, a cred another key signed is
 * `foreign` (the broker would refuse it).
 */
export async function credHealth(
  text: string,
  now: number,
  issuer?: string,
): Promise<
  Pick<DoctorAuthRow, "status" | "issuedAt" | "expiresAt" | "remainingSeconds" | "detail">
> {
  try {
    const { jwt } = await parseCreds(text);
    const claims = await decodeJwt(jwt, { type: "user", ignoreTimes: true });
    if (issuer !== undefined && claims.iss !== issuer) {
      return {
        status: "foreign",
        detail:
          "signed by another system account than this root's broker trust (a restore into another root?): cotal down --keep-agents, then cotal up (add --detach if the stack ran detached): an up whose broker starts re-issues them",
      };
    }
    const iat = claims.iat;
    const exp = claims.exp;
    if (exp === undefined || exp === 0) return { status: "unbounded", issuedAt: iat };
    const times = { issuedAt: iat, expiresAt: exp, remainingSeconds: exp - now };
    if (now >= exp) return { status: "expired", ...times };
    const renewAt = iat + RENEW_FRACTION * (exp - iat);
    return { status: now >= renewAt ? "near-expiry" : "healthy", ...times };
  } catch (err) {
    return {
      status: "unreadable",
      detail: err instanceof CotalError ? err.code : "unreadable",
    };
  }
}

/** The system account of the store's broker trust, when it holds a readable one. */
async function brokerSysPub(store: SecretStore): Promise<string | undefined> {
  try {
    const pub = JSON.parse(await store.get(BROKER_AUTH_KEY) ?? "")?.sys?.pub;
    return typeof pub === "string" && pub !== "" ? pub : undefined;
  } catch {
    return undefined;
  }
}

async function walkCreds(root: string, dir = "", out: string[] = []): Promise<string[]> {
  let entries: Deno.DirEntry[];
  try {
    entries = await Array.fromAsync(Deno.readDir(dir ? `${root}/${dir}` : root));
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return out;
    throw err;
  }
  for (const e of entries.sort((a, b) => a.name.localeCompare(b.name))) {
    const key = dir ? `${dir}/${e.name}` : e.name;
    // Symlinks are never followed: the store refuses them anyway.
    if (e.isDirectory) await walkCreds(root, key, out);
    else if (e.isFile && e.name.endsWith(".creds") && !e.name.startsWith(TEMP_PREFIX)) {
      out.push(key);
    }
  }
  return out;
}

/** The spaces whose account records a file store holds (a record must name its own file). */
export async function discoverSpaces(store: FsSecretStore): Promise<string[]> {
  const spaces: string[] = [];
  let entries: Deno.DirEntry[];
  try {
    entries = await Array.fromAsync(Deno.readDir(`${store.root}/auth`));
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return spaces;
    throw err;
  }
  for (const e of entries) {
    if (!e.isFile || !/^account\.[0-9a-f]{32}\.json$/.test(e.name)) continue;
    const text = await store.get(`auth/${e.name}`).catch(() => undefined);
    try {
      const space = JSON.parse(text ?? "").space;
      // Only a label that maps back to its own file name names a space here.
      if (typeof space === "string" && `account.${spaceKeyHex(space)}.json` === e.name) {
        spaces.push(space);
      }
    } catch {
      // An unparseable record is the signer's problem, reported by getSpaceAuth when used.
    }
  }
  return spaces.sort();
}

/**
 * Reports every cred the store holds: for a filesystem store every `*.creds` file under it, for
 * an injected store the per-space kinds (delivery, membership-rw, membership-observer,
 * connection-evictor) of `opts.spaces`. Each row is `healthy`, `near-expiry` (past 75 % of its
 * life), `expired`, `unbounded` (no expiry) or `unreadable`.
 *
 * With `fix`, each space whose delivery or membership-rw cred is not healthy is re-signed with
 * {@linkcode remintDaemonCreds} without a preflight, so only a re-sign under authority
 * continuity is written; the `$SYS` creds and agent creds are never touched. Rows are then
 * re-read and carry the re-sign outcome.
 *
 * @example
 * ```ts
 * for (const row of await doctorAuth(root, undefined, { fix: true })) {
 *   console.log(row.key, row.status, row.fix?.ok ?? "");
 * }
 * ```
 */
export async function doctorAuth(
  root: string,
  store?: SecretStore,
  opts: DoctorAuthOptions = {},
): Promise<DoctorAuthRow[]> {
  const target = store ?? workspaceSecretStore(root);
  const now = opts.now ?? Math.floor(Date.now() / 1000);
  const fs = target instanceof FsSecretStore ? target : undefined;
  let spaces = opts.spaces ? [...opts.spaces] : undefined;
  if (!spaces) {
    if (!fs) {
      throw new CotalError(
        "doctor_needs_spaces",
        "An injected secret store cannot be listed; pass the spaces to check (opts.spaces).",
      );
    }
    spaces = await discoverSpaces(fs);
  }
  const spaceOf = new Map<string, string>();
  const spaceOfDir = new Map(spaces.map((sp) => [`space.${spaceKeyHex(sp)}`, sp]));
  const keys = new Set<string>();
  for (const space of spaces) {
    for (const kind of SPACE_KINDS) {
      const key = spaceSecretKey(space, kind, { injected: true });
      spaceOf.set(key, space);
      keys.add(key);
    }
    // The supervisor's own cred is there only when it signs remotely (cotal up): named with
    // its space when found, never reported missing.
    spaceOf.set(supervisorCredsKey(space, { injected: true }), space);
  }
  if (fs) { for (const key of await walkCreds(fs.root)) keys.add(key); }

  const sysPub = await brokerSysPub(target);
  const rows: DoctorAuthRow[] = [];
  for (const key of [...keys].sort()) {
    let text: string | undefined;
    let detail: string | undefined;
    try {
      text = await target.get(key);
    } catch (err) {
      detail = err instanceof CotalError ? err.code : "store_io";
    }
    const kind = key.slice(key.lastIndexOf("/") + 1);
    // Any cred in a known space's dir (an agent's) is that space's.
    const space = spaceOf.get(key) ?? spaceOfDir.get(key.slice(0, key.indexOf("/")));
    if (text === undefined && detail === undefined) {
      // A space's daemon cred that is not there runs its daemon degraded (or not at all): said.
      if (space !== undefined) {
        rows.push({
          key,
          kind,
          space,
          daemon: DAEMON_KINDS.has(kind),
          status: "missing",
          detail: SYS_KINDS.has(kind)
            ? "a $SYS cred is minted only with the system seed: cotal down --keep-agents, then cotal up (add --detach if the stack ran detached): an up whose broker starts re-issues them"
            : "cotal up mints it",
        });
      }
      continue;
    }
    // A $SYS cred is the broker trust's own: one its system account did not sign is refused.
    const issuer = SYS_KINDS.has(kind) ? sysPub : undefined;
    const health = text !== undefined
      ? await credHealth(text, now, issuer)
      : { status: "unreadable" as const, detail };
    rows.push({
      key,
      kind,
      ...(space !== undefined ? { space } : {}),
      daemon: space !== undefined && DAEMON_KINDS.has(kind),
      ...health,
    });
  }
  if (!opts.fix) return rows;

  const toFix = new Set(
    rows.filter((r) =>
      r.daemon && r.status !== "healthy" && r.status !== "unreadable" && r.status !== "missing"
    )
      .map((r) => r.space!),
  );
  for (const space of [...toFix].sort()) {
    const results = await remintDaemonCreds(root, space, store);
    for (const result of results) {
      const row = rows.find((r) => r.key === result.key);
      if (!row) continue;
      row.fix = result;
      if (result.ok) {
        const text = await target.get(row.key).catch(() => undefined);
        Object.assign(
          row,
          text !== undefined ? await credHealth(text, now) : { status: "unreadable" },
        );
      }
    }
  }
  return rows;
}
