/**
 * CLI kernel: flag specs drive parsing, `--help` and usage; output helpers split human and
 * `--json` printing; a progress reporter for long steps; `dispatch` runs a registered command.
 *
 * @module
 */

export type { CommandSpec, ParsedArgs } from "../command_types.ts";
export { checkCommandSpec } from "./spec.ts";
export { helpRequested, parseCommandArgs } from "./parse.ts";
export { helpText, usageLine } from "./help.ts";
export { bufferIo, denoIo, JSON_FLAG, printError, printList, printResult } from "./output.ts";
export { createProgress, liveLine } from "./progress.ts";
export { dispatch } from "./dispatch.ts";
export { defineCommand } from "./define.ts";

// For the other areas of lib/ (not part of the embedder's contract in the root mod.ts).
export { ATTACH_RESET, AttachFilter } from "./attach_filter.ts";
export { daemonMain } from "./daemon_main.ts";
export { cotalCommand, denoTaskCommand } from "./invocation.ts";
export { TextLineStream } from "./lines.ts";
export { consoleSize, parseSize } from "./term_size.ts";
