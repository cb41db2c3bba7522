/**
 * Space names as the operator may type them: 1 to 64 letters, digits, `_` or `-`.
 *
 * @module
 */
import { CotalError } from "../errors.ts";

const SPACE_NAME = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * Checks a space name given to the operator CLI. It must be its own wire token (letters,
 * digits, `_` and `-`, at most 64): a name the token rule would rewrite could alias another
 * space's streams (`a.b` and `a_b` share `CHAT_a_b`), so it is refused, never rewritten.
 */
export function assertValidSpaceName(space: string | undefined): string {
  if (space === undefined || !SPACE_NAME.test(space)) {
    throw new CotalError(
      "usage",
      `${
        space === undefined ? "No space name was given" : `'${space}' is not a usable space name`
      }; use 1 to 64 letters, digits, '_' or '-', like 'team-alpha'.`,
    );
  }
  return space;
}
