/**
 * Checks a command's declared flags and positionals once, so a malformed spec fails at
 * registration-time tests rather than as a confusing parse error for an operator.
 *
 * @module
 */

import { CotalError } from "../errors.ts";
import type { CommandSpec } from "../command_types.ts";

const FLAG_NAME = /^[a-z][a-z0-9]*(-[a-z0-9]+)*$/;
const SHORT_NAME = /^[A-Za-z0-9]$/;
const checked = new WeakSet<CommandSpec>();

function bad(command: CommandSpec, why: string): never {
  throw new CotalError(
    "cli_bad_spec",
    `The command "${command.name}" declares ${why}; fix its spec.`,
  );
}

/** Throw `cli_bad_spec` unless `command`'s flag and positional spec is well formed. */
export function checkCommandSpec(command: CommandSpec): void {
  if (checked.has(command)) return;
  if (!/^[a-z][a-z0-9-]*( [a-z][a-z0-9-]*)?$/.test(command.name)) {
    bad(command, "a name that is not one or two lowercase words");
  }
  const shorts = new Set<string>();
  for (const [name, flag] of Object.entries(command.flags)) {
    if (!FLAG_NAME.test(name)) bad(command, `the flag name "${name}" (use lowercase-with-dashes)`);
    if (name === "help") bad(command, 'a "help" flag, which every command gets built in');
    if (flag.type !== "string" && flag.type !== "boolean") {
      bad(command, `the flag --${name} with a type other than "string" or "boolean"`);
    }
    if (flag.short !== undefined) {
      if (!SHORT_NAME.test(flag.short)) {
        bad(command, `the short alias "${flag.short}" for --${name}`);
      }
      if (flag.short === "h") bad(command, `-h for --${name}, but -h is --help`);
      if (shorts.has(flag.short)) bad(command, `the short alias -${flag.short} twice`);
      shorts.add(flag.short);
    }
    if (flag.default !== undefined) {
      const values = Array.isArray(flag.default) ? flag.default : [flag.default];
      if (Array.isArray(flag.default) !== (flag.multiple === true)) {
        bad(command, `a default for --${name} that is ${flag.multiple ? "not " : ""}an array`);
      }
      if (
        values.some((
          v,
        ) => (flag.type === "string" ? typeof v !== "string" : typeof v !== "boolean"))
      ) {
        bad(command, `a default for --${name} that is not a ${flag.type}`);
      }
    }
    if (flag.required && flag.default !== undefined) {
      bad(command, `--${name} as both required and defaulted`);
    }
  }
  const positionals = command.positionals ?? [];
  positionals.forEach((p, i) => {
    if (p.variadic && i !== positionals.length - 1) {
      bad(command, `the variadic positional <${p.name}> before the last position`);
    }
    if (p.required && i > 0 && !positionals[i - 1].required) {
      bad(command, `the required positional <${p.name}> after an optional one`);
    }
  });
  checked.add(command);
}
