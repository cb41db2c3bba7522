/**
 * The one table of per-executable Deno permissions. Every daemon runs with exactly what its row
 * grants, rendered for a given deployment layout either as `deno run` flags (development) or as
 * `deno compile` flags (release binaries built for a fixed layout). Widening a row is a security
 * decision: say why in the change.
 *
 * @module
 */
import { HEARTBEAT_ENV } from "./heartbeat.ts";

/** The executables Cotal ships, one per daemon plus the operator CLI and the agent runner. */
export const EXECUTABLES = Object.freeze(
  [
    "cotal",
    "cotal-auth-service",
    "cotal-delivery",
    "cotal-supervise",
    "cotal-signer",
    "cotal-agent",
    "cotal-watchdog",
  ] as const,
);
/** One of {@linkcode EXECUTABLES}. */
export type Executable = typeof EXECUTABLES[number];

/** The entry point each executable is built from. */
export const ENTRY_POINTS: Readonly<Record<Executable, string>> = Object.freeze({
  "cotal": "cmd/cotal.ts",
  "cotal-auth-service": "cmd/auth-service.ts",
  "cotal-delivery": "cmd/delivery.ts",
  "cotal-supervise": "cmd/supervise.ts",
  "cotal-signer": "cmd/signer.ts",
  "cotal-agent": "cmd/agent.ts",
  "cotal-watchdog": "cmd/watchdog.ts",
});

/** Where things live in one deployment; everything but `root` and `broker` has a default. */
export interface DeploymentLayout {
  /** The state directory (`.cotal` in development, `/var/lib/cotal` under systemd). */
  root: string;
  /** The secret store; default `<root>/secrets`. */
  store?: string;
  /** Where signing seeds live; default `<store>/auth`. */
  signer?: string;
  /** Runtime files (pid files, the auth-service discovery file); default `<root>/run`. */
  runDir?: string;
  /** Daemon logs; default `<root>/logs`. */
  logDir?: string;
  /** The signer's audit trails, written by the signer alone; default `<root>/audit`. */
  auditDir?: string;
  /** The machine's mesh registry home; default `$HOME/.cotal` (`COTAL_HOME`). */
  machineHome?: string;
  /** Broker addresses as `host:port` (several for a cluster). */
  broker: string[];
  /** The auth-service HTTP listen address, `host:port`. */
  authListen?: string;
  /**
   * User mode: the `host:port` of the space's auth service, which the supervisor asks for its
   * agents' bearers (lib/manager/agent_bearers.ts).
   */
  authService?: string;
  /**
   * `host:port` of the IdP the auth service pins and verifies against (OIDC discovery and its
   * JWKS): the daemon must reach it, so it is granted on top of the broker and listen address.
   */
  authIdp?: string[];
  /** When the daemon serves one space: the space's store dir name (`space.<hex>`). */
  spaceKey?: string;
  /**
   * The supervisor signs through the space's `cotal-signer`: its row then denies the signer
   * records outright (it never needs them).
   */
  remoteSigner?: boolean;
  /** Programs the CLI may start: nats-server, the daemon executables, deno in development. */
  cliPrograms?: string[];
  /** What the supervisor starts agents with: the runner executable (or deno) and bwrap. */
  supervisorPrograms?: string[];
  /** Extra variables the supervisor passes through to agents (names only). */
  agentEnvPassThrough?: string[];
  /** Where the supervisor makes its agents' sockets (see `agentSocketPath`). */
  agentSocketDir?: string;
  /**
   * Where systemd puts a unit's loaded credentials (`/run/credentials`, one dir per unit): the
   * delivery daemon reads its space's creds there under systemd (`--creds-dir`).
   */
  credentialsDir?: string;
  /**
   * A daemon's heartbeat file (lib/heartbeat.ts), one exact file its row may write: the stack
   * `cotal up` runs names one per daemon so its watchdog can tell a hung daemon from a live one.
   */
  heartbeat?: string;
}

/**
 * The per-agent part of the runner's row, in the paths the runner sees (inside its sandbox
 * these are the sandbox's own: `/run/cotal/launch`, `/home/agent`).
 */
export interface AgentLayout {
  /** The supervisor-owned launch dir: read-only (launch file, module). */
  launchDir: string;
  /** The 0600 launch-material file, inside `launchDir`. */
  launchFile: string;
  /** The agent's own home: with `workdir` and `tmp`, the only places it may write. */
  home: string;
  /** The operator-declared working directory, read-write. */
  workdir?: string;
  /** The sandbox's private `/tmp`, read-write. */
  tmp?: string;
  /** Unix sockets the runner dials (its control channel, the broker relay): read and write. */
  sockets?: string[];
  /** Where the runner may connect (and listen, for the relay); default the broker. */
  net?: string[];
  /** The one external program the agent declared, if any. */
  program?: string;
  /** Environment variables the runner may read. */
  envAllow?: string[];
}

/**
 * A rendered permission set: exact lists. `readAll`/`writeAll` are the one exception (the
 * supervisor's pty, see its row): they render a bare `--allow-read`/`--allow-write`.
 */
export interface PermissionSet {
  read: string[];
  readAll: boolean;
  denyRead: string[];
  write: string[];
  writeAll: boolean;
  denyWrite: string[];
  net: string[];
  env: string[];
  /** Every variable (`--allow-env` bare): the operator's CLI only, see its row. */
  envAll?: boolean;
  run: string[];
  ffi: boolean;
  sys: string[];
  /** V8 runtime flags (not permissions, but baked into a compiled binary the same way). */
  v8: string[];
}

/** Agents one supervisor runs at most; each holds one socket slot while it lives. */
export const AGENT_SLOTS = 64;

/**
 * One agent's unix socket in the supervisor's socket dir: `<dir>/<slot>.control` (its control
 * channel) or `<dir>/<slot>.broker` (its broker relay). Slots keep the names fixed, so the
 * supervisor's row can grant exactly these (Deno scopes unix sockets by exact path).
 */
export function agentSocketPath(
  dir: string,
  slot: number,
  kind: "control" | "broker" | "spawn",
): string {
  return `${dir}/${slot}.${kind}`;
}

/** The variables an agent runner may read: its launch pointer and a few harmless ones. */
export const AGENT_ENV_ALLOWLIST = Object.freeze([
  "COTAL_LAUNCH",
  "HOME",
  "PATH",
  "LANG",
  "TERM",
  "TZ",
]);

function defaults(l: DeploymentLayout) {
  const store = l.store ?? `${l.root}/secrets`;
  return {
    store,
    signer: l.signer ?? `${store}/auth`,
    runDir: l.runDir ?? `${l.root}/run`,
    logDir: l.logDir ?? `${l.root}/logs`,
    auditDir: l.auditDir ?? `${l.root}/audit`,
    machineHome: l.machineHome ?? `${Deno.env.get("HOME") ?? "/root"}/.cotal`,
  };
}

function empty(): PermissionSet {
  return {
    read: [],
    readAll: false,
    denyRead: [],
    write: [],
    writeAll: false,
    denyWrite: [],
    net: [],
    env: [],
    run: [],
    ffi: false,
    sys: [],
    v8: [],
  };
}

/** The delivery daemon's holder lock for one space (`space.<hex>`): `<run>/delivery/`. */
export function deliveryLockPath(layout: DeploymentLayout, spaceKey: string): string {
  return `${defaults(layout).runDir}/delivery/${spaceKey}.lock`;
}

/**
 * Renders one executable's row for a layout. `agent` is required for `cotal-agent`.
 */
export function permissionsFor(
  exe: Executable,
  layout: DeploymentLayout,
  agent?: AgentLayout,
): PermissionSet {
  const d = defaults(layout);
  const p = empty();
  p.net = [...layout.broker];
  ROWS[exe](p, layout, d, agent);
  // The one file it beats into; never for the CLI or an agent (neither is watched).
  if (layout.heartbeat && exe !== "cotal" && exe !== "cotal-agent") {
    p.write.push(layout.heartbeat);
    if (!p.envAll && !p.env.some((e) => e === "COTAL_*" || e === HEARTBEAT_ENV)) {
      p.env.push(HEARTBEAT_ENV);
    }
  }
  return p;
}

type Defaults = ReturnType<typeof defaults>;

/** Each executable's row, filled over the broker-only default. */
const ROWS: Record<
  Executable,
  (p: PermissionSet, layout: DeploymentLayout, d: Defaults, agent?: AgentLayout) => void
> = {
  "cotal": cliRow,
  "cotal-auth-service": authServiceRow,
  "cotal-delivery": deliveryRow,
  "cotal-signer": signerRow,
  "cotal-watchdog": watchdogRow,
  "cotal-supervise": superviseRow,
  "cotal-agent": agentRow,
};

/** The operator's CLI. */
function cliRow(p: PermissionSet, layout: DeploymentLayout, d: Defaults): void {
  p.read = [layout.root, d.machineHome];
  p.write = [layout.root, d.machineHome];
  p.net.push("127.0.0.1", "localhost");
  // Every variable of the operator's own shell: `cotal spawn --env NAME` passes the one it
  // names (a harness's provider key, any name) to that agent. It is the operator's tool,
  // run with the operator's environment; no daemon gets this.
  p.env = [];
  p.envAll = true;
  p.run = [...(layout.cliPrograms ?? [])];
}

/** The auth service: its space's projection of the signer, never the trust records. */
function authServiceRow(p: PermissionSet, layout: DeploymentLayout, d: Defaults): void {
  const spaceDir = layout.spaceKey ? `${d.store}/${layout.spaceKey}` : d.store;
  // It mints with the data-signer projection in its space dir (service-keys.json), never
  // the trust records: the signer dir (operator and account seeds) is denied outright.
  p.read = [spaceDir, `${d.store}/auth-service`, d.runDir];
  p.denyRead = [d.signer];
  p.write = [d.runDir, `${d.store}/auth-service`];
  // A 1 MB young generation keeps a callout burst's garbage from growing the daemon past
  // its 80 MB RSS budget (docs/BENCHMARKS.md), at no measurable latency cost.
  p.v8 = ["--max-semi-space-size=1"];
  if (layout.authListen) p.net.push(layout.authListen);
  // User auth verifies IdP tokens against the IdP's JWKS, fetched (and refreshed) live.
  p.net.push(...(layout.authIdp ?? []));
  p.env = ["COTAL_*"];
}

/** The delivery daemon: its own cred and holder lock. */
function deliveryRow(p: PermissionSet, layout: DeploymentLayout, d: Defaults): void {
  // Only its own cred key; the signer is denied outright even though the allow list
  // already leaves it out, so a widened read can never reach it.
  p.read = [layout.spaceKey ? `${d.store}/${layout.spaceKey}` : d.store];
  // Under systemd its unit loads the space's creds for it (LoadCredential=): it reads them
  // there, and its unit hides the store.
  if (layout.credentialsDir) p.read.push(layout.credentialsDir);
  p.denyRead = [d.signer];
  p.write = [d.logDir];
  // Its holder lock, one exact file: what lets a successor prove it died (a kill -9) and
  // take its lease over at once.
  // (A row rendered without a space, the compiled binary's, gets the lock dir.)
  {
    const lock = layout.spaceKey
      ? deliveryLockPath(layout, layout.spaceKey)
      : `${d.runDir}/delivery`;
    p.read.push(lock);
    p.write.push(lock);
  }
  p.env = ["COTAL_*"];
  // A 1 MB young generation sized for footprint: a burst of copies otherwise grows V8's
  // heap (and the RSS) to ~200 MB; with these ~90 MB at no measured throughput cost
  // (docs/BENCHMARKS.md, delivery section).
  p.v8 = ["--max-semi-space-size=1", "--optimize-for-size"];
}

/** The signer: the seeds, the store it re-signs into, its audit trail. */
function signerRow(p: PermissionSet, layout: DeploymentLayout, d: Defaults): void {
  // The signer records (operator and account seeds) and its own space's store dir, whose
  // daemon creds it re-signs (the supervisor, signing remotely, no longer can); its audit
  // trail in the logs; the broker. No run, no FFI, no env beyond its own. A release binary
  // serves whichever space its unit names, so it is granted the store and its systemd unit
  // narrows writes to that space's dir (`ReadWritePaths=`, lib/mesh/systemd.ts): it holds
  // the seeds that could mint any of those creds anyway.
  // Its audit dir is read too: rotating the trail is a rename, which Deno checks for both.
  // The store is read whole: the store checks its root before any write (no link, its
  // mode), and the signer records it reads already hold every space's seeds.
  const spaceDir = [layout.spaceKey ? `${d.store}/${layout.spaceKey}` : d.store];
  p.read = [d.signer, d.store, d.auditDir];
  p.write = [d.logDir, d.auditDir, ...spaceDir];
  p.env = ["COTAL_*"];
  p.v8 = ["--max-semi-space-size=1"];
}

/** The watchdog: the watch list, pid files, heartbeats and logs, nothing of the store. */
function watchdogRow(p: PermissionSet, layout: DeploymentLayout, d: Defaults): void {
  // The watch list, the components' pid files and liveness locks, their logs: nothing of
  // the store. It starts each daemon through /bin/sh (the wrapper that takes the lock and
  // execs), which is a full escape from any run scope: this row is hygiene, and the
  // watchdog runs as the operator who started the stack.
  // The broker's client port, no more: a broker that accepts a connection and sends no INFO
  // is frozen, which its lock cannot show (lib/mesh/watchdog.ts). No other address.
  p.net = [...layout.broker];
  // The logs are read to cap them and to see the broker's storage faults; the space index to
  // name a component by its space in its own log, as status does.
  p.read = [d.runDir, d.logDir, `${layout.root}/spaces.json`];
  p.write = [d.runDir, d.logDir];
  p.denyRead = [d.store];
  p.run = ["/bin/sh"];
  p.v8 = ["--max-semi-space-size=1"];
}

/** The supervisor: read- and write-all for the pty, its agents' sockets, FFI. */
function superviseRow(p: PermissionSet, layout: DeploymentLayout, d: Defaults): void {
  p.read = [layout.root];
  p.write = [layout.root];
  // Unscoped read and write: under Deno 2.9.6 `@lydell/node-pty` wraps the pty's fd in
  // `node:tty.ReadStream`, and Deno checks read-all and write-all for that (any path list,
  // even `/`, plus /dev/pts, /dev/ptmx, /proc/self and the npm cache, is refused; measured
  // in tests/manager/pty_runtime_test.ts). The supervisor holds the signer and already has
  // --allow-ffi and --allow-run=deno, so this widens what a *compromised supervisor* can
  // touch, never what an agent can (agents run under their own row inside bwrap).
  p.readAll = true;
  p.writeAll = true;
  // Signing remotely, it has no use for the seeds: denied outright, even under read-all.
  if (layout.remoteSigner) {
    p.denyRead = [d.signer, d.auditDir];
    p.denyWrite = [d.signer, d.auditDir];
  }
  // DENO_DIR and XDG_CACHE_HOME locate the module cache it binds into each sandbox;
  // XDG_RUNTIME_DIR a short place for the agents' sockets when the root's path is long.
  p.env = [
    "COTAL_*",
    ...AGENT_ENV_ALLOWLIST,
    "DENO_DIR",
    "XDG_CACHE_HOME",
    "XDG_RUNTIME_DIR",
    ...(layout.agentEnvPassThrough ?? []),
  ];
  // By absolute path: deno (the runner, deno-only) and bwrap. Signals go through libc
  // (FFI): Deno.kill needs an unscoped --allow-run.
  p.run = [...(layout.supervisorPrograms ?? [])];
  // An agent on the host's network (or under Deno permissions alone) reaches its relay on
  // a loopback port: listening on an ephemeral one, which grants no dial.
  p.net.push("127.0.0.1:0");
  // User mode: its auth service, which issues its agents' bearers.
  if (layout.authService) p.net.push(layout.authService);
  // Each agent's control channel, broker relay and spawn channel: exact paths per slot.
  if (layout.agentSocketDir) {
    for (let slot = 0; slot < AGENT_SLOTS; slot++) {
      for (const kind of ["control", "broker", "spawn"] as const) {
        p.net.push(`unix:${agentSocketPath(layout.agentSocketDir, slot, kind)}`);
      }
    }
  }
  // The pty runtime is a Node-API addon; descriptor hygiene, uid locks, cgroups and
  // signals go through libc (lib/manager/sandbox/libc.ts).
  p.ffi = true;
  // A 1 MB young generation: each agent's relay and control streams churn small buffers,
  // which otherwise grow the heap (and the RSS) with every agent (docs/BENCHMARKS.md).
  p.v8 = ["--max-semi-space-size=1"];
  // networkInterfaces: the host's own addresses, which a --net host agent's connect guard
  // closes as it closes the loopback (lib/manager/sandbox/connect_guard.ts).
  p.sys = ["osRelease", "uid", "gid", "networkInterfaces"];
}

/** An agent's runner: its launch dir, home, workdir and sockets. */
function agentRow(
  p: PermissionSet,
  _layout: DeploymentLayout,
  d: Defaults,
  agent?: AgentLayout,
): void {
  if (!agent) throw new TypeError("permissionsFor('cotal-agent') needs the agent's layout.");
  const writable = [agent.home, agent.workdir, agent.tmp].filter((x): x is string => !!x);
  p.read = [agent.launchDir, ...writable, ...(agent.sockets ?? [])];
  p.denyRead = [d.signer, d.store];
  p.write = [...writable, ...(agent.sockets ?? [])];
  if (agent.net) p.net = [...agent.net];
  // Dialling a unix socket needs net access to `unix:<path>` besides read and write.
  p.net.push(...(agent.sockets ?? []).map((s) => `unix:${s}`));
  p.env = [...(agent.envAllow ?? AGENT_ENV_ALLOWLIST)];
  p.run = agent.program ? [agent.program] : [];
}

function list(flag: string, values: string[]): string[] {
  return values.length ? [`${flag}=${values.join(",")}`] : [];
}

/** Renders a permission set as flags; `deno run` and `deno compile` take the same ones. */
export function renderFlags(p: PermissionSet): string[] {
  return [
    "--no-prompt",
    ...(p.readAll ? ["--allow-read"] : list("--allow-read", p.read)),
    ...list("--deny-read", p.denyRead),
    ...(p.writeAll ? ["--allow-write"] : list("--allow-write", p.write)),
    ...list("--deny-write", p.denyWrite),
    ...list("--allow-net", p.net),
    ...(p.envAll ? ["--allow-env"] : list("--allow-env", p.env)),
    ...list("--allow-run", p.run),
    ...list("--allow-sys", p.sys),
    ...(p.ffi ? ["--allow-ffi"] : []),
    ...(p.v8.length ? [`--v8-flags=${p.v8.join(",")}`] : []),
  ];
}

/** `deno run` flags for one executable in a layout (development). */
export function denoRunFlags(
  exe: Executable,
  layout: DeploymentLayout,
  agent?: AgentLayout,
): string[] {
  return renderFlags(permissionsFor(exe, layout, agent));
}

/**
 * The layout release binaries are built for: systemd's (lib/mesh/systemd.ts), where every
 * supervisor signs through its space's `cotal-signer`, so the supervisor's row denies the
 * signer records.
 */
export function releaseLayout(root: string, broker: string[]): DeploymentLayout {
  return { root, broker, remoteSigner: true, credentialsDir: "/run/credentials" };
}

/**
 * `deno compile` flags for one executable (release): the same permissions baked in, plus the
 * output name. Agent runners are compiled without a per-agent row: the supervisor runs them with
 * `deno run`-style flags rendered per agent, so the compiled runner carries only the deny list.
 */
export function denoCompileFlags(
  exe: Executable,
  layout: DeploymentLayout,
  outDir: string,
): string[] {
  const perms = exe === "cotal-agent"
    ? permissionsFor(exe, layout, {
      launchDir: `${layout.root}/agents`,
      launchFile: `${layout.root}/agents`,
      home: `${layout.root}/agents`,
    })
    : permissionsFor(exe, layout);
  return [...renderFlags(perms), "--output", `${outDir}/${exe}`];
}
