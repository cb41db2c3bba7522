/**
 * The OS layer between an agent runner and the supervisor's secrets: the bubblewrap argv for one
 * runner, and the choice of isolation mode the supervisor reports in `status`.
 *
 * Deno permissions are checked on path strings, so a symlink planted in an allowed directory is
 * followed to the signer; bwrap mounts an empty tmpfs over the secret directories, so the same
 * symlink dangles, and a new PID namespace hides the supervisor's `/proc/<pid>/environ`, `mem`
 * and `fd/`.
 *
 * @module
 */
import { CotalError } from "../../errors.ts";
import type { DeploymentLayout } from "../../permissions.ts";
import { BWRAP_MANUAL, ensureBwrap, findBwrap, probeBwrap } from "./bwrap.ts";

/** `bwrap` (Deno permissions inside bubblewrap) or `deno-only` (Deno permissions alone). */
export type IsolationMode = "bwrap" | "deno-only";
/** Every {@linkcode IsolationMode}. */
export const ISOLATION_MODES: readonly IsolationMode[] = Object.freeze(["bwrap", "deno-only"]);

/** The isolation in force for an agent; `summary` is the line `status` shows. */
export interface Isolation {
  readonly mode: IsolationMode;
  /** The bwrap binary, in `bwrap` mode. */
  readonly bwrap?: string;
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
}

/** {@linkcode IsolationRequest} plus what was found about bwrap on this machine. */
export interface IsolationFacts extends IsolationRequest {
  /** A bwrap that passed its probe. */
  readonly bwrap?: string;
  /** Why there is no usable bwrap (absent, or the probe's failure). */
  readonly bwrapProblem?: string;
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
    return { mode, bwrap: facts.bwrap, summary: `bwrap (${facts.bwrap}) + Deno permissions` };
  }
  const why = facts.bwrapProblem ?? "bwrap was not found";
  if (mode === "bwrap" && !facts.trusted) {
    throw new CotalError(
      "sandbox_unavailable",
      `Refusing to start an untrusted agent without an OS sandbox (${why}); ${BWRAP_MANUAL}.`,
    );
  }
  if (facts.program && !facts.trusted) {
    throw new CotalError(
      "sandbox_program_needs_bwrap",
      `Refusing to start the untrusted agent's program ${facts.program} under deno-only ` +
        "isolation: Deno permissions do not reach a child program; use bwrap isolation or mark the agent trusted.",
    );
  }
  return {
    mode: "deno-only",
    summary: mode === "bwrap"
      ? `deno-only: trusted agent, ${why}`
      : "deno-only (operator opt-in): Deno permissions are the only layer",
  };
}

const probed = new Map<string, string | undefined>();

/**
 * Finds and probes bwrap (once per path per process), then {@linkcode chooseIsolation}.
 * `install` fetches bwrap into the project cache first when it is absent.
 */
export async function resolveIsolation(
  request: IsolationRequest,
  opts: { install?: boolean; cacheDir?: string } = {},
): Promise<Isolation> {
  const mode = request.mode ?? "bwrap";
  if (mode === "deno-only") return chooseIsolation(request);
  let found;
  let bwrapProblem: string | undefined;
  try {
    found = opts.install
      ? await ensureBwrap({ cacheDir: opts.cacheDir })
      : findBwrap(opts.cacheDir);
  } catch (err) {
    bwrapProblem = (err as Error).message;
  }
  if (found) {
    if (!probed.has(found.path)) probed.set(found.path, await probeBwrap(found.path));
    bwrapProblem = probed.get(found.path);
  }
  return chooseIsolation({
    ...request,
    bwrap: found && !bwrapProblem ? found.path : undefined,
    bwrapProblem,
  });
}

/** Where agents' directories live in a layout. */
export function agentsRootOf(layout: DeploymentLayout): string {
  return `${layout.root}/agents`;
}

function isInside(path: string, dir: string): boolean {
  return path === dir || path.startsWith(dir.endsWith("/") ? dir : `${dir}/`);
}

/**
 * The directories an agent must not see, outermost only: the whole state root (store, signer,
 * run dir, logs, other agents), each of those again when configured outside it, the machine
 * home, and `/tmp` (so it cannot read other processes' temp files either).
 */
export function hiddenPaths(
  layout: DeploymentLayout,
  opts: { outermost?: boolean } = {},
): string[] {
  const store = layout.store ?? `${layout.root}/secrets`;
  const all = [
    "/tmp",
    layout.root,
    store,
    layout.signer ?? `${store}/auth`,
    layout.runDir ?? `${layout.root}/run`,
    layout.logDir ?? `${layout.root}/logs`,
    layout.machineHome ?? `${Deno.env.get("HOME") ?? "/root"}/.cotal`,
    agentsRootOf(layout),
  ].map((p) => p.replace(/\/+$/, "") || "/");
  const sorted = [...new Set(all)].sort((a, b) => a.length - b.length);
  if (opts.outermost === false) return sorted;
  const out: string[] = [];
  for (const p of sorted) if (!out.some((o) => isInside(p, o))) out.push(p);
  return out;
}

/** Options for {@linkcode sandboxArgs}. */
export interface SandboxOptions {
  /** The agent's directory: bound back writable over the hidden paths, and the working dir. */
  readonly agentDir: string;
  /** Directories covered by an empty tmpfs ({@linkcode hiddenPaths}); each must exist. */
  readonly hide: readonly string[];
  /** The whole environment inside (`--clearenv` first). */
  readonly env: Readonly<Record<string, string>>;
  /** Detach from the controlling terminal (stops TIOCSTI into a shared one); not under a pty. */
  readonly newSession?: boolean;
  /**
   * Directories the runner's own code lives in (the checkout or install dir), bound back
   * read-only when a hidden dir covers them: a checkout under `/tmp` must stay runnable. Hidden
   * dirs inside them (a `./.cotal` state root in the checkout) are hidden again after the bind.
   */
  readonly expose?: readonly string[];
  /** Every hidden dir, nested ones included (`hiddenPaths(layout, { outermost: false })`). */
  readonly hideAll?: readonly string[];
}

/**
 * The bwrap arguments (without the bwrap binary) up to and including `--`: a read-only view of
 * `/`, a tmpfs over every hidden dir, only the agent's dir bound back writable, a fresh `/proc`
 * in a new PID and IPC namespace, a minimal `/dev`, every capability dropped (as root, bwrap
 * otherwise keeps them and the agent could simply `umount` the tmpfs), and a cleared env.
 */
export function sandboxArgs(opts: SandboxOptions): string[] {
  const agentDir = opts.agentDir.replace(/\/+$/, "");
  if (!agentDir.startsWith("/")) {
    throw new CotalError("sandbox_bad_path", `The agent dir ${agentDir} must be an absolute path.`);
  }
  const args = ["--ro-bind", "/", "/"];
  for (const dir of opts.hide) {
    if (isInside(dir, agentDir)) {
      throw new CotalError(
        "sandbox_bad_path",
        `The hidden dir ${dir} is inside the agent dir ${agentDir}; agents' dirs must not hold supervisor state.`,
      );
    }
    args.push("--tmpfs", dir);
  }
  for (const code of opts.expose ?? []) {
    const dir = code.replace(/\/+$/, "");
    // Already visible (read-only), or itself a hidden dir: never bound back.
    const all = opts.hideAll ?? opts.hide;
    if (!opts.hide.some((h) => isInside(dir, h)) || all.includes(dir)) continue;
    args.push("--ro-bind", dir, dir);
    for (const h of all) if (isInside(h, dir)) args.push("--tmpfs", h);
  }
  args.push(
    "--bind",
    agentDir,
    agentDir,
    "--proc",
    "/proc",
    "--dev",
    "/dev",
    "--unshare-pid",
    "--unshare-ipc",
    "--die-with-parent",
    "--cap-drop",
    "ALL",
  );
  if (opts.newSession) args.push("--new-session");
  args.push("--clearenv");
  for (const [k, v] of Object.entries(opts.env)) args.push("--setenv", k, v);
  args.push("--chdir", agentDir, "--");
  return args;
}
