/**
 * `cotal up` and `cotal down`: bring a root's whole stack up (broker, each space's set-up and
 * daemons, the watchdog when detached) or take it down, agents first, dependants before what
 * they depend on.
 *
 * @module
 */
import { cotalCommand } from "../cli/mod.ts";
import { CotalError, isCotalError } from "../errors.ts";
import { mintForRoot } from "./ops.ts";
import { ManagerClient } from "../manager/mod.ts";
import { bringBackLines, sayWhatIsUp } from "./up_report.ts";
export { BRING_BACK_WAIT_MS } from "./up_report.ts";
import { type SecretStore, spaceKeyHex, workspaceSecretStore } from "../workspace/mod.ts";
import { ensureMeshDirs, meshPaths } from "./layout.ts";
import { askToKeepAgents, keepAgentsAsked } from "./foreground_stop.ts";
import { listMeshes, registerMesh, unregisterMesh } from "../workspace/mod.ts";
import { processStartTime } from "./pidfile.ts";
import { mintSysCreds, rotateSys, spacesWithoutSysCreds } from "./sys_creds.ts";
import { ensureDaemonCreds, type IsolationChoice, watchdogComponent } from "./daemons.ts";
import { type UserAuthConfig, writeUserAuth } from "./user_auth.ts";
import {
  brokerBinary,
  brokerComponent,
  componentFiles,
  type ComponentSpec,
  type ComponentStatus,
  ensureComponent,
  listComponents,
  type MeshRecord,
  readMeshRecord,
  reloadBroker,
  sandboxBinary,
  spaceComponentId,
  stopComponent,
  writeMeshRecord,
} from "./stack.ts";
import { spaceDaemons } from "./space_daemons.ts";
import {
  addSpaceRecord,
  outdatedStreamNote,
  provisionSpace,
  renderBrokerConfig,
} from "./space_setup.ts";
import {
  readWatchList,
  Watchdog,
  WATCHDOGS,
  type WatchedComponent,
  writeWatchList,
} from "./watchdog.ts";
import { isLockHeld } from "./daemon.ts";
import { forgetUp, noteUp } from "./up_resume.ts";
import { ensureBrokerAuth, loadAllSpaceAccounts, readSpaceIndex } from "./trust_state.ts";

/** Options for {@linkcode up}. */
export interface UpOptions {
  /** The state directory; default `<cwd>/.cotal`. */
  root: string;
  /** The space served by default; added to the root when new. */
  space: string;
  host: string;
  port: number;
  /** Progress and result lines. */
  say: (line: string) => void;
  /** Resolves when the operator asks the stack to stop (Ctrl-C, SIGTERM). */
  untilStopped: Promise<void>;
}

function portFree(host: string, port: number): boolean {
  try {
    Deno.listen({ hostname: host, port }).close();
    return true;
  } catch {
    return false;
  }
}

/** What `up` did, for its report and `--json`. */
export interface UpResult {
  url: string;
  root: string;
  spaces: string[];
  started: string[];
  healthy: string[];
}

/**
 * Brings the stack up: renders the broker config for every space of the root, starts (or
 * keeps) the broker, provisions each space, then the daemons. A second `up` starts only what is
 * not running. In the foreground it waits for `untilStopped` and then stops everything.
 */
export async function up(
  opts: UpOptions & {
    detach?: boolean;
    rotateSys?: boolean;
    userAuth?: UserAuthConfig;
    isolation?: IsolationChoice;
    agentLimits?: string;
    agentIds?: string;
    /** The broker's HTTP monitoring address, `host:port` (kept for later `up`s). */
    monitor?: string;
    /**
     * How to run this same up again (the CLI's command line): detached, the watchdog runs it
     * if this up is killed before it finishes (lib/mesh/up_resume.ts).
     */
    resume?: { command: string; args: string[] };
  },
): Promise<UpResult> {
  const previous = await readMeshRecord(opts.root);
  const brokerRunning = (await listComponents(opts.root)).some((c) =>
    c.id === "nats-server" && c.state === "running"
  );
  await refuseUpOver(opts, previous, brokerRunning);
  // A foreground `up` over a stack that runs detached attaches to it: it heals what is dead
  // (detached, like the rest) and Ctrl-C leaves it all running. It never owns it.
  const attach = !opts.detach && brokerRunning && previous?.detached === true;
  const detach = opts.detach === true || attach;
  const server = await brokerBinary(opts.say);
  // The agents' sandbox, fetched like the broker on a machine that has none.
  if ((opts.isolation ?? previous?.isolation ?? "bwrap") === "bwrap") await sandboxBinary(opts.say);
  await ensureMeshDirs(meshPaths(opts.root));
  const store = workspaceSecretStore(opts.root);
  const { pinnedIdp } = await prepareTrust(opts, store, brokerRunning);
  // Kept from the last up unless given; "" (`--monitor off`) turns it off. nats-server reads it
  // only at start: a running broker keeps what it serves, and the change waits for a restart
  // (newcomer pass 10: refused but kept, it failed every later up, and status showed a port
  // nothing served).
  let monitor = (opts.monitor ?? previous?.monitor) || undefined;
  if (brokerRunning && monitor !== (previous?.monitor || undefined)) {
    const asked = opts.monitor || "off";
    opts.say(
      `the running broker keeps ${
        previous?.monitor ? `its monitoring on ${previous.monitor}` : "no monitoring port"
      }; --monitor ${asked} takes effect after '${cotalCommand()} down --root ${opts.root} ` +
        `--keep-agents' and '${cotalCommand()} up --root ${opts.root} --monitor ${asked}${
          detach ? " --detach" : ""
        }'`,
    );
    monitor = previous?.monitor || undefined;
  }
  const { accounts } = await renderBrokerConfig(opts.root, { ...opts, monitor });
  const rec = meshRecordFor(opts, previous, { brokerRunning, detach, monitor });
  const started: string[] = [];
  const healthy: string[] = [];
  const startedIds: string[] = [];
  // Detached, the watchdog pair starts first and each component goes on its list the moment it
  // runs: an up killed at any point leaves what it started watched (fault pass 12). The list
  // starts from the last up's entries that still run; a failed up puts the last list back.
  const previousList = detach ? await readWatchList(opts.root).catch(() => []) : [];
  const watchdogs = detach
    ? await Promise.all(WATCHDOGS.map((id) => watchdogComponent(opts.root, rec, id)))
    : [];
  const listed = new Map<string, WatchedComponent>();
  for (const c of previousList) {
    if (await isLockHeld(componentFiles(opts.root, c.id).lockFile)) listed.set(c.id, c);
  }
  for (const w of watchdogs) listed.set(w.id, w);
  const list = async (spec: WatchedComponent) => {
    listed.set(spec.id, spec);
    if (detach) await writeWatchList(opts.root, [...listed.values()]);
  };
  const watched: WatchedComponent[] = [];
  // Reported by kind and space name (`delivery.default`); the ids carry the space's hex.
  // Spaces whose supervisor this up started: it brings back the agents a down kept.
  const freshSupervisors: string[] = [];
  const ensure = async (spec: ComponentSpec) => {
    const r = await ensureComponent(opts.root, spec, detach, async () => {
      startedIds.push(spec.id);
      await list(spec);
    });
    const label = spec.space ? `${spec.id.split(".")[0]}.${spec.space}` : spec.id;
    (r.started ? started : healthy).push(label);
    if (!r.started) await list(spec);
    if (r.started && spec.space && spec.id.startsWith("supervise.")) {
      freshSupervisors.push(spec.space);
    }
    watched.push(spec);
    return r;
  };
  // Written before the watchdogs start, kept until this up ends: the first watchdog finishes an
  // up that dies between (fault pass 12).
  const note = detach && opts.resume ? await noteUp(opts.root, opts.resume) : undefined;
  try {
    if (detach) await writeWatchList(opts.root, [...listed.values()]);
    for (const w of watchdogs) {
      const r = await ensureComponent(opts.root, w, true, () => {
        startedIds.push(w.id);
        return Promise.resolve();
      });
      (r.started ? started : healthy).push(w.id);
    }
    opts.say(`nats-server ${server.version.text} for ${accounts.length} space(s)`);
    const broker = await ensure(brokerComponent(opts.root, server, rec));
    // A running broker may predate a space this up just added: it re-reads the config.
    if (!broker.started) {
      await reloadBroker(opts.root);
    }
    for (const a of accounts) {
      const setup = await provisionSpace(a, rec.url, opts.root);
      for (const name of setup.outdated) opts.say(outdatedStreamNote(a.space, name));
    }
    await writeMeshRecord(rec);
    for (const a of accounts) {
      await ensureDaemonCreds(opts.root, store, a);
      for (const spec of await spaceDaemons(opts.root, a.space, rec)) await ensure(spec);
    }
    for (const a of accounts) await registerMesh({ space: a.space, root: opts.root, url: rec.url });
    // What this up ensured, and the two watchdogs that watch it and each other.
    await writeWatchList(opts.root, [...watched, ...watchdogs]);
    // A watchdog killed while this up ran (both, and nothing restarts either) is started
    // again: an up that succeeds leaves its pair running (fault pass 13).
    for (const w of watchdogs) {
      const r = await ensureComponent(opts.root, w, true);
      if (r.started && !started.includes(w.id)) started.push(w.id);
    }
  } catch (err) {
    await undoFailedUp(opts, { detach, startedIds, pinnedIdp, previousList });
    // A resumed up that fails leaves its note: the watchdog runs it again, a bounded number
    // of times; nobody reads a resumed up's failure (fault pass 13).
    await note?.failed();
    throw err;
  }
  await note?.done();
  for (const space of freshSupervisors) {
    for (const line of await bringBackLines(opts.root, space, rec.url)) opts.say(line);
  }
  // Reported in the order the stack serves: the watchdogs, started first, are named last.
  for (const names of [started, healthy]) {
    const watchdogsLast = [
      ...names.filter((n) => !(WATCHDOGS as readonly string[]).includes(n)),
      ...names.filter((n) => (WATCHDOGS as readonly string[]).includes(n)),
    ];
    names.splice(0, names.length, ...watchdogsLast);
  }
  sayWhatIsUp(opts, rec, accounts.map((a) => a.space), { started, healthy });
  const result = {
    url: rec.url,
    root: opts.root,
    spaces: accounts.map((a) => a.space),
    started,
    healthy,
  };
  if (opts.detach) {
    opts.say(`stop:    ${cotalCommand()} down --root ${opts.root}`);
    return result;
  }
  if (attach) {
    opts.say(`attached to the detached stack; Ctrl-C detaches (${cotalCommand()} down stops it)`);
    await opts.untilStopped;
    opts.say("detached; the stack keeps running");
    return result;
  }
  await serveForeground(opts, accounts.map((a) => a.space));
  return result;
}

/**
 * What a failed `up` undoes: it leaves nothing it started running (a foreground stack is all
 * its own, a detached one keeps only what ran before this up), and a first `--user-auth` that
 * did not start (an IdP that does not answer) is not kept: every later plain up failed on it,
 * with nothing to turn it off (newcomer pass 8).
 */
async function undoFailedUp(
  opts: UpOptions,
  done: {
    detach: boolean;
    startedIds: string[];
    pinnedIdp: boolean;
    previousList: WatchedComponent[];
  },
): Promise<void> {
  if (!done.detach) await down(opts.root).catch(() => {});
  else {
    // The last list back first, and this up's watchdogs stopped first: nothing restarts what
    // the undo stops.
    await writeWatchList(opts.root, done.previousList).catch(() => {});
    const ids = [...done.startedIds].reverse();
    const first = ids.filter((id) => (WATCHDOGS as readonly string[]).includes(id));
    for (const id of [...first, ...ids.filter((id) => !first.includes(id))]) {
      await stopComponent(opts.root, id).catch(() => {});
    }
  }
  if (done.pinnedIdp) {
    await Deno.remove(`${opts.root}/user-auth.json`).catch(() => {});
    opts.say("user auth was not kept: the next 'cotal up' starts with static creds");
  }
}

/**
 * A foreground stack until Ctrl-C: it heals like a detached one (the same watchdog loop, in this
 * process), and its stop is a down, said line by line.
 */
async function serveForeground(opts: UpOptions, spaces: string[]): Promise<void> {
  opts.say("stop:    press Ctrl-C");
  const stop = new AbortController();
  const watching = new Watchdog({ root: opts.root, detach: false, log: opts.say })
    .run(stop.signal);
  await opts.untilStopped;
  stop.abort();
  await watching;
  const keepAgents = await keepAgentsAsked(opts.root);
  opts.say(keepAgents ? "stopping (agents kept for the next up)" : "stopping");
  // Said as `cotal down` says it: what each component and agent became.
  const byHex = new Map(spaces.map((s) => [spaceKeyHex(s), s]));
  for (const [id, what] of Object.entries(await down(opts.root, { keepAgents }))) {
    const [kind, hex] = id.split(".");
    const space = hex ? byHex.get(hex) : undefined;
    opts.say(`${space ? `${kind}.${space}` : id}: ${what}`);
  }
}

/** The order `down` stops components in: the watchdog, dependants, the broker last. */
/**
 * This up's mesh record: what was given, else what the last up kept. A running stack keeps its
 * isolation (supervisors read it when they start), and says so when another was asked for.
 */
function meshRecordFor(
  opts: UpOptions & { isolation?: IsolationChoice; agentLimits?: string; agentIds?: string },
  previous: MeshRecord | undefined,
  now: { brokerRunning: boolean; detach: boolean; monitor?: string },
): MeshRecord {
  let isolation = opts.isolation ?? previous?.isolation ?? "bwrap";
  if (now.brokerRunning && previous?.isolation && isolation !== previous.isolation) {
    opts.say(
      `the running stack keeps isolation ${previous.isolation}; --isolation ${isolation} takes ` +
        `effect after '${cotalCommand()} down --root ${opts.root} --keep-agents' and ` +
        `'${cotalCommand()} up --root ${opts.root} --isolation ${isolation}${
          now.detach ? " --detach" : ""
        }'`,
    );
    isolation = previous.isolation;
  }
  const agentLimits = opts.agentLimits ?? previous?.agentLimits;
  const agentIds = opts.agentIds ?? previous?.agentIds;
  return {
    root: opts.root,
    host: opts.host,
    port: opts.port,
    url: `nats://${opts.host}:${opts.port}`,
    ...(now.monitor ? { monitor: now.monitor } : {}),
    detached: now.detach,
    ...(now.detach ? {} : foregroundOwner()),
    isolation,
    ...(agentLimits ? { agentLimits } : {}),
    ...(agentIds ? { agentIds } : {}),
    startedAt: previous?.startedAt && now.brokerRunning
      ? previous.startedAt
      : new Date().toISOString(),
  };
}

/** This process as the owner of a foreground stack (it heals it; a second one would too). */
function foregroundOwner(): { owner?: { pid: number; startTime: number } } {
  const startTime = processStartTime(Deno.pid);
  return startTime === undefined ? {} : { owner: { pid: Deno.pid, startTime } };
}

/** The refusals an `up` makes before it touches anything. */
async function refuseUpOver(
  opts: UpOptions & { rotateSys?: boolean },
  previous: MeshRecord | undefined,
  brokerRunning: boolean,
): Promise<void> {
  if (
    brokerRunning && previous && !previous.detached && previous.owner &&
    processStartTime(previous.owner.pid) === previous.owner.startTime
  ) {
    // Two ups healing one stack restart the same daemons against each other.
    throw new CotalError(
      "mesh_running_foreground",
      `This root's stack runs in the foreground of another 'cotal up' (pid ${previous.owner.pid}), ` +
        `which heals it; stop that one (Ctrl-C there, or '${cotalCommand()} down --root ` +
        `${opts.root}') before starting it again.`,
    );
  }
  if (brokerRunning && previous && (previous.port !== opts.port || previous.host !== opts.host)) {
    throw new CotalError(
      "mesh_running_elsewhere",
      `This root's broker already runs on ${previous.host}:${previous.port}; run 'cotal down' ` +
        "first to move it, or leave --host/--port as they were.",
    );
  }
  if (!brokerRunning && !portFree(opts.host, opts.port)) {
    // Often this machine's own mesh under another root (an up run from another directory).
    const url = `nats://${opts.host}:${opts.port}`;
    const mine = (await listMeshes().catch(() => [])).find((m) =>
      m.url === url && m.root !== opts.root
    );
    throw new CotalError(
      "port_in_use",
      mine
        ? `${opts.host}:${opts.port} is already in use by the Cotal mesh under ${mine.root}; ` +
          `to use it, run from there or pass --root ${mine.root}; for a second mesh, pass --port <n>.`
        : `${opts.host}:${opts.port} is already in use; stop what listens there or pass --port <n>.`,
    );
  }
  if (opts.rotateSys && brokerRunning) {
    throw new CotalError(
      "mesh_running",
      `--rotate-sys re-issues the system account, which the broker reads only at start; run ` +
        `'cotal down --root ${opts.root}' first.`,
    );
  }
}

/**
 * The root's trust, made or kept: the broker's operator, the space's record, the user-auth
 * config, and the `$SYS` creds (minted when the trust is new, re-issued on `--rotate-sys`).
 */
async function prepareTrust(
  opts: UpOptions & { rotateSys?: boolean; userAuth?: UserAuthConfig },
  store: SecretStore,
  brokerRunning: boolean,
): Promise<{ pinnedIdp: boolean }> {
  // The system seed exists in memory only when the broker trust is created here (or rotated):
  // that is the one moment the spaces' $SYS creds can be minted.
  const { broker: trust, created: newTrust } = await ensureBrokerAuth(store, "cotal");
  if (await addSpaceRecord(opts.root, opts.space)) {
    opts.say(`created space '${opts.space}' (a new data account under this root's operator)`);
  }
  const pinnedIdp = opts.userAuth ? await writeUserAuth(opts.root, opts.userAuth) : false;
  const all = await loadAllSpaceAccounts(opts.root, store);
  if (newTrust) await mintSysCreds(opts.root, store, trust, all);
  // A space added since the broker last started (live, or while the stack was down) has no $SYS
  // creds, and one restored from another root has that root's: a broker that starts now reads a
  // re-issued system account for free, so it gets them (newcomer pass 9 found such a space still
  // missing them after the next up).
  const missing = newTrust || brokerRunning
    ? []
    : await spacesWithoutSysCreds(opts.root, store, all, trust);
  if (opts.rotateSys || missing.length > 0) {
    await rotateSys(opts.root, store, trust, all);
    // Said as what it is: newcomer pass 11 read the bare "re-issued the system account" after
    // a restore as a trust rotation.
    opts.say(
      opts.rotateSys
        ? `re-issued the system account and the $SYS creds of ${all.length} space(s)`
        : `minted the $SYS (broker monitoring) creds that ${missing.join(", ")} lacked ` +
          `(a space added or restored while the stack was down), under a new system-account key; ` +
          `the operator, the spaces' accounts, and every agent's creds are unchanged`,
    );
  }
  return { pinnedIdp };
}

function stopOrder(id: string): number {
  if ((WATCHDOGS as readonly string[]).includes(id)) return -1;
  if (id.startsWith("supervise.")) return 0;
  if (id.startsWith("delivery.")) return 1;
  if (id.startsWith("auth-service.")) return 2;
  if (id === "nats-server") return 9;
  return 5;
}

/**
 * What `down` does to each space's agents: despawns them (the default), or, with
 * `keepAgents`, leaves them on the supervisor's roster so the next `up` brings them back.
 */
async function settleAgents(
  root: string,
  keepAgents: boolean,
  running: ComponentStatus[],
): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const url = (await readMeshRecord(root))?.url;
  const { spaces } = await readSpaceIndex(root).catch(() => ({ spaces: [] as string[] }));
  // Spaces at once: each is bounded (a connect and its ps in 10 s, each despawn in 30 s), so a
  // hung broker or supervisor costs one bound, not one per space.
  await Promise.all(spaces.map(async (space) => {
    const sup = running.find((c) => c.id === spaceComponentId("supervise", space));
    if (!url || sup?.state !== "running") return;
    const key = `agents.${space}`;
    try {
      const creds = await mintForRoot(root, space, {
        profile: "control-caller",
        actor: "operator",
        expiresInSeconds: 120,
      });
      await using ctl = await ManagerClient.connect({ servers: url, space, creds });
      const { agents } = await ctl.request<{ agents: { name: string }[] }>("ps", {}, {
        timeoutMs: 5_000,
      });
      const names = agents.map((a) => a.name);
      if (keepAgents) {
        out[key] = names.length
          ? `kept ${names.join(", ")} (the next up brings them back)`
          : "none running";
        return;
      }
      const gone: string[] = [];
      for (const name of names) {
        await ctl.request("despawn", { name }, { timeoutMs: 30_000 });
        gone.push(name);
      }
      out[key] = gone.length ? `despawned ${gone.join(", ")}` : "none running";
    } catch (err) {
      // The supervisor's own stop keeps its roster: nothing is lost, they come back at up.
      out[key] = `not reached (${
        isCotalError(err) ? err.code : "error"
      }); the supervisor keeps them for the next up`;
    }
  }));
  return out;
}

/**
 * Stops every component of a root in dependency order; returns what happened to each, and to
 * each space's agents (despawned, or kept with `keepAgents`).
 */
export async function down(
  root: string,
  opts: { keepAgents?: boolean } = {},
): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  // An up's note first: no watchdog runs a killed up again while this down stops the stack.
  await forgetUp(root);
  // A foreground up heals its stack: stopped first, or it restarts what this down stops. It is
  // asked to stop, and its stop is this down: with --keep-agents, a request file it reads says
  // to keep them (newcomer passes 9 and 10: a SIGKILL left its terminal at exit 137, and the
  // broker died before the daemons of a space added later).
  const owner = (await readMeshRecord(root).catch(() => undefined))?.owner;
  if (
    owner && owner.pid !== Deno.pid && processStartTime(owner.pid) === owner.startTime
  ) {
    if (opts.keepAgents) await askToKeepAgents(root, owner.pid);
    Deno.kill(owner.pid, "SIGTERM");
    const deadline = Date.now() + FOREGROUND_STOP_WAIT_MS;
    while (processStartTime(owner.pid) === owner.startTime && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
    }
    out.up = processStartTime(owner.pid) === owner.startTime
      ? `the foreground up (pid ${owner.pid}) did not stop within ${
        FOREGROUND_STOP_WAIT_MS / 1000
      } s`
      : `the foreground up (pid ${owner.pid}) stopped`;
  }
  // The watch list emptied first, so a watchdog between two looks restarts nothing, then both
  // watchdogs at once (each would heal the other): nothing they would restart is stopped while
  // they run.
  await writeWatchList(root, []).catch(() => {});
  const first = await listComponents(root);
  const watchdogs = first.filter((c) => stopOrder(c.id) === -1).map((c) => c.id);
  const stoppedWatchdogs = await Promise.all(watchdogs.map((id) => stopComponent(root, id)));
  watchdogs.forEach((id, i) => out[id] = stoppedWatchdogs[i]);
  const listed = await listComponents(root);
  const components = listed.sort((a, b) => stopOrder(a.id) - stopOrder(b.id));
  Object.assign(out, await settleAgents(root, opts.keepAgents === true, listed));
  // Tier by tier, dependants first, each tier at once: a component that ignores its stop costs
  // its tier the 5 s grace before its SIGKILL, not every component after it as well.
  // (A watchdog restarted in the meantime is in the first tier again.)
  const tiers = [...new Set(components.map((c) => stopOrder(c.id)))];
  for (const tier of tiers) {
    const ids = components.filter((c) => stopOrder(c.id) === tier).map((c) => c.id);
    const stopped = await Promise.all(ids.map((id) => stopComponent(root, id)));
    // A watchdog stopped above is found not running here: what was done to it stands
    // (newcomer pass 8 read "watchdog: not-running" for one it had just seen running).
    ids.forEach((id, i) => {
      if (!(out[id] !== undefined && stopped[i] === "not-running")) out[id] = stopped[i];
    });
  }
  const { spaces } = await readSpaceIndex(root).catch(() => ({ spaces: [] as string[] }));
  for (const space of spaces) await unregisterMesh(space, root).catch(() => {});
  return out;
}

/** How long `down` waits for the foreground up it asked to stop (its own down takes this long). */
const FOREGROUND_STOP_WAIT_MS = 60_000;
