/**
 * `defineCommand`: author a command with value types derived from its `as const` flag spec,
 * and get back the plain `Command` the registry stores.
 *
 * @module
 */

import type { Command } from "../registry.ts";
import { checkCommandSpec } from "./spec.ts";
import type { FlagsSpec } from "../command_types.ts";

/** Check `command`'s spec now (throws `cli_bad_spec`) and return it as a registrable `Command`. */
export function defineCommand<const F extends FlagsSpec>(command: Command<F>): Command {
  checkCommandSpec(command);
  return command as unknown as Command;
}
