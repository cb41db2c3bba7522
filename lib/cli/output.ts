/**
 * Where command output goes, and the human vs `--json` split: results go to stdout (one JSON
 * document in `--json` mode), everything for people (progress, warnings, errors) to stderr.
 *
 * @module
 */

import type { CotalError } from "../errors.ts";
import { safeText } from "../safe_text.ts";

/** The two output streams a command writes to, and whether stderr is a terminal. */
export interface CliIo {
  stdout(text: string): void;
  stderr(text: string): void;
  readonly stderrIsTerminal: boolean;
}

/** A {@linkcode CliIo} that collects output in memory (tests, embedders capturing output). */
export interface BufferIo extends CliIo {
  readonly out: string;
  readonly err: string;
}

/** The process's real stdout and stderr. */
export function denoIo(): CliIo {
  const encoder = new TextEncoder();
  const writeAll = (stream: typeof Deno.stdout | typeof Deno.stderr, text: string) => {
    const bytes = encoder.encode(text);
    let offset = 0;
    while (offset < bytes.length) offset += stream.writeSync(bytes.subarray(offset));
  };
  return {
    stdout: (text) => writeAll(Deno.stdout, text),
    stderr: (text) => writeAll(Deno.stderr, text),
    stderrIsTerminal: Deno.stderr.isTerminal(),
  };
}

/** An in-memory {@linkcode CliIo}; `stderrIsTerminal` lets tests drive the TTY paths. */
export function bufferIo(options?: { stderrIsTerminal?: boolean }): BufferIo {
  let out = "";
  let err = "";
  return {
    stdout: (text) => void (out += text),
    stderr: (text) => void (err += text),
    stderrIsTerminal: options?.stderrIsTerminal ?? false,
    get out() {
      return out;
    },
    get err() {
      return err;
    },
  };
}

function line(text: string): string {
  return text.endsWith("\n") ? text : `${text}\n`;
}

/**
 * The `--json` flag, for a command to spread into its flags:
 * `flags: { ...JSON_FLAG, space: {...} }`.
 */
export const JSON_FLAG = {
  json: { type: "boolean", description: "print the result as JSON on stdout" },
} as const;

/**
 * Print a command's result: `JSON.stringify(value)` in JSON mode, else `human(value)` (or the
 * value itself when it is a string).
 */
export function printResult<T>(
  io: CliIo,
  mode: { readonly json: boolean },
  value: T,
  human?: (value: T) => string,
): void {
  if (mode.json) {
    io.stdout(`${JSON.stringify(value, null, 2)}\n`);
    return;
  }
  // Human output may quote agent or message text: its control characters are shown, not run.
  io.stdout(
    line(
      safeText(
        human ? human(value) : typeof value === "string" ? value : JSON.stringify(value, null, 2),
        { lines: true },
      ),
    ),
  );
}

/**
 * Print a list: the rows as JSON, or one line per row (`line`), or `empty` when there are none.
 */
export function printList<T>(
  io: CliIo,
  mode: { readonly json: boolean },
  rows: readonly T[],
  line: (row: T) => string,
  empty: string,
): void {
  printResult(io, mode, rows, (r) => r.length ? r.map(line).join("\n") : empty);
}

/**
 * Print a refusal: `{"error":{code,message}}` on stdout in JSON mode (so scripts parse one
 * document either way), else `<program>: <sentence>` on stderr.
 */
export function printError(
  io: CliIo,
  mode: { readonly json: boolean },
  err: CotalError,
  program = "cotal",
): void {
  if (mode.json) {
    io.stdout(`${JSON.stringify({ error: { code: err.code, message: err.message } }, null, 2)}\n`);
    return;
  }
  io.stderr(line(`${program}: ${safeText(err.message)}`));
}
