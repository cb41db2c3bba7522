/**
 * The module a spawn names is copied into the agent's dir by the supervisor: only a regular
 * file is taken. A FIFO would block the copy (and a thread) forever, a symlink would let
 * whoever controls its directory point the supervisor at any file it can read.
 */
import assert from "node:assert/strict";
import { isCotalError } from "../../lib/errors.ts";
import { MAX_MODULE_BYTES, readModuleSource } from "../../lib/manager/agent_setup.ts";
import { tempDir } from "../_harness/broker.ts";

Deno.test("manager - a spawn's module must be a regular file: symlink, FIFO, directory and oversize are refused", async () => {
  const dir = await tempDir("cotal-module-src-");
  const good = `${dir}/agent.ts`;
  await Deno.writeTextFile(good, "export function run() {}\n");
  assert.equal(
    new TextDecoder().decode(await readModuleSource(good)),
    "export function run() {}\n",
  );

  await Deno.symlink(good, `${dir}/link.ts`);
  // A directory above the file that is a link (an agent's workdir swapped under a persona's
  // module: red team 43) is refused too, with the way out.
  await Deno.mkdir(`${dir}/real`);
  await Deno.writeTextFile(`${dir}/real/agent.ts`, "export function run() {}\n");
  await Deno.symlink(`${dir}/real`, `${dir}/linked`);
  const fifo = `${dir}/fifo.ts`;
  const mk = await new Deno.Command("mkfifo", { args: [fifo] }).output();
  assert.ok(mk.success, "mkfifo");
  await Deno.mkdir(`${dir}/dir.ts`);
  const big = `${dir}/big.ts`;
  const f = await Deno.open(big, { create: true, write: true });
  await f.truncate(MAX_MODULE_BYTES + 1);
  f.close();
  const cases: [string, RegExp][] = [
    [`${dir}/link.ts`, /is a symlink/],
    [`${dir}/linked/agent.ts`, /is reached through a symlink; name it by its real path/],
    [fifo, /is not a regular file/],
    [`${dir}/dir.ts`, /is not a regular file/],
    [big, /is too large/],
    [`${dir}/missing.ts`, /cannot be read/],
  ];
  for (const [path, why] of cases) {
    await assert.rejects(
      readModuleSource(path),
      (e: unknown) => isCotalError(e, "bad_module") && why.test((e as Error).message),
      path,
    );
  }
  await Deno.remove(dir, { recursive: true });
});
