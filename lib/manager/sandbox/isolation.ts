/**
 * Which isolation an agent runs under, decided once per supervisor from what this machine can
 * do: `bwrap` (the default: the allowlist sandbox of `plan.ts` around Deno's permissions) or
 * `deno-only` (Deno permissions alone, the operator's explicit opt-out). The bwrap verdict comes
 * from a probe that starts the default sandbox for real (its namespaces, the seccomp filter,
 * the uid switch or an unprivileged user namespace, the limit programs), so `status` never
 * claims an isolation the kernel would not give.
 *
 * @module
 */
import { scopeUnavailable } from "./landlock.ts";
import { CotalError } from "../../errors.ts";
import type { DeploymentLayout } from "../../permissions.ts";
import { spaceKeyHex } from "../../workspace/mod.ts";
import { BWRAP_MANUAL, ensureBwrap, findBwrap } from "./bwrap.ts";
import { type CgroupHost, probeCgroups } from "./cgroup.ts";
import { LIMIT_PROGRAMS } from "./limits.ts";
import { SETPRIV } from "./plan.ts";
import { seccompFilter, seccompSupported } from "./seccomp.ts";
import { spawnWithFds } from "./spawn_fds.ts";

/** `bwrap` (Deno permissions inside bubblewrap) or `deno-only` (Deno permissions alone). */
export type IsolationMode = "bwrap" | "deno-only";
/** Every {@linkcode IsolationMode}. */
export const ISOLATION_MODES: readonly IsolationMode[] = Object.freeze(["bwrap", "deno-only"]);

/** The isolation in force for a supervisor's agents; `summary` is the line `status` shows. */
export interface Isolation {
  readonly mode: IsolationMode;
  /** The bwrap binary, in `bwrap` mode. */
  readonly bwrap?: string;
  /** bwrap mode as root: each agent drops to its own uid (else a user namespace). */
  readonly switchUser?: boolean;
  /** Whether agents get their own network namespace (else the operator chose `--net host`). */
  readonly netns?: boolean;
  /** Where agent cgroups are made, when this supervisor may. */
  readonly cgroup?: CgroupHost;
  readonly summary: string;
}

/** What the supervisor knows when it picks an agent's isolation. */
export interface IsolationRequest {
  /** What the operator asked for; default `bwrap`. `deno-only` is an explicit opt-in. */
  readonly mode?: IsolationMode;
  /** Operator-trusted agents may run without bwrap; untrusted ones never silently do. */
  readonly trusted?: boolean;
  /** The external program the agent declared, if any. */
  readonly program?: string;
  /** The supervisor runs as root: a deno-only runner would too. */
  readonly asRoot?: boolean;
}

/** {@linkcode IsolationRequest} plus what the probe found about bwrap on this machine. */
export interface IsolationFacts extends IsolationRequest {
  /** A bwrap whose default sandbox started. */
  readonly bwrap?: string;
  /** Why there is no usable bwrap sandbox (absent, or the probe's failure). */
  readonly bwrapProblem?: string;
  readonly switchUser?: boolean;
  readonly netns?: boolean;
  readonly cgroup?: CgroupHost;
  /** Agents' sandboxes take Landlock's scopes (see `landlock.ts`). */
  readonly landlock?: boolean;
}

function describe(f: IsolationFacts): string {
  const who = f.switchUser ? "own uid per agent" : "user namespace";
  const limits = f.cgroup ? `cgroup v${f.cgroup.version} + rlimits` : "rlimits (no cgroup)";
  return `bwrap (${f.bwrap}): allowlist root, ${who}, ${
    f.netns === false ? "no network namespaces (agents need --net host)" : "own network namespace"
  }, seccomp, ${f.landlock ? "Landlock scopes, " : ""}${limits} + Deno permissions`;
}

/**
 * Picks the isolation for one agent, or refuses. An untrusted agent needs bwrap unless the
 * operator opted into `deno-only` (`sandbox_unavailable` otherwise); and an untrusted agent
 * that declares an external program is refused under `deno-only` (`sandbox_program_needs_bwrap`),
 * because Deno's permissions end at `Deno.Command`: the child runs with the runner's full uid.
 */
export function chooseIsolation(facts: IsolationFacts): Isolation {
  const mode = facts.mode ?? "bwrap";
  if (!ISOLATION_MODES.includes(mode)) {
    throw new CotalError(
      "sandbox_bad_mode",
      `Isolation ${JSON.stringify(mode)} is not one of ${ISOLATION_MODES.join(", ")}; pick one.`,
    );
  }
  if (mode === "bwrap" && facts.bwrap) {
    return {
      mode,
      bwrap: facts.bwrap,
      switchUser: facts.switchUser ?? false,
      netns: facts.netns ?? true,
      ...(facts.cgroup ? { cgroup: facts.cgroup } : {}),
      summary: describe(facts),
    };
  }
  const why = facts.bwrapProblem ?? "bwrap was not found";
  if (mode === "bwrap" && !facts.trusted) {
    throw new CotalError(
      "sandbox_unavailable",
      `Refusing to start an untrusted agent without the OS sandbox (${why}); ${BWRAP_MANUAL}.`,
    );
  }
  if (facts.asRoot && !facts.trusted) {
    // Under deno-only the runner keeps the supervisor's uid: as root, a setuid file it leaves
    // where it may write makes any local user root, and no limit applies (red team 26).
    throw new CotalError(
      "sandbox_root_needs_trust",
      "Refusing to start an untrusted agent under deno-only isolation as root: it would run as " +
        "root with Deno's permissions as its only layer; use bwrap isolation, run the supervisor " +
        "as an unprivileged user, or spawn it with --trusted if you trust it with root.",
    );
  }
  if (facts.program && !facts.trusted) {
    throw new CotalError(
      "sandbox_program_needs_bwrap",
      `Refusing to start the untrusted agent's program ${facts.program} under deno-only ` +
        "isolation: Deno permissions do not reach a child program; use bwrap isolation, or spawn it with --trusted if you trust it with your user's rights.",
    );
  }
  return {
    mode: "deno-only",
    summary: mode === "bwrap"
      ? `deno-only: trusted agent, ${why}`
      : "deno-only (operator opt-in): Deno permissions are the only layer",
  };
}

/** What {@linkcode probeSandbox} should try. */
export interface SandboxProbeOptions {
  /** Root supervisor: drop to an unprivileged uid with setpriv (else a user namespace). */
  readonly switchUser: boolean;
  /** Give the sandbox its own network namespace. */
  readonly netns: boolean;
  /**
   * The Deno executable agents' runners use: bound in and run as the agent's uid, so a Deno
   * the agent cannot reach (under a 0700 home, say) fails the probe rather than every spawn.
   */
  readonly deno?: string;
}

/**
 * Starts the default sandbox (for `deno --version` when `deno` is given, else `/bin/true`) and
 * returns undefined when it works, or one sentence naming what is missing: no user namespaces
 * for a non-root supervisor, no network namespace, a kernel without seccomp, a missing setpriv,
 * prlimit, choom or nice, a Deno the agent's uid cannot run.
 */
export async function probeSandbox(
  bwrap: string,
  opts: SandboxProbeOptions,
): Promise<string | undefined> {
  if (!seccompSupported()) {
    return `no seccomp filter is defined for ${Deno.build.arch}`;
  }
  for (const p of [...LIMIT_PROGRAMS, ...(opts.switchUser ? [SETPRIV] : [])]) {
    try {
      Deno.statSync(p);
    } catch {
      return `${p} is missing (install util-linux and coreutils)`;
    }
  }
  const args = ["--ro-bind", "/usr", "/usr"];
  for (const dir of ["/bin", "/lib", "/lib64", "/sbin"]) {
    try {
      const st = Deno.lstatSync(dir);
      if (st.isSymlink) args.push("--symlink", Deno.readLinkSync(dir), dir);
      else args.push("--ro-bind", dir, dir);
    } catch {
      // Not on this system.
    }
  }
  args.push("--proc", "/proc", "--dev", "/dev", "--unshare-pid", "--unshare-ipc", "--unshare-uts");
  if (opts.netns) args.push("--unshare-net");
  if (opts.switchUser) {
    args.push("--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID");
    args.push("--cap-add", "CAP_SETPCAP");
  } else {
    args.push("--unshare-user", "--disable-userns", "--cap-drop", "ALL");
  }
  args.push("--die-with-parent");
  const deno = opts.deno;
  if (deno) {
    const parts = deno.split("/").filter(Boolean);
    for (let i = 1; i < parts.length; i++) {
      args.push("--perms", "0755", "--dir", `/${parts.slice(0, i).join("/")}`);
    }
    args.push("--ro-bind", deno, deno);
  }
  const run = deno ? [deno, "--version"] : ["/bin/true"];
  try {
    const { result: child } = await spawnWithFds({ seccomp: seccompFilter() }, (fds) => {
      const tail = opts.switchUser
        ? [SETPRIV, "--reuid=65534", "--regid=65534", "--clear-groups", "--", ...run]
        : run;
      return Promise.resolve(
        new Deno.Command(bwrap, {
          args: [
            ...args,
            "--seccomp",
            String(fds.seccomp),
            "--",
            "/usr/bin/prlimit",
            "--core=0",
            "--",
            ...tail,
          ],
          stdin: "null",
          stdout: "null",
          stderr: "piped",
          clearEnv: true,
        }).spawn(),
      );
    });
    const out = await child.output();
    if (out.success) return undefined;
    const err = new TextDecoder().decode(out.stderr).trim().split("\n").at(-1);
    return `the default sandbox did not start: ${bwrap} exited ${out.code}${
      err ? ` (${err})` : ""
    }`;
  } catch (err) {
    return `the default sandbox did not start (${(err as Error).message})`;
  }
}

const probed = new Map<string, Promise<string | undefined>>();

function probeOnce(path: string, opts: SandboxProbeOptions): Promise<string | undefined> {
  const key = `${path}\0${opts.switchUser}\0${opts.netns}\0${opts.deno}`;
  if (!probed.has(key)) probed.set(key, probeSandbox(path, opts));
  return probed.get(key)!;
}

/** Options of {@linkcode resolveIsolation}. */
export interface ResolveIsolationOptions {
  /** Fetch bwrap into the project cache when absent. */
  readonly install?: boolean;
  readonly cacheDir?: string;
  /** An explicit bwrap binary (else `COTAL_BWRAP`, PATH, the cache). */
  readonly bwrap?: string;
  /** Look for a cgroup hierarchy to put agents in (default true). */
  readonly cgroups?: boolean;
  /** The Deno executable runners use (default this process's). */
  readonly deno?: string;
}

/** What this machine offers agents' sandboxes (everything but the request). */
export type HostIsolation = Omit<IsolationFacts, keyof IsolationRequest>;

/**
 * Finds bwrap and probes the default sandbox (once per binary and shape per process), then
 * looks for cgroups: the facts {@linkcode chooseIsolation} decides from.
 */
export async function probeIsolation(opts: ResolveIsolationOptions = {}): Promise<HostIsolation> {
  let path = opts.bwrap;
  let bwrapProblem: string | undefined;
  if (!path) {
    try {
      path =
        (opts.install ? await ensureBwrap({ cacheDir: opts.cacheDir }) : findBwrap(opts.cacheDir))
          ?.path;
    } catch (err) {
      bwrapProblem = (err as Error).message;
    }
  }
  const switchUser = Deno.uid() === 0;
  let netns = true;
  if (path) {
    const deno = opts.deno ?? Deno.execPath();
    bwrapProblem = await probeOnce(path, { switchUser, netns, deno });
    // Without network namespaces the rest may still hold: agents then need `--net host`.
    if (bwrapProblem && !(await probeOnce(path, { switchUser, netns: false, deno }))) {
      netns = false;
      bwrapProblem = undefined;
    }
  }
  const usable = path && !bwrapProblem;
  const cgroup = usable && opts.cgroups !== false ? cgroupHost() : undefined;
  return {
    ...(usable ? { bwrap: path } : {}),
    ...(bwrapProblem ? { bwrapProblem } : {}),
    switchUser,
    netns,
    ...(cgroup ? { cgroup } : {}),
    ...(usable && scopeUnavailable() === undefined ? { landlock: true } : {}),
  };
}

/** {@linkcode probeIsolation}, then {@linkcode chooseIsolation} for `request`. */
export async function resolveIsolation(
  request: IsolationRequest,
  opts: ResolveIsolationOptions = {},
): Promise<Isolation> {
  if ((request.mode ?? "bwrap") === "deno-only") {
    return chooseIsolation({ ...request, asRoot: Deno.uid() === 0 });
  }
  return chooseIsolation({ ...request, ...await probeIsolation(opts) });
}

let cgroupProbe: { host: CgroupHost | undefined } | undefined;

function cgroupHost(): CgroupHost | undefined {
  cgroupProbe ??= { host: probeCgroups() };
  return cgroupProbe.host;
}

/** Where agents' directories live in a layout. */
export function agentsRootOf(layout: DeploymentLayout): string {
  return `${layout.root}/agents`;
}

/**
 * One agent's directory: under its space's own dir, since each space's supervisor names its
 * agents alone (two spaces of one root each had an `upper_1`, which shared one dir: a despawn in
 * one removed the other's, and neither came back after `down --keep-agents`).
 */
export function agentDirOf(
  layout: Pick<DeploymentLayout, "root">,
  space: string,
  name: string,
): string {
  return `${layout.root}/agents/space.${spaceKeyHex(space)}/${name}`;
}

/**
 * The directories of Cotal's own state an agent must never see: the whole state root (store,
 * signer, run dir, logs, other agents), each again when configured outside it, and the machine
 * home. The sandbox never mounts them; workdirs and exposed paths may not overlap them.
 */
export function protectedPaths(layout: DeploymentLayout): string[] {
  const store = layout.store ?? `${layout.root}/secrets`;
  const all = [
    layout.root,
    store,
    layout.signer ?? `${store}/auth`,
    layout.runDir ?? `${layout.root}/run`,
    layout.logDir ?? `${layout.root}/logs`,
    layout.machineHome ?? `${Deno.env.get("HOME") ?? "/root"}/.cotal`,
  ].map((p) => p.replace(/\/+$/, "") || "/");
  return [...new Set(all)];
}
