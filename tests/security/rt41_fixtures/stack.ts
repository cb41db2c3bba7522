/**
 * Red team 41's stack: red team 40's (`../rt40_fixtures/stack.ts`), with its base under
 * `/tmp/rt41/`, its broker port in 45000-45880 and this directory's fixtures.
 */
import { nsStack, type Rt40Stack } from "../rt40_fixtures/stack.ts";

export { sleep, waitFor } from "../rt40_fixtures/stack.ts";
export type Rt41Stack = Rt40Stack;

export function rt41Stack(
  tag: string,
  files: string[],
  setup: string[][] = [],
): Promise<Rt41Stack> {
  const fixtures = new URL(".", import.meta.url).pathname;
  return nsStack({ dir: "/tmp/rt41", portBase: 45_000, fixtures }, tag, files, setup);
}
