/**
 * Red team 39's stack: red team 38's (`../rt38_fixtures/stack.ts`), with the agent's workdir
 * holding this directory's python3 fixtures.
 */
import { type Rt38Stack, rt38Stack } from "../rt38_fixtures/stack.ts";

export { sleep } from "../rt38_fixtures/stack.ts";

/** A stack in a network namespace of its own; `files` come from this directory. */
export function rt39Stack(tag: string, files: string[]): Promise<Rt38Stack> {
  return rt38Stack(tag, files, new URL(".", import.meta.url).pathname);
}
