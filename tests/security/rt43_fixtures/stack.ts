/**
 * Red team 43's stack: red team 40's (`../rt40_fixtures/stack.ts`), with its base under
 * `/tmp/rt43/`, its broker port in 43000-43880 and this directory's fixtures.
 */
import { nsStack, type Rt40Stack } from "../rt40_fixtures/stack.ts";

export { sleep, waitFor } from "../rt40_fixtures/stack.ts";
export type Rt43Stack = Rt40Stack;

export function rt43Stack(
  tag: string,
  files: string[],
  setup: string[][] = [],
): Promise<Rt43Stack> {
  const fixtures = new URL(".", import.meta.url).pathname;
  return nsStack({ dir: "/tmp/rt43", portBase: 43_000, fixtures }, tag, files, setup);
}
