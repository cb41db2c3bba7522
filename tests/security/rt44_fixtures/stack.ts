/**
 * Red team 44's stack: red team 40's (`../rt40_fixtures/stack.ts`), with its base under
 * `/tmp/rt44/`, its broker port in 42000-42880 and this directory's fixtures.
 */
import { nsStack, type Rt40Stack } from "../rt40_fixtures/stack.ts";

export { sleep, waitFor } from "../rt40_fixtures/stack.ts";
export type Rt44Stack = Rt40Stack;

export function rt44Stack(
  tag: string,
  files: string[],
  setup: string[][] = [],
): Promise<Rt44Stack> {
  const fixtures = new URL(".", import.meta.url).pathname;
  return nsStack({ dir: "/tmp/rt44", portBase: 42_000, fixtures }, tag, files, setup);
}
