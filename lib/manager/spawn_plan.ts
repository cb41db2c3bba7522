/**
 * Planning one spawn before anything is provisioned: the agent's name, a fresh nkey and
 * lifecycle uid, its channels, the connector's launch turned into the runner's agent spec, and
 * the isolation it will run under (refused here, before any footprint exists).
 *
 * @module
 */
import { CotalError } from "../errors.ts";
import type { Connector } from "../registry.ts";
import { newIdentity } from "../trust/mod.ts";
import { newLifecycleUid } from "../wire/mod.ts";
import { agentSpecFromLaunch, type ManagerLaunchContext, RUNNER_COMMAND } from "./connectors.ts";
import { declaredProgram, launchFilePath } from "./launch.ts";
import { SYSTEM_PREFIXES } from "./start_runner.ts";
import type { LifecycleContext } from "./lifecycle.ts";
import type { AgentPlan } from "./managed_agent.ts";
import {
  agentDirOf,
  agentsRootOf,
  type Isolation,
  type IsolationMode,
  type IsolationRequest,
  protectedPaths,
  resolveIsolation,
} from "./sandbox/isolation.ts";
import { isReservedAgentName, type SpawnRequest } from "./spawn_request.ts";
import { type AgentLimits, resolveLimits } from "./sandbox/limits.ts";
import { assertExposable, isInside } from "./sandbox/plan.ts";

/** Inputs of {@linkcode planSpawn}. */
export interface SpawnPlanInput {
  readonly req: SpawnRequest;
  readonly connector: Connector;
  readonly ctx: LifecycleContext;
  /** Whether a name is held (managed here, or online in the space's presence). */
  readonly taken: (name: string) => boolean;
  readonly isolationMode: IsolationMode;
  /** Resolves an isolation request (default {@linkcode resolveIsolation}). */
  readonly isolate?: (request: IsolationRequest) => Promise<Isolation>;
  readonly credsKey: (name: string, uid: string) => string;
  /** The space's limits for its agents (over the frozen defaults). */
  readonly spaceLimits?: Partial<AgentLimits>;
  /** A lifecycle brought back after a manager restart: its uid is kept (durables, backlog). */
  readonly lifecycleUid?: string;
  /** What the other agents of this manager have bound: their workdirs and read-only paths. */
  readonly others?: readonly OtherAgentBinds[];
}

/** One other agent's host paths: the workdir it may change, and everything bound into it. */
export interface OtherAgentBinds {
  readonly name: string;
  readonly workdir?: string;
  /** Its workdir, exposed paths and program. */
  readonly binds: readonly string[];
}

/**
 * Refuses paths one agent can change under another's bind: a workdir is the agent's to rename
 * and relink, and bwrap (as root) resolves each bind's source at every start, so a path of
 * one agent inside another's workdir would let that other agent swap it for a link to any
 * host path and have it bound in at the first agent's next start (red team 24). Both ways:
 * the new agent's paths inside another's workdir, and another's paths inside the new workdir.
 * The same workdir for two agents is no such path: neither can rename the mount point itself
 * (its parent is not in either sandbox), and sharing its contents is what the operator chose.
 */
export function assertNoSharedTree(
  name: string,
  workdir: string | undefined,
  binds: readonly string[],
  others: readonly OtherAgentBinds[],
): void {
  for (const o of others) {
    if (o.workdir) {
      const inside = binds.find((p) => strictlyInside(p, o.workdir!));
      if (inside !== undefined) {
        throw new CotalError(
          "sandbox_path_refused",
          `${inside} is inside ${o.name}'s workdir ${o.workdir}, which ${o.name} can change under this agent (swap it for a link); give ${name} a path outside every other agent's workdir.`,
        );
      }
    }
    if (workdir) {
      const theirs = o.binds.find((p) => strictlyInside(p, workdir));
      if (theirs !== undefined) {
        throw new CotalError(
          "sandbox_path_refused",
          `The workdir ${workdir} holds ${theirs}, which ${o.name} has bound, and ${name} could swap it for a link under ${o.name}; pick a workdir that holds no other agent's paths.`,
        );
      }
    }
  }
}

/**
 * Resolves a workdir or exposed path to its real location and refuses it when it is missing,
 * not of the right kind, or overlaps what agents must never see.
 */
async function checkedPath(
  path: string,
  forbidden: readonly string[],
  what: "workdir" | "exposed path",
): Promise<string> {
  let real: string;
  let st: Deno.FileInfo;
  try {
    real = await Deno.realPath(path);
    st = await Deno.stat(real);
  } catch {
    throw new CotalError(
      "sandbox_path_refused",
      `The ${what} ${path} does not exist; create it or fix the path.`,
    );
  }
  if (what === "workdir" && !st.isDirectory) {
    throw new CotalError("sandbox_path_refused", `The workdir ${path} is not a directory.`);
  }
  // A link (one an agent planted in its own workdir, say) would bind whatever it points at.
  const given = path.replace(/\/+$/, "") || "/";
  if (real !== given) {
    throw new CotalError(
      "sandbox_path_refused",
      `The ${what} ${given} goes through a symlink to ${real}; pass the real path if that is what you mean.`,
    );
  }
  // Any Cotal state dir, of this root or another (a root's .cotal, a machine home).
  if (real.split("/").includes(".cotal")) {
    throw new CotalError(
      "sandbox_path_refused",
      `The ${what} ${real} is inside a Cotal state dir (.cotal), which agents must never see.`,
    );
  }
  assertExposable(real, forbidden, what);
  return real;
}

/** Picks the agent's name: the requested one if free, else `<role or connector>_<n>`. */
export function allocateName(
  req: Pick<SpawnRequest, "name" | "role" | "agent">,
  taken: (name: string) => boolean,
): string {
  if (req.name) {
    if (taken(req.name)) {
      throw new CotalError(
        "name_taken",
        `An agent named ${req.name} (or a name differing only by case) is already in this space, running or retired ('cotal ps' shows which); pick another name or despawn it.`,
      );
    }
    return req.name;
  }
  let base = (req.role ?? req.agent).replace(/[^A-Za-z0-9_]/g, "_").slice(0, 56);
  // A role may be "operator"; the agent serving it still may not be named like the mesh's own.
  if (isReservedAgentName(base)) base = `agent_${base}`.slice(0, 56);
  for (let n = 1; n < 10_000; n++) {
    const name = `${base}_${n}`;
    if (!taken(name)) return name;
  }
  throw new CotalError("name_taken", `Every name ${base}_<n> is taken; pass a name.`);
}

function strictlyInside(path: string, dir: string): boolean {
  return path !== dir && isInside(path, dir);
}

/**
 * The host paths bound into an agent on their own: its workdir, and its exposed paths and
 * program unless the system's or under its own workdir (which shows those: start_runner.ts).
 * A program is taken at its spelled path and at the path it resolves to, so an alias (a link
 * into another agent's workdir) is judged where it lands (red team 25).
 */
export function bindsOf(
  workdir: string | undefined,
  expose: readonly string[],
  program: string | undefined,
): string[] {
  const own = (p: string) => workdir !== undefined && isInside(p, workdir);
  const system = (p: string) => SYSTEM_PREFIXES.some((s) => p.startsWith(s));
  const out = [...(workdir ? [workdir] : []), ...expose.filter((p) => !own(p) && !system(p))];
  if (program?.startsWith("/")) {
    let real = program;
    try {
      real = Deno.realPathSync(program);
    } catch {
      // Gone: judged as spelled.
    }
    for (const p of new Set([program, real])) if (!own(p) && !system(p)) out.push(p);
  }
  return out;
}

/**
 * Refuses a program spelled outside the agent's workdir that resolves into it: bound on its
 * own at the spelled path, bwrap would follow the alias into a tree the agent may relink.
 */
function assertNoAliasIntoWorkdir(program: string | undefined, workdir: string | undefined): void {
  if (!program?.startsWith("/") || !workdir || isInside(program, workdir)) return;
  let real: string;
  try {
    real = Deno.realPathSync(program);
  } catch {
    return;
  }
  if (isInside(real, workdir)) {
    throw new CotalError(
      "sandbox_path_refused",
      `The program ${program} resolves to ${real}, inside the agent's own workdir, through a link; pass ${real} itself.`,
    );
  }
}

/** Plans a spawn; every refusal here leaves nothing behind. */
export async function planSpawn(input: SpawnPlanInput): Promise<AgentPlan> {
  const { req, ctx } = input;
  const name = allocateName(req, input.taken);
  const agentDir = agentDirOf(ctx.layout, ctx.space, name);
  const launchFile = launchFilePath(agentDir);
  const launchCtx: ManagerLaunchContext = {
    space: ctx.space,
    agent: name,
    ...(req.role ? { role: req.role } : {}),
    cwd: agentDir,
    materialPath: launchFile,
    ...(req.command ? { program: req.command } : {}),
    args: req.args,
    ...(req.module ? { moduleFile: `agent${/\.[a-z]+$/.exec(req.module)![0]}` } : {}),
    ...(req.prompt ? { prompt: req.prompt } : {}),
    ...(req.model ? { model: req.model } : {}),
  };
  const launch = await input.connector.buildLaunch(launchCtx);
  // Cotal's own agents run in the runner's process: the request's command is the one program
  // they may start (their --allow-run), its args the task runner's configuration.
  const spec = agentSpecFromLaunch(
    launch,
    launch.command === RUNNER_COMMAND
      ? {
        ...(req.command ? { program: req.command } : {}),
        config: { ...req.config, ...(req.args.length ? { args: [...req.args] } : {}) },
      }
      : {},
  );
  const isolation = await (input.isolate ?? resolveIsolation)({
    mode: input.isolationMode,
    trusted: req.trusted,
    program: declaredProgram(spec),
  });
  if (isolation.mode === "bwrap" && req.net === "relay" && isolation.netns === false) {
    throw new CotalError(
      "sandbox_no_netns",
      "This kernel gives the sandbox no network namespace, so the agent cannot get a network of its own; spawn it with --net host to share the host's network.",
    );
  }
  const forbidden = [...protectedPaths(ctx.layout), agentsRootOf(ctx.layout)];
  const workdir = req.workdir ? await checkedPath(req.workdir, forbidden, "workdir") : undefined;
  const expose: string[] = [];
  for (const p of req.expose) expose.push(await checkedPath(p, forbidden, "exposed path"));
  // A connector that starts its harness through a wrapper (a shell that writes its settings,
  // env(1)) declares the wrapper; the harness itself is bound in all the same.
  const harness = req.command;
  if (
    harness && launch.command !== harness && launch.args.includes(harness) &&
    !SYSTEM_PREFIXES.some((p) => harness.startsWith(p))
  ) expose.push(await checkedPath(harness, forbidden, "exposed path"));
  const program = declaredProgram(spec);
  assertNoAliasIntoWorkdir(program, workdir);
  assertNoSharedTree(name, workdir, bindsOf(workdir, expose, program), input.others ?? []);
  const limits = resolveLimits(input.spaceLimits, req.limits);
  const lifecycleUid = input.lifecycleUid ?? newLifecycleUid();
  return {
    name,
    // In user mode the auth service names the owner its supervised agents are granted under.
    principal: { owner: ctx.bearers?.owner ?? "local", actor: name },
    lifecycleUid,
    identity: newIdentity(),
    connector: input.connector.name,
    ...(req.role ? { role: req.role } : {}),
    agentDir,
    launchFile,
    spec,
    isolation,
    restart: req.restart,
    channels: {
      subscribe: req.subscribe ?? [],
      // Least privilege: no channels unless the request names them.
      allowSubscribe: req.allowSubscribe ?? req.subscribe ?? [],
      allowPublish: req.allowPublish,
    },
    credsKey: input.credsKey(name, lifecycleUid),
    limits,
    net: isolation.mode === "bwrap" ? req.net : "host",
    ...(workdir ? { workdir } : {}),
    expose,
    ...(req.env ? { env: req.env } : {}),
  };
}
