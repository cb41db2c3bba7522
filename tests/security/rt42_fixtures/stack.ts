/**
 * Red team 42's stack: red team 40's (`../rt40_fixtures/stack.ts`), with its base under
 * `/tmp/rt42/`, its broker port in 44000-44880 and this directory's fixtures.
 */
import { nsStack, type Rt40Stack } from "../rt40_fixtures/stack.ts";

export { sleep, waitFor } from "../rt40_fixtures/stack.ts";
export type Rt42Stack = Rt40Stack;

export function rt42Stack(
  tag: string,
  files: string[],
  setup: string[][] = [],
): Promise<Rt42Stack> {
  const fixtures = new URL(".", import.meta.url).pathname;
  return nsStack({ dir: "/tmp/rt42", portBase: 44_000, fixtures }, tag, files, setup);
}
