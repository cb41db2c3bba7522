/**
 * Usage lines and `--help` text, generated from the same spec the parser reads, so the help
 * can never drift from what the parser accepts.
 *
 * @module
 */

import { checkCommandSpec } from "./spec.ts";
import type { CommandSpec, FlagSpec } from "../command_types.ts";

function placeholder(name: string, flag: FlagSpec): string {
  return flag.type === "string" ? ` <${flag.value ?? name}>` : "";
}

function positionalUsage(command: CommandSpec): string {
  return (command.positionals ?? []).map((p) => {
    const word = `<${p.name}>${p.variadic ? "..." : ""}`;
    return p.required ? word : `[${word}]`;
  }).join(" ");
}

/** One line: `Usage: cotal <name> <required flags> [options] <positionals>`. */
export function usageLine(command: CommandSpec, program = "cotal"): string {
  checkCommandSpec(command);
  const parts = [`${program} ${command.name}`];
  for (const [name, flag] of Object.entries(command.flags)) {
    if (flag.required) parts.push(`--${name}${placeholder(name, flag)}`);
  }
  parts.push("[options]");
  const positionals = positionalUsage(command);
  if (positionals) parts.push(positionals);
  return `Usage: ${parts.join(" ")}`;
}

function defaultText(flag: FlagSpec): string {
  if (flag.default === undefined || flag.default === false) return "";
  return ` (default: ${
    Array.isArray(flag.default) ? flag.default.join(", ") : String(flag.default)
  })`;
}

function table(rows: [string, string][]): string[] {
  const width = Math.max(...rows.map(([left]) => left.length));
  return rows.map(([left, right]) => `  ${left.padEnd(width)}  ${right}`.trimEnd());
}

/** The full `--help` text: summary, usage, arguments and every flag with its description. */
export function helpText(command: CommandSpec, program = "cotal"): string {
  checkCommandSpec(command);
  const lines = [`${program} ${command.name}: ${command.summary}`, "", usageLine(command, program)];
  const positionals = command.positionals ?? [];
  if (positionals.length > 0) {
    lines.push("", "Arguments:");
    lines.push(...table(positionals.map((p) => [
      `<${p.name}>${p.variadic ? "..." : ""}`,
      `${p.description}${p.required ? " (required)" : ""}`,
    ])));
  }
  const rows: [string, string][] = Object.entries(command.flags).map(([name, flag]) => [
    `${flag.short ? `-${flag.short}, ` : "    "}--${name}${placeholder(name, flag)}${
      flag.multiple ? "..." : ""
    }`,
    `${flag.description}${flag.required ? " (required)" : ""}${
      flag.multiple ? " (repeatable)" : ""
    }${defaultText(flag)}`,
  ]);
  rows.push(["-h, --help", "show this help"]);
  lines.push("", "Options:", ...table(rows));
  return `${lines.join("\n")}\n`;
}
