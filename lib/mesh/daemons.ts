/**
 * The per-space daemons `cotal up` runs, each as its own `deno run` process under its row of
 * the permission table (development layout; systemd runs the compiled binaries instead).
 */
import {
  deliveryLockPath,
  denoRunFlags,
  type DeploymentLayout,
  ENTRY_POINTS,
  type Executable,
} from "../permissions.ts";
import { agentSocketDir, findBwrap, managerInstanceId } from "../manager/mod.ts";
import { mintCreds, newIdentity, type SpaceAccountAuth } from "../trust/mod.ts";
import {
  deliveryCredsKey,
  membershipConfigKey,
  membershipRwCredsKey,
  remintDaemonCreds,
  type SecretStore,
  spaceKeyHex,
  supervisorCredsKey,
} from "../workspace/mod.ts";
import { HEARTBEAT_ENV } from "../heartbeat.ts";
import { meshPaths } from "./layout.ts";
import { isSameProcess } from "./pidfile.ts";
import { componentFiles, type ComponentSpec, type MeshRecord, spaceComponentId } from "./stack.ts";
import { fileSize, waitLogLine } from "./ready.ts";
import type { WatchdogId } from "./watchdog.ts";

const CHECKOUT = new URL("../../", import.meta.url).pathname;

/** The environment every daemon gets (it starts with nothing else). */
export function daemonEnv(): Record<string, string> {
  const env: Record<string, string> = { NO_COLOR: "1" };
  // Deno finds its module and npm caches through these; nothing secret rides them.
  for (const k of ["HOME", "DENO_DIR", "XDG_CACHE_HOME"]) {
    const v = Deno.env.get(k);
    if (v !== undefined) env[k] = v;
  }
  return env;
}

/**
 * A watched daemon's layout and environment with its heartbeat: the file its row may write and
 * the variable that names it (lib/heartbeat.ts), so the watchdog can tell when it hangs.
 */
export function withHeartbeat(
  root: string,
  id: string,
  layout: DeploymentLayout,
  env: Record<string, string>,
): { layout: DeploymentLayout; env: Record<string, string> } {
  const beat = componentFiles(root, id).beatFile;
  return { layout: { ...layout, heartbeat: beat }, env: { ...env, [HEARTBEAT_ENV]: beat } };
}

/** The development layout of a root for the permission table. */
export function devLayout(root: string, rec: MeshRecord, space?: string): DeploymentLayout {
  const p = meshPaths(root);
  return {
    root,
    store: p.store,
    runDir: p.runDir,
    logDir: p.logDir,
    broker: [`${rec.host}:${rec.port}`],
    ...(space ? { spaceKey: `space.${spaceKeyHex(space)}` } : {}),
  };
}

/**
 * Makes sure a space's standing daemon creds exist in the store: absent ones are minted with a
 * fresh identity; present ones are re-signed with the same nkeys (authority continuity), so
 * each `up` also renews them.
 */
export async function ensureDaemonCreds(
  root: string,
  store: SecretStore,
  account: SpaceAccountAuth,
): Promise<void> {
  const auth = { space: account.space, account: account.account };
  const composition = { root };
  for (
    const [key, profile] of [
      [deliveryCredsKey(account.space, composition), "delivery"],
      [membershipRwCredsKey(account.space, composition), "membership-rw"],
    ] as const
  ) {
    if (await store.get(key) === undefined) {
      await store.put(key, await mintCreds(auth, newIdentity(), profile));
    }
  }
  // The supervisor signs through the space's cotal-signer: it starts from this cred (a fresh
  // one at each up), for the principal it serves as.
  await store.put(
    supervisorCredsKey(account.space, composition),
    await mintCreds(auth, newIdentity(), "supervisor", {
      principal: { owner: "local", actor: `manager_${managerInstanceId(root, account.space)}` },
    }),
  );
  const cfg = membershipConfigKey(account.space, composition);
  if (await store.get(cfg) === undefined) {
    await store.put(cfg, JSON.stringify({ accountId: account.account.pub }) + "\n");
  }
  await remintDaemonCreds(root, account.space);
}

/** Waits for a daemon's own "up" line in its log, bounded, failing fast if it exits. */
function logReady(root: string, id: string, re: RegExp, from: number) {
  return async (rec: { pid: number; startTime: number; name: string; startedAt: string }) => {
    const { logFile } = componentFiles(root, id);
    const deadline = Date.now() + 15_000;
    // One more look after the deadline: an up frozen past it finds the line written meanwhile.
    for (let last = false; !last;) {
      last = Date.now() >= deadline;
      if (!isSameProcess(rec)) throw new Error(`${id} exited during start-up`);
      try {
        await waitLogLine(logFile, from, re, 200);
        return;
      } catch {
        // Not yet.
      }
    }
    throw new Error(`${id} did not report ready within 15 s`);
  };
}

/**
 * The argv of a per-space daemon: `run <its permission row> <its entry> --space --server
 * --root` and `extra`, with `layout` as the row's deployment (the dev layout unless a daemon
 * needs more of it).
 */
export function spaceDaemonArgs(
  exe: Executable,
  layout: DeploymentLayout,
  root: string,
  space: string,
  rec: MeshRecord,
  extra: readonly string[] = [],
): string[] {
  return [
    "run",
    ...denoRunFlags(exe, layout),
    `--config=${CHECKOUT}deno.json`,
    `${CHECKOUT}${ENTRY_POINTS[exe]}`,
    "--space",
    space,
    "--server",
    rec.url,
    "--root",
    root,
    ...extra,
  ];
}

/**
 * A per-space daemon run as `deno run <its row> <entry> --space --server --root ...`, ready
 * once its log says `ready`.
 */
async function spaceDaemon(
  root: string,
  space: string,
  rec: MeshRecord,
  d: { kind: string; exe: "cotal-delivery" | "cotal-signer"; ready: RegExp; extra?: string[] },
): Promise<ComponentSpec> {
  const id = spaceComponentId(d.kind, space);
  const from = await fileSize(componentFiles(root, id).logFile);
  const { layout, env } = withHeartbeat(root, id, devLayout(root, rec, space), daemonEnv());
  return {
    id,
    name: d.exe,
    space,
    command: Deno.execPath(),
    args: spaceDaemonArgs(d.exe, layout, root, space, rec, d.extra),
    env,
    ready: logReady(root, id, d.ready, from),
  };
}

/** The delivery daemon of one space. */
export function deliveryComponent(
  root: string,
  space: string,
  rec: MeshRecord,
): Promise<ComponentSpec> {
  return spaceDaemon(root, space, rec, {
    kind: "delivery",
    exe: "cotal-delivery",
    ready: /delivery daemon up for space/,
    extra: [
      "--lock-file",
      deliveryLockPath(devLayout(root, rec, space), `space.${spaceKeyHex(space)}`),
      // A predecessor proven dead by the lock is taken over at once; only a live (or
      // unprovable) holder is waited out, for its 30 s lease TTL at most.
      "--lease-wait",
      "40",
    ],
  });
}

/** The signer of one space: started before its supervisor, which signs through it. */
export function signerComponent(
  root: string,
  space: string,
  rec: MeshRecord,
): Promise<ComponentSpec> {
  return spaceDaemon(root, space, rec, {
    kind: "signer",
    exe: "cotal-signer",
    ready: /cotal-signer up for space/,
  });
}

/** How agents are isolated; `deno-only` is an explicit opt-in. */
export type IsolationChoice = "bwrap" | "deno-only";

/**
 * The supervisor of one space. bwrap comes from `COTAL_BWRAP`, PATH or the project cache (the
 * test set-up installs it there); without it the supervisor still runs and refuses untrusted
 * agents unless `deno-only` was chosen, and `status` says which isolation is in force.
 */
export async function superviseComponent(
  root: string,
  space: string,
  rec: MeshRecord,
  isolation: IsolationChoice = "bwrap",
  /** User mode: the space's auth service (`host:port`), which issues the agents' bearers. */
  opts: { authService?: string } = {},
): Promise<ComponentSpec> {
  const id = spaceComponentId("supervise", space);
  const from = await fileSize(componentFiles(root, id).logFile);
  const bwrap = findBwrap()?.path;
  const { layout, env } = withHeartbeat(root, id, devLayout(root, rec, space), {
    ...daemonEnv(),
    PATH: "/usr/bin:/bin",
  });
  if (bwrap) env.COTAL_BWRAP = bwrap;
  return {
    id,
    name: "cotal-supervise",
    space,
    command: Deno.execPath(),
    args: spaceDaemonArgs(
      "cotal-supervise",
      {
        ...layout,
        remoteSigner: true,
        supervisorPrograms: [Deno.execPath(), ...(bwrap ? [bwrap] : [])],
        agentSocketDir: agentSocketDir(devLayout(root, rec, space), managerInstanceId(root, space)),
        ...(opts.authService ? { authService: opts.authService } : {}),
      },
      root,
      space,
      rec,
      [
        "--isolation",
        isolation,
        "--signer",
        "remote",
        ...(rec.agentLimits ? ["--agent-limits", rec.agentLimits] : []),
        ...(rec.agentIds ? ["--agent-ids", rec.agentIds] : []),
        ...(opts.authService ? ["--auth-service", `http://${opts.authService}`] : []),
      ],
    ),
    env,
    ready: logReady(root, id, /manager up \(space /, from),
  };
}

/**
 * How to run the operator's CLI again with `args`, as `deno task cotal` runs it (the watchdog
 * runs an `up` that was killed part-way again: lib/mesh/up_resume.ts).
 */
export function cliCommand(args: readonly string[]): { command: string; args: string[] } {
  return {
    command: Deno.execPath(),
    args: [
      "run",
      "--allow-all",
      `--config=${CHECKOUT}deno.json`,
      `${CHECKOUT}${ENTRY_POINTS.cotal}`,
      ...args,
    ],
  };
}

/** The detached stack's watchdog (restarts whatever of the watch list dies). */
export async function watchdogComponent(
  root: string,
  rec: MeshRecord,
  self: WatchdogId = "watchdog",
): Promise<ComponentSpec> {
  const from = await fileSize(componentFiles(root, self).logFile);
  const { layout, env } = withHeartbeat(root, self, devLayout(root, rec), daemonEnv());
  return {
    id: self,
    name: "cotal-watchdog",
    command: Deno.execPath(),
    args: [
      "run",
      ...denoRunFlags("cotal-watchdog", layout),
      `--config=${CHECKOUT}deno.json`,
      `${CHECKOUT}cmd/watchdog.ts`,
      "--root",
      root,
      "--self",
      self,
    ],
    env,
    ready: logReady(root, self, /watchdog up for /, from),
  };
}
