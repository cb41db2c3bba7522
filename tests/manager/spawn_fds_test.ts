import assert from "node:assert/strict";
import { closeFd, pipe, setCloseOnExec } from "../../lib/manager/sandbox/libc.ts";
import { spawnWithFds } from "../../lib/manager/sandbox/spawn_fds.ts";

async function childFds(fds: { seccomp?: Uint8Array; sync?: boolean }) {
  const { result, sync } = await spawnWithFds(fds, (given) =>
    Promise.resolve({
      given,
      child: new Deno.Command("/bin/ls", {
        args: ["-l", "/proc/self/fd/"],
        stdout: "piped",
        stderr: "null",
      }).spawn(),
    }));
  if (sync) {
    closeFd(sync.infoRead);
    closeFd(sync.blockWrite);
  }
  const text = new TextDecoder().decode((await result.child.output()).stdout);
  const open = [...text.matchAll(/ (\d+) -> (.*)/g)].map((m) => [Number(m[1]), m[2]] as const);
  return { given: result.given, open };
}

Deno.test("spawn fds - a child gets 0-2 and the pipes bwrap reads, never a leaked descriptor", async () => {
  // A descriptor left inheritable, as node-pty leaves each agent's pty master.
  const leaked = pipe();
  setCloseOnExec(leaked.read, false);
  setCloseOnExec(leaked.write, false);
  try {
    const { given, open } = await childFds({ seccomp: new Uint8Array(16), sync: true });
    const numbers = open.map(([n]) => n);
    assert.ok(!numbers.includes(leaked.read) && !numbers.includes(leaked.write), String(numbers));
    for (const fd of [given.seccomp!, given.info!, given.block!]) {
      assert.ok(numbers.includes(fd), String(fd));
    }
    // Nothing else but stdio and ls's own listing.
    const extra = open.filter(([n, t]) =>
      n > 2 && ![given.seccomp, given.info, given.block].includes(n) && !t.startsWith("/proc/")
    );
    assert.deepEqual(extra, []);
    // And afterwards the supervisor holds none of the child's ends.
    const again = await childFds({});
    assert.deepEqual(again.open.filter(([n, t]) => n > 2 && !t.startsWith("/proc/")), []);
  } finally {
    closeFd(leaked.read);
    closeFd(leaked.write);
  }
});
