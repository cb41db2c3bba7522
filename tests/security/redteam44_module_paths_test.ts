/**
 * Red team 44: point a root supervisor's module read (`readModuleSource`,
 * `lib/manager/agent_setup.ts`) at a file other than the one named, through paths that hold no
 * ordinary symlink: `/proc/self/root/<real path>` and `/proc/<pid>/cwd/...` (magic links, which
 * `lstat` on the last component does not see), `/proc/self/fd/<n>` of an open file, and
 * a plain `..` (real directories, which must still read). Each /proc path must be refused (a
 * magic link is a symlink to openat2's RESOLVE_NO_SYMLINKS), and the real path must read.
 * Observed: held; /proc/<pid|self|thread-self>/root refused as "reached through a symlink",
 * /proc/self/fd/<n> refused as "a symlink" (lstat), the `..` path read.
 */
import assert from "node:assert/strict";
import { readModuleSource } from "../../lib/manager/agent_setup.ts";

Deno.test("red team 44 - a module read follows no magic link in /proc", async () => {
  const dir = await Deno.makeTempDir({ dir: "/tmp/rt44", prefix: "mod-" });
  try {
    const real = `${dir}/mod.ts`;
    await Deno.writeTextFile(real, "export default 1;\n");
    assert.equal(new TextDecoder().decode(await readModuleSource(real)), "export default 1;\n");
    const f = await Deno.open(real);
    try {
      const paths = [
        `/proc/self/root${real}`,
        `/proc/${Deno.pid}/root${real}`,
        `/proc/thread-self/root${real}`,
        `/proc/self/cwd/${real.replace(`${Deno.cwd()}/`, "")}`,
        `${dir}/../${dir.split("/").pop()}/mod.ts`,
      ];
      // The open file's descriptor (rid is not the fd in Deno 2; find it by its target).
      for (const e of Deno.readDirSync("/proc/self/fd")) {
        try {
          if (Deno.readLinkSync(`/proc/self/fd/${e.name}`) === real) {
            paths.push(`/proc/self/fd/${e.name}`);
          }
        } catch {
          // Gone.
        }
      }
      for (const p of paths) {
        const r = await readModuleSource(p).then(
          (b) => `read ${b.length} bytes`,
          (e) => `refused: ${(e as Error).message}`,
        );
        console.log(`${p}: ${r}`);
        if (p.includes("/proc/")) assert.match(r, /^refused/, `${p} was read`);
      }
    } finally {
      f.close();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
