/**
 * `dispatch(argv, registry)`: resolve `command:<name>` (two-word names first), parse its
 * flags, run it, and turn refusals into an exit code: 2 for usage errors, 1 for any other
 * CotalError. Anything else is a bug and propagates with its stack.
 *
 * @module
 */

import { CotalError, isCotalError } from "../errors.ts";
import type { Command, Registry } from "../registry.ts";
import { helpText } from "./help.ts";
import { denoIo, printError } from "./output.ts";
import type { CliIo } from "./output.ts";
import { helpRequested, parseCommandArgs } from "./parse.ts";

/** Options for {@linkcode dispatch}. */
export interface DispatchOptions {
  /** Program name in messages and help (`cotal`). */
  readonly program?: string;
  /** Where help and errors go; the process's stdout/stderr by default. */
  readonly io?: CliIo;
  /** What `--version` prints after the program name. */
  readonly version?: string;
}

/** The top-level command list. */
export function overviewText(registry: Registry, program = "cotal"): string {
  const commands = registry.list("command").filter((c) => !c.hidden);
  const width = Math.max(0, ...commands.map((c) => c.name.length));
  const rows = commands.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`);
  return [
    `Usage: ${program} <command> [options]`,
    "",
    "Commands:",
    ...(rows.length > 0 ? rows : ["  (none registered)"]),
    "",
    `Run "${program} <command> --help" for a command's flags, "${program} --version" for the version.`,
    "",
  ].join("\n");
}

function wantsJson(argv: readonly string[]): boolean {
  const end = argv.indexOf("--");
  return (end === -1 ? argv : argv.slice(0, end)).includes("--json");
}

function findCommand(
  argv: readonly string[],
  registry: Registry,
): { command: Command; rest: readonly string[] } | undefined {
  const [first, second] = argv;
  if (second !== undefined && !second.startsWith("-")) {
    const pair = registry.find("command", `${first} ${second}`);
    if (pair) return { command: pair, rest: argv.slice(2) };
  }
  const single = registry.find("command", first);
  return single ? { command: single, rest: argv.slice(1) } : undefined;
}

/** Run the command `argv` names; resolves to the process exit code. */
export async function dispatch(
  argv: readonly string[],
  registry: Registry,
  options?: DispatchOptions,
): Promise<number> {
  const io = options?.io ?? denoIo();
  const program = options?.program ?? "cotal";
  const [first] = argv;
  if (first === "help" && argv.length > 1) {
    // `cotal help up` is `cotal up --help`.
    return await dispatch([...argv.slice(1), "--help"], registry, options);
  }
  if (first === "--help" || first === "-h" || first === "help") {
    io.stdout(overviewText(registry, program));
    return 0;
  }
  if (first === "--version" || first === "-V" || first === "version") {
    io.stdout(`${program} ${options?.version ?? "(unversioned)"}\n`);
    return 0;
  }
  let json = wantsJson(argv);
  try {
    if (first === undefined || first.startsWith("-")) {
      io.stderr(overviewText(registry, program));
      throw new CotalError(
        "usage",
        first === undefined
          ? `No command given; run "${program} --help" to list the commands.`
          : `Expected a command before the flag ${first}; run "${program} --help" to list the commands.`,
      );
    }
    const found = findCommand(argv, registry);
    // A group's name alone (`cotal space`): name its subcommands.
    const subs = registry.list("command").map((c) => c.name)
      .filter((n) => n.startsWith(`${first} `)).map((n) => n.slice(first.length + 1)).sort();
    // `cotal space --help`: the group's subcommands, as help (exit 0), not a usage error.
    if (found === undefined && subs.length > 0 && (argv[1] === "--help" || argv[1] === "-h")) {
      io.stdout(
        `${program} ${first}: ${subs.join(", ")}; run "${program} ${first} <subcommand> --help".\n`,
      );
      return 0;
    }
    if (found === undefined && subs.length > 0) {
      throw new CotalError(
        "usage",
        `"${first}" needs a subcommand: ${
          subs.join(", ")
        }; run "${program} ${first} <subcommand> --help".`,
      );
    }
    if (found === undefined) {
      throw new CotalError(
        "usage",
        `Unknown command "${first}"; run "${program} --help" to list the commands.`,
      );
    }
    const { command, rest } = found;
    if (helpRequested(command, rest)) {
      io.stdout(helpText(command, program));
      return 0;
    }
    const args = parseCommandArgs(command, rest, { program });
    json = args.values.json === true;
    const code = await command.run(args);
    return typeof code === "number" ? code : 0;
  } catch (err) {
    if (!isCotalError(err)) throw err;
    printError(io, { json }, err, program);
    return INPUT_REFUSALS.has(err.code) ? 2 : 1;
  }
}

/**
 * Codes that refuse what the command was given (a flag, a name, a value), whichever side
 * judged it: exit 2, like a usage error; anything the mesh or the host failed exits 1. A
 * script can then tell "fix the command" from "try again" (newcomer pass 11 found a bad
 * --role exit 1 and a bad --net exit 2).
 */
export const INPUT_REFUSALS: ReadonlySet<string> = new Set([
  "usage",
  "spawn_bad_args",
  "spawn_request_invalid",
  "limits_invalid",
  "name_reserved",
  "unknown_connector",
  "agent_unknown_builtin",
  "invalid_channel",
  "invalid_principal",
  "invalid_space",
  "invalid_lifetime",
  "persona_unknown",
  "space_unknown",
]);
