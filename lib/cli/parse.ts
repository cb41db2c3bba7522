/**
 * Parse a command's argv against its declared spec with `node:util` `parseArgs` in strict
 * mode, turning every refusal into a `usage` CotalError that names the flag and points at
 * `--help`.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { CotalError } from "../errors.ts";
import { checkCommandSpec } from "./spec.ts";
import type { CommandSpec, FlagValue, ParsedArgs } from "../command_types.ts";

/** Options for {@linkcode parseCommandArgs} and {@linkcode helpRequested}. */
export interface ParseOptions {
  /** Program name used in messages (`cotal`). */
  readonly program?: string;
}

type Token = NonNullable<ReturnType<typeof parseArgs>["tokens"]>[number];
type ParseArgsOptions = Record<
  string,
  {
    type: "string" | "boolean";
    short?: string;
    multiple?: boolean;
    default?: string | boolean | string[] | boolean[];
  }
>;

function parserOptions(command: CommandSpec): ParseArgsOptions {
  const options: ParseArgsOptions = { help: { type: "boolean", short: "h" } };
  for (const [name, flag] of Object.entries(command.flags)) {
    options[name] = {
      type: flag.type,
      ...(flag.short !== undefined ? { short: flag.short } : {}),
      ...(flag.multiple ? { multiple: true } : {}),
      ...(flag.default !== undefined
        ? {
          default: (Array.isArray(flag.default) ? [...flag.default] : flag.default) as
            | string
            | boolean
            | string[]
            | boolean[],
        }
        : {}),
    };
  }
  return options;
}

/** The `usage` error: `what` is the sentence's first half; the second always points at --help. */
export function usageError(what: string, command: CommandSpec, options?: ParseOptions): CotalError {
  const program = options?.program ?? "cotal";
  return new CotalError(
    "usage",
    `${what}; run "${program} ${command.name} --help" for the flags and arguments it takes.`,
  );
}

function lenientTokens(command: CommandSpec, argv: readonly string[]): Token[] {
  return parseArgs({
    args: [...argv],
    options: parserOptions(command),
    strict: false,
    allowPositionals: true,
    tokens: true,
  }).tokens;
}

/** Explain a strict-mode failure by finding the offending token in a lenient re-parse. */
function diagnose(command: CommandSpec, argv: readonly string[], err: unknown): string {
  const known = parserOptions(command);
  let after: string | undefined;
  for (const token of lenientTokens(command, argv)) {
    if (token.kind === "positional") after ??= token.value;
    if (token.kind !== "option") continue;
    const spec = known[token.name];
    const shown = token.rawName;
    if (spec === undefined) {
      // `cotal spawn sh -c ...`: the flag belongs to the program named before it.
      // Only a command that takes a program and its arguments (a variadic positional) can
      // have been handed a program's flag (`cotal logs watchdog --json` was told to use '--').
      const takesProgram = command.positionals?.some((p) => p.variadic) === true;
      return `Unknown flag ${shown} for "${command.name}"${
        after !== undefined && takesProgram
          ? ` (if it is ${JSON.stringify(after)}'s own, put the program after '--': ` +
            `... -- ${after} ${shown} ...)`
          : ""
      }`;
    }
    if (spec.type === "boolean" && token.value !== undefined) {
      return `The flag ${shown} takes no value but was given ${JSON.stringify(token.value)}`;
    }
    if (spec.type === "string" && token.value === undefined) {
      return `The flag ${shown} needs a value`;
    }
    if (spec.type === "string" && !token.inlineValue && token.value?.startsWith("-")) {
      return `The flag ${shown} needs a value but is followed by the flag ${
        JSON.stringify(token.value)
      } (write ${shown}=<value> if the value starts with a dash)`;
    }
  }
  return `The arguments could not be parsed (${err instanceof Error ? err.message : String(err)})`;
}

/**
 * True when argv asks for help (`--help` or `-h` before any `--`), even if the rest would not
 * parse, so `cotal up --bogus --help` still shows help.
 */
export function helpRequested(command: CommandSpec, argv: readonly string[]): boolean {
  checkCommandSpec(command);
  return lenientTokens(command, argv).some((t) => t.kind === "option" && t.name === "help");
}

/**
 * Parse `argv` (the words after the command's name) against `command`'s spec. Refuses unknown
 * flags, repeated non-`multiple` flags, missing or empty values, values on boolean flags,
 * missing required flags and positionals, and surplus positionals, each as a `usage` error.
 */
export function parseCommandArgs(
  command: CommandSpec,
  argv: readonly string[],
  options?: ParseOptions,
): ParsedArgs {
  checkCommandSpec(command);
  let parsed: { values: Record<string, unknown>; positionals: string[]; tokens: Token[] };
  try {
    parsed = parseArgs({
      args: [...argv],
      options: parserOptions(command),
      strict: true,
      allowPositionals: true,
      tokens: true,
    });
  } catch (err) {
    throw usageError(diagnose(command, argv, err), command, options);
  }

  // parseArgs keeps the last of repeated non-multiple flags; a silently dropped `--space` is a
  // wrong-tenant accident waiting to happen, so a repeat is refused.
  const seen = new Map<string, string[]>();
  for (const token of parsed.tokens) {
    if (token.kind !== "option") continue;
    seen.set(token.name, [...(seen.get(token.name) ?? []), token.rawName]);
    if (token.value === "" && command.flags[token.name]?.type === "string") {
      throw usageError(`The flag ${token.rawName} was given an empty value`, command, options);
    }
  }
  for (const [name, raws] of seen) {
    if (raws.length > 1 && !command.flags[name]?.multiple && name !== "help") {
      throw usageError(
        `The flag --${name} was given ${raws.length} times (${raws.join(", ")}); give it once`,
        command,
        options,
      );
    }
  }

  const values: Record<string, FlagValue> = {};
  for (const [name, value] of Object.entries(parsed.values)) {
    if (name !== "help") values[name] = value as FlagValue;
  }
  for (const [name, flag] of Object.entries(command.flags)) {
    if (flag.required && values[name] === undefined) {
      throw usageError(`The flag --${name} is required`, command, options);
    }
  }

  const positionals = [...parsed.positionals];
  const declared = command.positionals ?? [];
  const variadic = declared.at(-1)?.variadic === true;
  if (!variadic && positionals.length > declared.length) {
    const extra = positionals.slice(declared.length).map((p) => JSON.stringify(p)).join(", ");
    throw usageError(
      declared.length === 0
        ? `"${command.name}" takes no arguments but was given ${extra}`
        : `"${command.name}" takes at most ${declared.length} argument(s) but was also given ${extra}`,
      command,
      options,
    );
  }
  declared.forEach((p, i) => {
    if (p.required && positionals[i] === undefined) {
      throw usageError(`The argument <${p.name}> is missing`, command, options);
    }
  });
  return { values, positionals, raw: [...argv] };
}
