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

Deno.test("spawn fds - two isolates of one process spawning at once each hand their child its own descriptor", async () => {
  // `deno test --parallel` runs test files as isolates on threads of one process, and an
  // embedder may run a Manager in a Worker: each isolate's spawns were serialized only among
  // themselves, so one isolate marked everything close-on-exec between the other's clearing
  // the flag on bwrap's pipe and its fork ("bwrap: Can't read seccomp data: Bad file
  // descriptor", "Write to info_fd: Bad file descriptor"), and the other's pipes leaked in.
  const rounds = 150;
  const workers = [0, 1].map(() =>
    new Worker(new URL("./_spawn_fds_worker.ts", import.meta.url), { type: "module" })
  );
  try {
    const results = await Promise.all(
      workers.map((w, tag) =>
        new Promise<string[]>((resolve, reject) => {
          const timer = setTimeout(
            () => reject(new Error("a worker did not finish in 120 s")),
            120_000,
          );
          w.onmessage = (e) => {
            clearTimeout(timer);
            resolve(e.data);
          };
          w.onerror = (e) => {
            clearTimeout(timer);
            reject(e.error ?? new Error(e.message));
          };
          w.postMessage({ rounds, tag });
        })
      ),
    );
    const failures = results.flat();
    assert.deepEqual(
      failures.slice(0, 5),
      [],
      `${failures.length} of ${2 * rounds} children could not read their descriptor`,
    );
  } finally {
    for (const w of workers) w.terminate();
  }
});
