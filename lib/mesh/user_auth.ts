/**
 * User mode for `cotal up --user-auth --idp <issuer>`: each space gets a callout account
 * (preloaded into the broker config), the bearer issuer and owner secret, and its own
 * `cotal-auth-service` daemon. The choice is recorded in `<root>/user-auth.json` so a second
 * `up` and `space add` keep it.
 */
import {
  AUTH_SERVICE_FILE,
  authServicePaths,
  ensureCalloutAuth,
  ensureIssuer,
  ensureOwnerSecret,
  readDiscoveryFile,
} from "../auth/mod.ts";
import { writeFileAtomic } from "../atomic_file.ts";
import { CotalError } from "../errors.ts";
import {
  type BrokerAuth,
  composeSpaceAuth,
  type PreloadAccount,
  type SpaceAccountAuth,
} from "../trust/mod.ts";
import type { SecretStore } from "../workspace/mod.ts";
import { daemonEnv, devLayout, spaceDaemonArgs, withHeartbeat } from "./daemons.ts";
import { isSameProcess, type PidRecord } from "./pidfile.ts";
import { type ComponentSpec, type MeshRecord, spaceComponentId } from "./stack.ts";

/** What `--user-auth` pinned. */
export interface UserAuthConfig {
  /** The OIDC issuer URL the auth services pin on first start. */
  idp: string;
  /** The audience IdP tokens must carry (default: the issuer). */
  audience?: string;
}

/** Checks an issuer URL given on the command line. */
export function parseIdpUrl(text: string): URL {
  let u: URL;
  try {
    u = new URL(text);
  } catch {
    throw new CotalError(
      "usage",
      `--idp must be an issuer URL like https://idp.example, not '${text}'.`,
    );
  }
  const loopback = ["127.0.0.1", "localhost", "[::1]"].includes(u.hostname);
  if (u.protocol !== "https:" && !(u.protocol === "http:" && loopback)) {
    throw new CotalError(
      "usage",
      `--idp must use https (plain http only on loopback), not '${text}'.`,
    );
  }
  return u;
}

/** Reads the root's user-auth choice; undefined for a static-creds root. */
export async function readUserAuth(root: string): Promise<UserAuthConfig | undefined> {
  try {
    const v = JSON.parse(await Deno.readTextFile(`${root}/user-auth.json`));
    if (typeof v.idp === "string") return v;
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return undefined;
  }
  throw new CotalError(
    "user_auth_corrupt",
    `${root}/user-auth.json is not a Cotal user-auth record; fix it or remove it to go back to static creds.`,
  );
}

/**
 * Records the choice; refuses to re-pin a root to another IdP. True when it wrote the record
 * (the root had none), so a failed first start can take it back.
 */
export async function writeUserAuth(root: string, cfg: UserAuthConfig): Promise<boolean> {
  const current = await readUserAuth(root);
  if (current && (current.idp !== cfg.idp || (current.audience ?? "") !== (cfg.audience ?? ""))) {
    throw new CotalError(
      "user_auth_conflict",
      `${root} is pinned to the IdP ${current.idp}; Cotal never re-pins a root silently.`,
    );
  }
  if (current) return false;
  await writeFileAtomic(`${root}/user-auth.json`, JSON.stringify(cfg, null, 2) + "\n", {
    what: "The user-auth config",
  });
  return true;
}

/**
 * Makes sure every space has its callout account, issuer and owner secret, and returns the
 * callout accounts the broker config must preload.
 */
export async function ensureUserAuthSecrets(
  store: SecretStore,
  broker: BrokerAuth,
  accounts: SpaceAccountAuth[],
): Promise<PreloadAccount[]> {
  const out: PreloadAccount[] = [];
  for (const a of accounts) {
    const callout = await ensureCalloutAuth(store, composeSpaceAuth(broker, a));
    await ensureIssuer(store, a.space);
    await ensureOwnerSecret(store, a.space);
    out.push({ pub: callout.account.pub, jwt: callout.account.jwt });
  }
  return out;
}

/**
 * The loopback port the auth service of `space` listens on: chosen free once per root and
 * space, and kept (`<root>/user-auth.ports.json`), so the supervisor's `--auth-service` and its
 * permission row name the port the service has, whichever of them starts again.
 */
export async function authServicePort(root: string, space: string): Promise<number> {
  const file = `${root}/user-auth.ports.json`;
  let ports: Record<string, number> = {};
  try {
    const v = JSON.parse(await Deno.readTextFile(file));
    if (v && typeof v.ports === "object" && !Array.isArray(v.ports)) ports = v.ports;
  } catch (err) {
    if (!(err instanceof Deno.errors.NotFound)) {
      throw new CotalError(
        "user_auth_corrupt",
        `${file} is not a Cotal port record; remove it and run up again (the auth services get new ports).`,
      );
    }
  }
  const kept = ports[space];
  if (Number.isSafeInteger(kept) && kept > 0 && kept < 65536) return kept;
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  await writeFileAtomic(
    file,
    JSON.stringify({ ver: 1, ports: { ...ports, [space]: port } }) + "\n",
    {
      what: "The auth services' port record",
    },
  );
  return port;
}

/** The auth service of one space: ready once its discovery file is written and /health answers. */
export async function authServiceComponent(
  root: string,
  space: string,
  rec: MeshRecord,
  cfg: UserAuthConfig,
): Promise<ComponentSpec> {
  const idp = parseIdpUrl(cfg.idp);
  const listen = `127.0.0.1:${await authServicePort(root, space)}`;
  const paths = authServicePaths(root, space);
  const id = spaceComponentId("auth-service", space);
  const { layout, env } = withHeartbeat(root, id, devLayout(root, rec, space), daemonEnv());
  return {
    id,
    name: "cotal-auth-service",
    space,
    command: Deno.execPath(),
    args: spaceDaemonArgs(
      "cotal-auth-service",
      { ...layout, authListen: listen, authIdp: [idp.host] },
      root,
      space,
      rec,
      [
        "--listen",
        listen,
        "--idp",
        cfg.idp,
        ...(cfg.audience ? ["--audience", cfg.audience] : []),
      ],
    ),
    env,
    ready: async (pid: PidRecord) => {
      const deadline = Date.now() + 15_000;
      while (Date.now() < deadline) {
        if (!isSameProcess(pid)) throw new Error("cotal-auth-service exited during start-up");
        const d = await readDiscoveryFile(paths.discoveryFile).catch(() => undefined);
        if (d && d.pid === pid.pid) {
          const res = await fetch(`${d.url}/health`).catch(() => undefined);
          await res?.body?.cancel();
          if (res?.ok) return;
        }
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error(`no healthy ${AUTH_SERVICE_FILE} within 15 s`);
    },
  };
}
