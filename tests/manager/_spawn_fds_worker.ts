// A second isolate in the test's process (what `deno test --parallel` and an embedder's Worker
// are): it starts children through spawnWithFds as fast as it can and reports how many of
// them could not read the descriptor they were handed.
import { spawnWithFds } from "../../lib/manager/sandbox/spawn_fds.ts";

const self = globalThis as unknown as {
  onmessage: (e: MessageEvent<{ rounds: number; tag: number }>) => void;
  postMessage: (m: unknown) => void;
};

self.onmessage = async (e) => {
  const { rounds, tag } = e.data;
  const failures: string[] = [];
  for (let i = 0; i < rounds; i++) {
    const payload = new TextEncoder().encode(`isolate ${tag} round ${i}\n`);
    const { result } = await spawnWithFds({ seccomp: payload }, (fds) =>
      Promise.resolve(
        new Deno.Command("/bin/cat", {
          args: [`/dev/fd/${fds.seccomp}`],
          stdout: "piped",
          stderr: "piped",
        }).spawn(),
      ));
    const out = await result.output();
    const got = new TextDecoder().decode(out.stdout);
    if (got !== new TextDecoder().decode(payload)) {
      failures.push(`${got.trim() || "(nothing)"} ${new TextDecoder().decode(out.stderr).trim()}`);
    }
  }
  self.postMessage(failures);
};
