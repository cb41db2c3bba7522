/**
 * The built-in connectors, registered through the seed's `Connector` contract so an AI harness
 * can be added later as one more `connector:<name>`. A connector's `buildLaunch` describes what
 * runs *inside* the agent's sandbox: `cotal-agent builtin <name>` or `cotal-agent module <file>`
 * for Cotal's own agents (run in the runner's process), or an external program the runner
 * starts on its pty. The supervisor always wraps it in the sandboxed runner; a connector never
 * chooses the sandbox.
 *
 * @module
 */
import { CotalError } from "../errors.ts";
import { type Connector, type LaunchContext, type LaunchSpec, registry } from "../registry.ts";
import type { JsonValue } from "../wire/mod.ts";
import type { AgentSpec } from "./launch.ts";

/** The runner's own name in a connector's launch spec. */
export const RUNNER_COMMAND = "cotal-agent";
/** Where a module agent's file is copied in its dir (with the source's extension). */
export const MODULE_FILE = "agent.ts";

/** What the manager adds to the seed's launch context for its own connectors. */
export interface ManagerLaunchContext extends LaunchContext {
  /** The program an agent declares (the task runner's command, a program agent's binary). */
  readonly program?: string;
  readonly args?: readonly string[];
  /** A module agent's file name inside its dir (`agent.ts`, `agent.js`). */
  readonly moduleFile?: string;
}

/** `task-runner`: answers anycast tasks by running its declared command. */
export const taskRunnerConnector: Connector = Object.freeze({
  kind: "connector",
  name: "task-runner",
  buildLaunch: (): LaunchSpec => ({ command: RUNNER_COMMAND, args: ["builtin", "task-runner"] }),
});

/** `module`: a TypeScript agent module the operator supplies, copied into the agent's dir. */
export const moduleConnector: Connector = Object.freeze({
  kind: "connector",
  name: "module",
  buildLaunch: (ctx: ManagerLaunchContext): LaunchSpec => ({
    command: RUNNER_COMMAND,
    args: ["module", ctx.moduleFile ?? MODULE_FILE],
  }),
});

/** `program`: an external program (an interactive harness) on the agent's pty. */
export const programConnector: Connector = Object.freeze({
  kind: "connector",
  name: "program",
  buildLaunch(ctx: ManagerLaunchContext): LaunchSpec {
    if (!ctx.program) {
      throw new CotalError(
        "spawn_bad_args",
        "The program connector needs the program to run; pass command (an absolute path).",
      );
    }
    return { command: ctx.program, args: [...(ctx.args ?? [])] };
  },
});

registry.register([taskRunnerConnector, moduleConnector, programConnector]);

/** The registered connector `name`; refuses (`unknown_connector`) naming the known ones. */
export function findConnector(name: string): Connector {
  const connector = registry.find("connector", name);
  if (!connector) {
    const known = registry.list("connector").map((c) => c.name).join(", ");
    throw new CotalError(
      "unknown_connector",
      `No connector "${name}" is registered (known: ${known}).`,
    );
  }
  return connector;
}

/**
 * Turns a connector's launch spec into the runner's agent spec. `program` is what the agent
 * may start besides itself (its `--allow-run`), `config` the built-in's configuration.
 */
export function agentSpecFromLaunch(
  launch: LaunchSpec,
  extra: { program?: string; config?: { [key: string]: JsonValue } } = {},
): AgentSpec {
  if (launch.command === RUNNER_COMMAND) {
    const [kind, name, ...rest] = launch.args;
    if (kind === "builtin" && name && rest.length === 0) {
      return {
        kind: "builtin",
        name,
        ...(extra.config ? { config: extra.config } : {}),
        ...(extra.program ? { program: extra.program } : {}),
      };
    }
    if (kind === "module" && name && rest.length === 0) {
      return { kind: "module", module: name, ...(extra.program ? { program: extra.program } : {}) };
    }
    throw new CotalError(
      "connector_bad_launch",
      `A connector asked for '${RUNNER_COMMAND} ${
        launch.args.join(" ").slice(0, 80)
      }'; use 'builtin <name>' or 'module <file>'.`,
    );
  }
  if (!launch.command.startsWith("/")) {
    throw new CotalError(
      "connector_bad_launch",
      `A connector's program ${
        JSON.stringify(launch.command.slice(0, 80))
      } is not an absolute path; the runner's --allow-run names exact paths.`,
    );
  }
  return { kind: "program", command: launch.command, args: [...launch.args] };
}
